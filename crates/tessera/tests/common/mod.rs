//! Runs the real `tessera` binary as a separate process.
#![allow(dead_code)]

pub mod cluster;
pub mod proxy;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub const TESSERA: &str = env!("CARGO_BIN_EXE_tessera");

/// The ports tests hand to daemons as fixed addresses lie below the kernel's ephemeral range
/// (32768 and up on Linux), so neither a daemon listening on port 0 nor any outgoing connection
/// can take one between the moment it is chosen and the moment its daemon binds it. Each test
/// process starts at its own offset (from its pid) and never hands out a port twice.
const FIXED_PORTS: std::ops::Range<u32> = 10_000..32_000;

/// A port no one listens on, for a daemon started with a fixed address (a coordinator's peers
/// must be known before it starts).
pub fn free_port() -> u16 {
    reserve_port().1
}

/// A free port as [`free_port`], held by the listener returned until it is dropped.
pub fn reserve_port() -> (std::net::TcpListener, u16) {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let span = FIXED_PORTS.end - FIXED_PORTS.start;
    let start = std::process::id().wrapping_mul(7_919) % span;
    let _ = NEXT.compare_exchange(u32::MAX, start, Ordering::SeqCst, Ordering::SeqCst);
    for _ in 0..span {
        let port = FIXED_PORTS.start + NEXT.fetch_add(1, Ordering::SeqCst) % span;
        let port = u16::try_from(port).expect("the range lies below 65536");
        if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            return (listener, port);
        }
    }
    panic!("no free port in {FIXED_PORTS:?}");
}

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
    // TESSERA_TEST_LOG sets the daemons' log filter when a test needs looking into.
    let filter = std::env::var("TESSERA_TEST_LOG").unwrap_or_else(|_| "error,openraft=off".into());
    spawn_logging(args, data_dir, &filter, Stdio::inherit())
}

/// [`spawn_until_ready`] with the log filter `filter` and its log lines to `stderr`.
pub fn spawn_logging(
    args: &[&str],
    data_dir: &Path,
    filter: &str,
    stderr: Stdio,
) -> (Child, String) {
    let mut child = Command::new(TESSERA)
        .args(args)
        .arg(data_dir)
        .env("RUST_LOG", filter)
        .stdout(Stdio::piped())
        .stderr(stderr)
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

/// One `$ ` command of a console block (of the README or a page of docs/) and the output the
/// page shows under it.
pub struct Step {
    pub command: String,
    pub expected: String,
}

/// The steps of the first console block between `start` and `end` in `page`. A command with
/// a here-document runs until its terminator line.
pub fn console_steps(page: &str, start: &str, end: &str) -> Vec<Step> {
    let from = page.find(start).expect("start marker");
    let to = page.find(end).expect("end marker");
    let block: Vec<&str> = page[from..to]
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
