//! Security from the command line (issue "Security and limits"): the safe default (no
//! unprotected listening beyond loopback), client tokens with `--token` / `TESSERA_TOKEN`
//! against `tessera dev --auth` and a reload on SIGHUP, and a two-process cluster whose
//! coordinator and server share a secret and serve TLS with certificates from `tessera certs`.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Daemon, TESSERA};

const READER: &str = "reader-0123456789abcdef";
const WRITER: &str = "writer-0123456789abcdef";
const ADMIN: &str = "admin-0123456789abcdef";
const SPACE: &str = "space kv key k attributes int n subspace n";

/// `tessera ARGS` as a client of `addr`, with `token` in TESSERA_TOKEN.
fn tessera(addr: &str, token: Option<&str>, args: &[&str]) -> Output {
    tessera_tls(addr, token, None, args)
}

/// [`tessera`], trusting the authority `ca` (TESSERA_TLS_CA) if given.
fn tessera_tls(addr: &str, token: Option<&str>, ca: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(TESSERA);
    command
        .args(args)
        .env("TESSERA_ADDR", addr)
        .env_remove("TESSERA_TOKEN")
        .env_remove("TESSERA_TLS_CA");
    if let Some(t) = token {
        command.env("TESSERA_TOKEN", t);
    }
    if let Some(ca) = ca {
        command.env("TESSERA_TLS_CA", ca);
    }
    command.output().expect("running tessera")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A daemon that must refuse to start: its exit code and what it said.
fn refused_start(args: &[&str]) -> (i32, String) {
    let mut child = Command::new(TESSERA)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (status.code().unwrap_or(-1), stderr(&out));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tessera {args:?} started; it should have refused");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn write_tokens(path: &Path, lines: &[(&str, &str)]) {
    let text: String = lines.iter().map(|(t, r)| format!("{t} {r}\n")).collect();
    std::fs::write(path, text).unwrap();
}

#[test]
fn daemons_refuse_to_listen_beyond_loopback_unprotected() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d").display().to_string();
    let (code, said) = refused_start(&["dev", "--listen", "0.0.0.0:0", "--data-dir", &data]);
    assert_eq!(code, 2, "{said}");
    assert!(
        said.contains("refusing to listen on 0.0.0.0:0 without --auth"),
        "{said}"
    );

    let secret = dir.path().join("secret");
    std::fs::write(&secret, "a-cluster-secret-0123456789").unwrap();
    let tokens = dir.path().join("tokens");
    write_tokens(&tokens, &[(ADMIN, "admin")]);
    let tokens = tokens.display().to_string();
    let (code, said) = refused_start(&[
        "coordinator",
        "--id",
        "1",
        "--peers",
        "1=127.0.0.1:1",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &data,
        "--auth",
        &tokens,
    ]);
    assert_eq!(code, 2, "{said}");
    assert!(
        said.contains("--auth needs --cluster-secret-file"),
        "{said}"
    );

    std::fs::write(&secret, "short").unwrap();
    let (code, said) = refused_start(&[
        "dev",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &data,
        "--auth",
        &tokens,
        "--servers",
        "2",
        "--cluster-secret-file",
        &secret.display().to_string(),
    ]);
    assert_eq!(code, 2, "{said}");
    assert!(said.contains("too short"), "{said}");

    // --insecure is the explicit way out.
    let insecure = Daemon::start(
        &["dev", "--listen", "0.0.0.0:0", "--insecure", "--data-dir"],
        &dir.path().join("i"),
    );
    let port = insecure.addr.rsplit(':').next().unwrap();
    let out = tessera(&format!("127.0.0.1:{port}"), None, &["status"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn tokens_decide_what_each_client_command_may_do_and_a_hangup_reloads_them() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    write_tokens(
        &tokens,
        &[(READER, "read"), (WRITER, "write"), (ADMIN, "admin")],
    );
    let mut dev = Daemon::start(
        &[
            "dev",
            "--listen",
            "127.0.0.1:0",
            "--auth",
            &tokens.display().to_string(),
            "--data-dir",
        ],
        &dir.path().join("data"),
    );
    let addr = dev.addr.clone();
    let space = dir.path().join("space");
    std::fs::write(&space, SPACE).unwrap();
    let space = space.display().to_string();

    let out = tessera(&addr, Some(ADMIN), &["add-space", &space]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = tessera(&addr, Some(WRITER), &["put", "kv", "a", r#"{"n": 1}"#]);
    assert!(out.status.success(), "{}", stderr(&out));

    // Anonymous, unknown and too-weak tokens: refused with UNAUTHORIZED, nothing changed.
    for (token, args) in [
        (None, vec!["rm-space", "kv"]),
        (None, vec!["get", "kv", "a"]),
        (Some("guessed-0123456789abcdef"), vec!["rm-space", "kv"]),
        (Some(READER), vec!["put", "kv", "b", r#"{"n": 2}"#]),
        (Some(READER), vec!["rm-space", "kv"]),
        (Some(WRITER), vec!["rm-space", "kv"]),
    ] {
        let out = tessera(&addr, token, &args);
        assert_eq!(out.status.code(), Some(2), "{token:?} {args:?}");
        assert!(
            stderr(&out).contains("UNAUTHORIZED"),
            "{token:?} {args:?}: {}",
            stderr(&out)
        );
    }
    let out = tessera(&addr, Some(READER), &["count", "kv"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "1",
        "{}",
        stderr(&out)
    );

    // The writer's token leaves the file; SIGHUP makes it count.
    write_tokens(&tokens, &[(READER, "read"), (ADMIN, "admin")]);
    let pid = dev.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = tessera(&addr, Some(WRITER), &["put", "kv", "c", r#"{"n": 3}"#]);
        if stderr(&out).contains("UNAUTHORIZED") {
            break;
        }
        assert!(Instant::now() < deadline, "the revoked token still writes");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = tessera(&addr, Some(ADMIN), &["rm-space", "kv"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let _ = dev.child.kill();
}

#[test]
fn a_two_process_cluster_with_a_secret_tokens_and_tls() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    write_tokens(&tokens, &[(ADMIN, "admin")]);
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "a-cluster-secret-0123456789\n").unwrap();
    let (tokens, secret) = (tokens.display().to_string(), secret.display().to_string());
    // One certificate for both daemons, which both listen on 127.0.0.1.
    let tls = dir.path().join("tls").display().to_string();
    let out = Command::new(TESSERA)
        .args(["certs", &tls, "--host", "127.0.0.1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let (cert, key, ca) = (
        format!("{tls}/127.0.0.1.pem"),
        format!("{tls}/127.0.0.1.key"),
        format!("{tls}/ca.pem"),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("--tls-cert {cert} --tls-key {key} --tls-ca {ca}")
    );
    let port = common::free_port();
    let peers = format!("1=127.0.0.1:{port}");
    let listen = format!("127.0.0.1:{port}");
    let security = [
        "--auth",
        &tokens,
        "--cluster-secret-file",
        &secret,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--tls-ca",
        &ca,
    ];
    let mut args = vec![
        "coordinator",
        "--id",
        "1",
        "--peers",
        &peers,
        "--listen",
        &listen,
    ];
    args.extend(security);
    args.push("--data-dir");
    let _coordinator = Daemon::start(&args, &dir.path().join("c"));
    let mut args = vec![
        "server",
        "--listen",
        "127.0.0.1:0",
        "--coordinators",
        &listen,
    ];
    args.extend(security);
    args.push("--data-dir");
    let _server = Daemon::start(&args, &dir.path().join("s"));

    let space = dir.path().join("space");
    std::fs::write(&space, format!("{SPACE} tolerate 0 failures")).unwrap();
    let admin = |args: &[&str]| tessera_tls(&listen, Some(ADMIN), Some(&ca), args);
    let out = admin(&["add-space", &space.display().to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = admin(&["put", "kv", "a", r#"{"n": 7}"#]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = admin(&["get", "kv", "a"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("7"),
        "{}",
        stderr(&out)
    );
    let out = tessera_tls(&listen, None, Some(&ca), &["rm-space", "kv"]);
    assert!(stderr(&out).contains("UNAUTHORIZED"), "{}", stderr(&out));
    // Without --tls-ca, the admin's own token does not get it in either.
    let out = tessera(&listen, Some(ADMIN), &["rm-space", "kv"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("speaks TLS"), "{}", stderr(&out));
    let out = admin(&["get", "kv", "a"]);
    assert!(out.status.success(), "{}", stderr(&out));

    // A daemon given a certificate but no authority to trust refuses to start.
    let (code, said) = refused_start(&[
        "dev",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--data-dir",
        &dir.path().join("d").display().to_string(),
    ]);
    assert_eq!(code, 2);
    assert!(said.contains("--tls-cert needs --tls-ca"), "{said}");
}
