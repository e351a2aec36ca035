//! Planned stops of whole processes: `tessera dev` told to stop (SIGTERM, as systemd and
//! Ctrl-C's SIGINT do) exits 0 and, as a local cluster, stops as one unit: its coordinators
//! take none of its servers offline on the way, which would start moving their regions.

mod common;

use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use common::tessera_with_input;

/// `tessera dev ARGS` with its warnings in `log`, after its ready line; returns it and its
/// address.
fn dev_logging_to(args: &[&str], data_dir: &Path, log: &Path) -> (Child, String) {
    let mut all = vec!["dev"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--listen", "127.0.0.1:0", "--data-dir"]);
    let log = std::fs::File::create(log).expect("a log file");
    common::spawn_logging(&all, data_dir, "warn,openraft=off", log.into())
}

/// Sends SIGTERM and waits for the exit (a guard against a hang, not a timing: a minute).
fn terminate(child: &mut Child) -> ExitStatus {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("running kill");
    assert!(sent.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("waiting") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tessera dev did not stop within a minute of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A space described by `description` (named `s`, with an int `n`) holding 20 objects.
fn put_some(addr: &str, description: &str) {
    let o = tessera_with_input(addr, &["add-space"], description);
    assert!(o.status.success(), "{o:?}");
    for n in 0..20 {
        let (key, object) = (format!("k{n}"), format!("{{\"n\": {n}}}"));
        let o = tessera_with_input(addr, &["put", "s", &key, &object], "");
        assert!(o.status.success(), "{o:?}");
    }
}

#[test]
fn a_local_cluster_stops_as_one_unit() {
    let dir = tempfile::tempdir().expect("a directory");
    let log = dir.path().join("dev.log");
    let (mut dev, addr) = dev_logging_to(&["--servers", "3"], &dir.path().join("data"), &log);
    put_some(
        &addr,
        "space s key k attributes int n subspace n create 16 partitions tolerate 1 failure\n",
    );
    let status = terminate(&mut dev);
    let logged = std::fs::read_to_string(&log).expect("the log");
    assert!(status.success(), "{status:?}: {logged}");
    assert!(
        !logged.contains("taking server"),
        "the stop took servers offline: {logged}"
    );
    assert!(
        !logged.contains("still in use"),
        "a server's store outlived its stop: {logged}"
    );
}

#[test]
fn a_standalone_server_stops_and_keeps_its_data() {
    let dir = tempfile::tempdir().expect("a directory");
    let log = dir.path().join("dev.log");
    let data = dir.path().join("data");
    let (mut dev, addr) = dev_logging_to(&[], &data, &log);
    put_some(&addr, "space s key k attributes int n subspace n\n");
    let status = terminate(&mut dev);
    let logged = std::fs::read_to_string(&log).expect("the log");
    assert!(status.success(), "{status:?}: {logged}");
    assert!(!logged.contains("still in use"), "{logged}");
    let (mut dev, addr) = dev_logging_to(&[], &data, &log);
    let o = tessera_with_input(&addr, &["count", "s"], "");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "20", "{o:?}");
    assert!(terminate(&mut dev).success());
}
