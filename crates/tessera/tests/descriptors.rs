//! Out of file descriptors (issue "Security and limits", item 6): `tessera dev` under a limit of
//! 300 open files, and 2000 connections opened to it and left idle. The server fits its
//! connection cap under the limit, so a legitimate client still gets an answer or a clear
//! refusal (`UNAVAILABLE: too many connections`), never a silent hang; once the idle
//! connections close, it is served again.

mod common;

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::TESSERA;

#[test]
fn a_client_gets_an_answer_or_a_refusal_when_descriptors_run_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut dev = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -n 300 && exec {TESSERA} dev --listen 127.0.0.1:0 --data-dir {}",
            dir.path().join("data").display()
        ))
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(dev.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("ready on ")
        .nth(1)
        .unwrap()
        .split([',', ' '])
        .next()
        .unwrap()
        .to_string();

    let idle: Vec<TcpStream> = (0..2000)
        .filter_map(|_| TcpStream::connect(&addr).ok())
        .collect();
    assert!(idle.len() >= 1000, "only {} connections opened", idle.len());

    // A legitimate client: its command ends in time, with an answer or a clear refusal.
    let started = Instant::now();
    let out = Command::new(TESSERA)
        .args(["--addr", &addr, "--timeout", "5", "status"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the client waited {:?}",
        started.elapsed()
    );
    assert!(
        out.status.success() || said.contains("too many connections"),
        "neither an answer nor a clear refusal: {said}"
    );

    drop(idle);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = Command::new(TESSERA)
            .args(["--addr", &addr, "status"])
            .output()
            .unwrap();
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not served again: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = dev.kill();
    let _ = dev.wait();
}
