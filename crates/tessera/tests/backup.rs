//! Backups (issue "Operating and using Tessera", item 3): `tessera backup` under concurrent
//! writes, then `tessera restore --as`, standalone and on a local cluster. The oracle is what
//! the writers wrote: every key of the backup holds one of the versions written to it (its
//! attributes from one write: `half` is always `n / 2` of the same `n`), no key written before
//! the backup began is missing, and the restored space holds exactly the backup's objects.

mod common;

use std::collections::BTreeMap;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{tessera_with_input as tessera, DevServer};

const KEYS: i64 = 400;

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// key -> (n, half) of every object in `jsonl`.
fn objects(jsonl: &str) -> BTreeMap<String, (i64, i64)> {
    jsonl
        .lines()
        .map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                j["k"].as_str().unwrap().to_owned(),
                (j["n"].as_i64().unwrap(), j["half"].as_i64().unwrap()),
            )
        })
        .collect()
}

fn put_lines(round: i64) -> String {
    (0..KEYS)
        .map(|k| {
            format!(
                "{{\"k\": \"k{k}\", \"n\": {round}, \"half\": {}}}\n",
                round / 2
            )
        })
        .collect()
}

fn back_up_under_writes_and_restore(addr: &str, dir: &std::path::Path) {
    ok(&tessera(
        addr,
        &["add-space"],
        "space kv key k attributes int n, int half subspace n",
    ));
    ok(&tessera(addr, &["put-many", "kv"], &put_lines(0)));
    // Writers rewrite every key with rising rounds while the backup runs.
    let stop = Arc::new(AtomicBool::new(false));
    let last_round = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let writer = {
        let (stop, last_round, addr) = (stop.clone(), last_round.clone(), addr.to_owned());
        std::thread::spawn(move || {
            let mut round = 1;
            while !stop.load(Ordering::Relaxed) {
                ok(&tessera(&addr, &["put-many", "kv"], &put_lines(round)));
                last_round.store(round, Ordering::Relaxed);
                round += 1;
            }
        })
    };
    while last_round.load(Ordering::Relaxed) < 1 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let backup = dir.join("backup");
    ok(&tessera(
        addr,
        &["backup", "kv", backup.to_str().unwrap()],
        "",
    ));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let rounds = last_round.load(Ordering::Relaxed) + 1;

    let backed_up = objects(&std::fs::read_to_string(backup.join("objects.jsonl")).unwrap());
    assert_eq!(backed_up.len() as i64, KEYS, "every key, once");
    for (key, (n, half)) in &backed_up {
        assert!((0..=rounds).contains(n), "{key}: n {n} was never written");
        assert_eq!(*half, n / 2, "{key}: attributes from two writes");
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(backup.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["objects"], KEYS);
    assert_eq!(manifest["space"], "kv");

    // A second backup into the same directory is refused.
    let o = tessera(addr, &["backup", "kv", backup.to_str().unwrap()], "");
    assert_eq!(o.status.code(), Some(2));

    ok(&tessera(
        addr,
        &["restore", backup.to_str().unwrap(), "--as", "copy"],
        "",
    ));
    let restored = objects(&ok(&tessera(addr, &["search", "copy"], "")));
    assert_eq!(restored, backed_up);
    // The copy has the original's description under its new name, subspace and all.
    let described = ok(&tessera(addr, &["list-spaces", "--describe"], ""));
    assert!(described.contains("space copy"), "{described}");
    let explained = ok(&tessera(addr, &["explain", "copy", "n=3"], ""));
    assert!(explained.contains(r#""dimensions":["n"]"#), "{explained}");
    // Restoring over an existing space is refused and changes nothing.
    let o = tessera(
        addr,
        &["restore", backup.to_str().unwrap(), "--as", "copy"],
        "",
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        objects(&ok(&tessera(addr, &["search", "copy"], ""))),
        backed_up
    );
}

#[test]
fn a_backup_under_writes_restores_standalone() {
    let dir = tempfile::tempdir().unwrap();
    let server = DevServer::start(&dir.path().join("data"));
    back_up_under_writes_and_restore(&server.addr, dir.path());
}

#[test]
fn a_backup_under_writes_restores_on_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let dev = common::Daemon::start(
        &[
            "dev",
            "--listen",
            "127.0.0.1:0",
            "--servers",
            "3",
            "--http",
            "off",
            "--data-dir",
        ],
        &dir.path().join("data"),
    );
    back_up_under_writes_and_restore(&dev.addr, dir.path());
}
