//! The Tessera target against a real in-process `tessera-server` on a loopback port: a tiny
//! load and run of workloads A, C, E and S, and of subspaces and search-fixed, checking every
//! operation succeeds and the counts add up. (Figures come from `scripts/bench.sh` and
//! `scripts/bench-cluster.sh`, not from here: this is a correctness test.)

use clap::Parser;
use tessera_bench::{run, BenchArgs, Report};
use tessera_server::{Server, ServerOptions};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    bench: BenchArgs,
}

fn args(url: &str, extra: &[&str]) -> BenchArgs {
    let mut argv = vec!["bench", "--progress", "never", "--target", url];
    argv.extend_from_slice(extra);
    Cli::parse_from(argv).bench
}

const RECORDS: u64 = 1500; // two prefix groups, so scans and searches span more than one
const OPERATIONS: u64 = 1000;

async fn bench(url: &str, workload: &str, phase: &str) -> Report {
    let (records, operations) = (RECORDS.to_string(), OPERATIONS.to_string());
    run(args(
        url,
        &[
            "-w",
            workload,
            "--phase",
            phase,
            "--records",
            &records,
            "--operations",
            &operations,
            "-t",
            "4",
        ],
    ))
    .await
    .unwrap_or_else(|e| panic!("workload {workload} ({phase}) against {url}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_a_c_e_s_against_a_real_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(ServerOptions::new(
        dir.path(),
        "127.0.0.1:0".parse().unwrap(),
    ))
    .await
    .expect("server starts");
    let url = format!("tessera://{}", server.local_addr());

    // Load once (workload A's load creates the space), then run each workload over the records.
    let loaded = bench(&url, "a", "load").await;
    let load = loaded.load.expect("load ran");
    assert_eq!((load.operations, load.errors), (RECORDS, 0), "{load:?}");
    assert_eq!(load.ops.keys().collect::<Vec<_>>(), ["insert"]);
    assert!(loaded.run.is_none());

    for (workload, expected_ops) in [
        ("a", &["read", "update"][..]),
        ("c", &["read"][..]),
        ("e", &["insert", "scan"][..]),
        ("s", &["search"][..]),
    ] {
        let report = bench(&url, workload, "run").await;
        assert!(report.load.is_none());
        let run = report.run.expect("run ran");
        assert_eq!(run.errors, 0, "workload {workload}: {run:?}");
        assert_eq!(run.operations, OPERATIONS, "workload {workload}: {run:?}");
        assert!(!run.stopped_by_duration);
        assert_eq!(
            run.ops.keys().map(String::as_str).collect::<Vec<_>>(),
            expected_ops,
            "workload {workload}"
        );
        for (name, op) in &run.ops {
            assert_eq!(
                (op.errors, op.not_found),
                (0, 0),
                "workload {workload} op {name}: {op:?}"
            );
            assert!(
                op.p50_us > 0 && op.p50_us <= op.p99_us,
                "workload {workload} op {name}: {op:?}"
            );
        }
        match workload {
            // Each search fixes (prefix, suffix) of an existing record: exactly one hit each,
            // or the driver would have counted an error.
            "s" => assert_eq!(run.ops["search"].count, OPERATIONS),
            "e" => {
                let scan = &run.ops["scan"];
                // Scans of 1..=100 records from a loaded record find ~50 on average.
                assert!(
                    scan.records_scanned.unwrap_or(0) > scan.count * 10,
                    "{scan:?}"
                );
            }
            _ => {}
        }
    }

    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subspaces_and_search_fixed_against_a_real_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(ServerOptions::new(
        dir.path(),
        "127.0.0.1:0".parse().unwrap(),
    ))
    .await
    .expect("server starts");
    let url = format!("tessera://{}", server.local_addr());

    // Two values of S on one server: each gets its own space.
    for s in ["0", "3"] {
        let report = run(args(
            &url,
            &[
                "-w",
                "subspaces",
                "--subspaces",
                s,
                "--records",
                "300",
                "--operations",
                "700",
                "-t",
                "4",
            ],
        ))
        .await
        .unwrap_or_else(|e| panic!("subspaces {s}: {e}"));
        let (load, run) = (report.load.expect("load ran"), report.run.expect("run ran"));
        assert_eq!((load.operations, load.errors), (300, 0), "{load:?}");
        assert_eq!((run.operations, run.errors), (700, 0), "{run:?}");
        assert_eq!(
            run.ops.keys().map(String::as_str).collect::<Vec<_>>(),
            ["update"]
        );
        let extra = report.subspaces.expect("subspaces section");
        let s: u64 = s.parse().unwrap();
        assert_eq!(
            (
                extra.subspaces as u64,
                extra.deployment.replicas,
                extra.deployment.servers
            ),
            (s, 1, 1)
        );
        assert_eq!(extra.chain_length, 1 + 2 * s);
        assert_eq!(extra.space, format!("subspaces{s}"));
    }

    // Load once, then run every F on the same data; 64 partitions: 4 x 4 x 4 regions.
    let records = 2000u64;
    let load = run(args(
        &url,
        &[
            "-w",
            "search-fixed",
            "--phase",
            "load",
            "--records",
            "2000",
            "-t",
            "4",
        ],
    ))
    .await
    .expect("loads");
    assert_eq!(
        load.load.as_ref().map(|l| (l.operations, l.errors)),
        Some((records, 0))
    );
    for (f, regions) in [(0u32, 64u64), (1, 16), (2, 4), (3, 1)] {
        let fixed = f.to_string();
        let report = run(args(
            &url,
            &[
                "-w",
                "search-fixed",
                "--phase",
                "run",
                "--fixed",
                &fixed,
                "--records",
                "2000",
                "--operations",
                "200",
                "-t",
                "4",
            ],
        ))
        .await
        .unwrap_or_else(|e| panic!("search-fixed {f}: {e}"));
        let run = report.run.expect("run ran");
        assert_eq!((run.operations, run.errors), (200, 0), "F={f}: {run:?}");
        let extra = report.search_fixed.expect("search_fixed section");
        assert_eq!(extra.fixed, f);
        assert_eq!(
            (
                extra.explain.regions_contacted_min,
                extra.explain.regions_contacted_max
            ),
            (regions, regions),
            "F={f}"
        );
        assert_eq!(
            extra.explain.servers_contacted_max, 1,
            "one standalone server"
        );
        let mean = extra.mean_objects_returned.expect("searches ran");
        let expected = extra.expected_objects_per_search;
        assert_eq!(expected, records as f64 / 16f64.powi(f as i32));
        // Every object returned matched its query (or the search would have counted as an
        // error); with nothing fixed, every object is returned.
        if f == 0 {
            assert_eq!(mean, records as f64);
        } else {
            assert!(
                mean > 0.0 && (mean - expected).abs() < expected * 0.5 + 1.0,
                "F={f}: mean {mean}, expected {expected}"
            );
        }
    }

    // Both refuse other targets before connecting.
    for w in ["subspaces", "search-fixed"] {
        let r = run(args("memory://", &["-w", w])).await;
        assert!(
            matches!(r, Err(tessera_bench::BenchError::TargetUnsupported(_))),
            "{w}: {r:?}"
        );
    }
    server.shutdown().await;
}
