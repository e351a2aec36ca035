//! The Redis target against a real `redis-server`, started by the test on a free loopback port
//! without persistence. Skipped, with a note, when `redis-server` is not installed: the rest of
//! the crate does not need it, and CI machines without Redis should still pass.
//!
//! Built with feature `peers` only (`make test` turns it on).
#![cfg(feature = "peers")]

mod common;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::args;
use tessera_bench::run;
use tessera_bench::target::redis::RedisTarget;
use tessera_bench::target::Target;
use tessera_bench::workload::Record;

/// Kills the server when the test ends, pass or fail.
struct RedisServer {
    child: Child,
    addr: String,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn redis_server_on_path() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

fn start_redis() -> RedisServer {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        listener.local_addr().expect("local addr").port()
    };
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(std::env::temp_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-server");
    let server = RedisServer {
        child,
        addr: format!("127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(&server.addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "redis-server did not start listening on {}",
            server.addr
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}

#[tokio::test]
async fn redis_target_loads_runs_and_scans() {
    if !redis_server_on_path() {
        eprintln!("NOTE: redis-server is not on PATH; skipping the Redis target test");
        return;
    }
    let server = start_redis();
    let url = format!("redis://{}", server.addr);

    // Workload A: load 1500 records (two prefix groups), then 2000 reads and updates.
    let report = run(args(
        &url,
        &[
            "-w",
            "a",
            "--records",
            "1500",
            "--operations",
            "2000",
            "-t",
            "4",
        ],
    ))
    .await
    .expect("benchmark against redis runs");
    let load = report.load.expect("load ran");
    assert_eq!((load.operations, load.errors), (1500, 0));
    let run_a = report.run.expect("run ran");
    assert_eq!((run_a.operations, run_a.errors), (2000, 0), "{run_a:?}");
    assert!(
        run_a.ops["read"].count > 800 && run_a.ops["update"].count > 800,
        "{run_a:?}"
    );

    // Every record is stored as a hash, and scans see the index.
    let mut target = RedisTarget::connect(&server.addr).await.expect("connect");
    for n in [0, 1, 999, 1000, 1499] {
        assert!(target.read(n).await.expect("read"), "record {n} missing");
    }
    assert!(
        !target.read(1500).await.expect("read"),
        "record 1500 was never loaded"
    );
    assert_eq!(target.scan(10, 20).await.expect("scan"), 20);
    assert_eq!(
        target.scan(990, 100).await.expect("scan"),
        10,
        "scans stop at the prefix group"
    );
    assert_eq!(target.scan(1400, 100).await.expect("scan"), 100);
    assert_eq!(
        target.scan(1450, 100).await.expect("scan"),
        50,
        "records past 1499 do not exist"
    );
    target.update(5, 3, "x").await.expect("update");
    assert!(target.read_modify_write(5, 4, "y").await.expect("rmw"));
    target
        .insert(
            5000,
            &Record {
                fields: vec!["z".into(); 10],
            },
        )
        .await
        .expect("insert");
    assert_eq!(target.scan(5000, 1).await.expect("scan"), 1);

    // Workload E over the same records: scans return data, inserts succeed.
    let report = run(args(
        &url,
        &[
            "-w",
            "e",
            "--phase",
            "run",
            "--records",
            "1500",
            "--operations",
            "500",
            "-t",
            "2",
        ],
    ))
    .await
    .expect("workload e runs");
    let run_e = report.run.expect("run ran");
    assert!(report.load.is_none());
    assert_eq!(run_e.errors, 0, "{run_e:?}");
    let scan = &run_e.ops["scan"];
    assert!(scan.count > 400, "{scan:?}");
    assert!(
        scan.records_scanned.unwrap_or(0) > scan.count * 10,
        "{scan:?}"
    );
}
