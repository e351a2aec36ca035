//! The etcd target against a real etcd member, started by the test (data directory in a
//! temporary directory, client and peer ports free on loopback, writes fsynced as etcd does by
//! default) and killed when the test ends. Skipped, with a note, when `etcd` is not installed:
//! the rest of the crate does not need it (`.ci/run` installs Debian's etcd-server where it can).

//! Built with feature `peers` only (`make test` turns it on): the client needs `protoc`.
#![cfg(feature = "peers")]

mod common;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::args;
use tessera_bench::target::etcd::{record_prefix, EtcdTarget};
use tessera_bench::target::{Inexpressible, Target, TargetError};
use tessera_bench::{run, BenchError};

/// A member in a temporary directory; killed when dropped, pass or fail.
struct EtcdServer {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// Starts a one-member cluster, or `None` when `etcd` is not on PATH.
async fn start_etcd() -> Option<EtcdServer> {
    let installed = Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        return None;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (client, peer) = (free_port(), free_port());
    let client_url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let log = std::fs::File::create(dir.path().join("etcd.log")).expect("log file");
    let child = Command::new("etcd")
        .arg("--name")
        .arg("bench")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--listen-client-urls", &client_url])
        .args(["--advertise-client-urls", &client_url])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("bench={peer_url}")])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn etcd");
    let server = EtcdServer {
        child,
        addr: format!("127.0.0.1:{client}"),
        _dir: dir,
    };
    // Ready once a read through the target succeeds (the member has elected itself).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match EtcdTarget::connect(&server.addr).await {
            Ok(_) => return Some(server),
            Err(e) => assert!(
                Instant::now() < deadline,
                "etcd did not answer on {} within 30 s: {e}",
                server.addr
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// YCSB a–f against etcd: the loads write every record, every run is answered without an
/// error, scans find exactly the records in their bounds (checked before e is timed, and
/// directly), and what etcd cannot express is refused with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_target_runs_every_key_workload_and_refuses_searches() {
    let Some(server) = start_etcd().await else {
        eprintln!("NOTE: etcd is not installed (Debian: apt-get install etcd-server); skipping the etcd target test");
        return;
    };
    let url = format!("etcd://{}", server.addr);
    // a and e load (e checks its scans against the load before it is timed); the others run
    // over what a loaded.
    let cases: &[(&str, &str, &[&str])] = &[
        ("a", "both", &["read", "update"][..]),
        ("b", "run", &["read", "update"]),
        ("c", "run", &["read"]),
        ("f", "run", &["read", "read_modify_write"]),
        ("e", "both", &["insert", "scan"]),
        // Last: its inserts add records past the load, which e's check would find.
        ("d", "run", &["insert", "read"]),
    ];
    common::ycsb_workloads_run(&url, "etcd", cases).await;

    let mut target = EtcdTarget::connect(&server.addr).await.expect("connect");
    for n in [0, 999, 1000, 1499] {
        assert!(target.read(n).await.expect("read"), "record {n} missing");
    }
    assert!(!target.read(10_000_000).await.expect("read"));
    assert_eq!(target.scan(10, 20).await.expect("scan"), 20);
    assert_eq!(
        target.scan(990, 100).await.expect("scan"),
        10,
        "scans stop at the prefix group"
    );
    target.update(10, 3, "changed").await.expect("update");
    // A record is its ten keys, and an update rewrote one of them.
    let mut kv = etcd_client::Client::connect([format!("http://{}", server.addr)], None)
        .await
        .expect("connect")
        .kv_client();
    let record = kv
        .get(
            record_prefix(10),
            Some(etcd_client::GetOptions::new().with_prefix()),
        )
        .await
        .expect("get");
    assert_eq!(record.kvs().len(), 10);
    let field3 = record
        .kvs()
        .iter()
        .find(|kv| kv.key().ends_with(b"/field3"))
        .expect("field3");
    assert_eq!(field3.value(), b"changed");

    // What etcd cannot express is refused, typed, by the target and by the benchmark.
    assert!(matches!(
        target.search(10).await,
        Err(TargetError::Inexpressible(Inexpressible::EtcdSearch))
    ));
    for workload in ["s", "secondary"] {
        let refused = run(args(&url, &["-w", workload, "--records", "10"])).await;
        assert!(
            matches!(
                &refused,
                Err(BenchError::WorkloadInexpressible {
                    reason: Inexpressible::EtcdSearch,
                    ..
                })
            ),
            "{workload}: {refused:?}"
        );
    }
}
