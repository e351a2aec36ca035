//! Runs the real `tessera` binary as a separate process.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub const TESSERA: &str = env!("CARGO_BIN_EXE_tessera");

/// A `tessera dev` process. Killed (SIGKILL) when dropped.
pub struct DevServer {
    pub child: Child,
    pub addr: String,
}

impl DevServer {
    /// Starts `tessera dev` on a free loopback port and waits for its ready line.
    pub fn start(data_dir: &Path) -> DevServer {
        let mut child = Command::new(TESSERA)
            .args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning tessera dev");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("reading the ready line");
        // "tessera dev: ready on 127.0.0.1:PORT, data in DIR"
        let addr = line
            .split("ready on ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_else(|| panic!("unexpected first line from tessera dev: {line:?}"))
            .to_owned();
        DevServer { child, addr }
    }

    /// Kills the process with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for DevServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A `tessera coordinator` or `tessera server` process, started with `args` then its data
/// directory, after its ready line ("...: ready on ADDR, ..."). Killed (SIGKILL) when dropped.
pub struct Daemon {
    pub child: Child,
    pub addr: String,
}

impl Daemon {
    pub fn start(args: &[&str], data_dir: &Path) -> Daemon {
        let mut child = Command::new(TESSERA)
            .args(args)
            .arg(data_dir)
            .env("RUST_LOG", "error,openraft=off")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning tessera");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("reading the ready line");
        let addr = line
            .split("ready on ")
            .nth(1)
            .and_then(|rest| rest.split([',', ' ']).next())
            .unwrap_or_else(|| panic!("unexpected first line from tessera {args:?}: {line:?}"))
            .to_owned();
        Daemon { child, addr }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
