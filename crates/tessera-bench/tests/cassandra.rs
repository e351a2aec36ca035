//! The CQL target against a real Cassandra 5.0 node, started by the test with
//! `scripts/cassandra.sh start DIR` (a temporary directory, free loopback ports, the commit log
//! fsynced before a write is acknowledged) and stopped when the test ends. Skipped, with a
//! note, when `java` is not installed or Cassandra's jars are not in their cache: `make test`
//! never downloads them (`scripts/cassandra.sh fetch` does, once).
//!
//! Built with feature `peers` only (`make test` turns it on).
#![cfg(feature = "peers")]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::args;
use tessera_bench::target::cassandra::{self, CqlTarget};
use tessera_bench::target::{Inexpressible, Target};
use tessera_bench::{run, BenchError};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/cassandra.sh")
}

/// A node in a temporary directory; stopped when dropped, pass or fail.
struct CassandraNode {
    dir: tempfile::TempDir,
    addr: String,
}

impl Drop for CassandraNode {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

/// Why the node cannot be started here, if it cannot.
fn missing() -> Option<String> {
    if Command::new("java").arg("-version").output().is_err() {
        return Some("java is not installed".into());
    }
    let cache = Command::new("bash")
        .arg(script())
        .arg("dir")
        .output()
        .expect("scripts/cassandra.sh dir");
    let cache = PathBuf::from(String::from_utf8_lossy(&cache.stdout).trim());
    if !cache.join("complete").is_file() {
        return Some(format!(
            "Cassandra's jars are not in {} (scripts/cassandra.sh fetch puts them there)",
            cache.display()
        ));
    }
    None
}

fn start_cassandra() -> CassandraNode {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new("bash")
        .arg(script())
        .arg("start")
        .arg(dir.path())
        .output()
        .expect("scripts/cassandra.sh start");
    assert!(
        out.status.success(),
        "scripts/cassandra.sh start: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let addr = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    CassandraNode { dir, addr }
}

/// YCSB a–f and s, then workload secondary, against Cassandra: the load writes every record,
/// every run is answered without an error, scans and searches through the SAI indexes find
/// exactly what the load wrote (checked before e, s and secondary are timed, and directly),
/// and the document workloads are refused with their reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cql_target_runs_ycsb_and_secondary_searches() {
    if let Some(why) = missing() {
        eprintln!("NOTE: {why}; skipping the Cassandra target test");
        return;
    }
    let node = start_cassandra();
    let url = format!("cql://{}", node.addr);
    let cases: &[(&str, &str, &[&str])] = &[
        ("a", "both", &["read", "update"][..]),
        ("b", "run", &["read", "update"]),
        ("c", "run", &["read"]),
        ("f", "run", &["read", "read_modify_write"]),
        ("e", "both", &["insert", "scan"]),
        ("s", "both", &["search"]),
        // Last: its inserts add records past the load, which e's check would find.
        ("d", "run", &["insert", "read"]),
    ];
    common::ycsb_workloads_run(&url, "Cassandra", cases).await;

    let session = cassandra::connect(&node.addr).await.expect("connect");
    let mut target = CqlTarget::connect(session).await.expect("statements");
    for n in [0, 999, 1000, 1499] {
        assert!(target.read(n).await.expect("read"), "record {n} missing");
        assert_eq!(target.search(n).await.expect("search"), 1);
    }
    assert!(!target.read(10_000_000).await.expect("read"));
    assert_eq!(target.scan(10, 20).await.expect("scan"), 20);
    assert_eq!(
        target.scan(990, 100).await.expect("scan"),
        10,
        "scans stop at the prefix group"
    );
    target.update(10, 3, "changed").await.expect("update");
    assert!(target.read(10).await.expect("read"));

    // Searches on secondary attributes through SAI: every query kind agrees with the
    // generator's counts before it is timed, and every search is answered.
    common::secondary_searches_agree_and_run(&url).await;

    for workload in ["documents", "dblp"] {
        let refused = run(args(&url, &["-w", workload, "--records", "10"])).await;
        assert!(
            matches!(
                &refused,
                Err(BenchError::WorkloadInexpressible {
                    reason: Inexpressible::CqlDocuments,
                    ..
                })
            ),
            "{workload}: {refused:?}"
        );
    }
}
