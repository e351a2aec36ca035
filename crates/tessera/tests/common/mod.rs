//! Runs the real `tessera` binary as a separate process.
#![allow(dead_code)]

pub mod cluster;
pub mod proxy;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub const TESSERA: &str = env!("CARGO_BIN_EXE_tessera");

/// Runs one `tessera` command against `addr` (as `TESSERA_ADDR`) with `stdin` as its input,
/// and waits for it.
pub fn tessera_with_input(addr: &str, args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new(TESSERA)
        .args(args)
        .env("TESSERA_ADDR", addr)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running tessera");
    let mut input = child.stdin.take().expect("piped");
    // A command that fails before reading its input (a bad flag) closes the pipe: the test
    // checks what it printed, so a broken pipe here is no error.
    match input.write_all(stdin.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("writing stdin: {e}"),
        _ => {}
    }
    drop(input);
    child.wait_with_output().expect("tessera exits")
}

/// A `tessera dev` process. Killed (SIGKILL) when dropped.
pub struct DevServer {
    pub child: Child,
    pub addr: String,
}

impl DevServer {
    /// Starts `tessera dev` on a free loopback port and waits for its ready line.
    pub fn start(data_dir: &Path) -> DevServer {
        DevServer::start_with(&[], data_dir)
    }

    /// [`DevServer::start`] with more flags for `tessera dev`.
    pub fn start_with(args: &[&str], data_dir: &Path) -> DevServer {
        let mut all = vec!["dev"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--listen", "127.0.0.1:0", "--data-dir"]);
        let (child, addr) = spawn_until_ready(&all, data_dir);
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
        let (child, addr) = spawn_until_ready(args, data_dir);
        Daemon { child, addr }
    }
}

/// Runs `tessera ARGS DATA_DIR` and waits for its ready line ("...: ready on ADDR, ..." or
/// "...: ready on ADDR (...)"); returns the process and ADDR.
fn spawn_until_ready(args: &[&str], data_dir: &Path) -> (Child, String) {
    let mut child = Command::new(TESSERA)
        .args(args)
        .arg(data_dir)
        // TESSERA_TEST_LOG sets the daemons' log filter when a test needs looking into.
        .env(
            "RUST_LOG",
            std::env::var("TESSERA_TEST_LOG").unwrap_or_else(|_| "error,openraft=off".into()),
        )
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
    (child, addr)
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `$ ` command of a README console block and the output the README shows under it.
pub struct Step {
    pub command: String,
    pub expected: String,
}

/// The steps of the first console block between `start` and `end` in `readme`. A command with
/// a here-document runs until its terminator line.
pub fn console_steps(readme: &str, start: &str, end: &str) -> Vec<Step> {
    let from = readme.find(start).expect("start marker");
    let to = readme.find(end).expect("end marker");
    let block: Vec<&str> = readme[from..to]
        .lines()
        .skip_while(|l| !l.starts_with("```console"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .collect();
    let mut steps: Vec<Step> = Vec::new();
    let mut lines = block.into_iter();
    while let Some(line) = lines.next() {
        if let Some(command) = line.strip_prefix("$ ") {
            let mut command = command.to_owned();
            if let Some(at) = command.find("<<'") {
                let terminator = command[at + 3..]
                    .split('\'')
                    .next()
                    .expect("a terminator")
                    .to_owned();
                for body in lines.by_ref() {
                    command.push('\n');
                    command.push_str(body);
                    if body == terminator {
                        break;
                    }
                }
            }
            steps.push(Step {
                command,
                expected: String::new(),
            });
        } else {
            let step = steps.last_mut().expect("output before any command");
            step.expected.push_str(line);
            step.expected.push('\n');
        }
    }
    steps
}
