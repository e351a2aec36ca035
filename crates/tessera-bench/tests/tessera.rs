//! The Tessera target against a real in-process `tessera-server` on a loopback port: a tiny
//! load and run of workloads A, C, E and S, of subspaces and search-fixed, and of advisor-eval,
//! checking every operation succeeds and the counts add up. (Figures come from
//! `scripts/bench.sh`, `scripts/bench-cluster.sh` and `make bench-advisor`, not from here: this
//! is a correctness test.)

mod common;

use common::args;
use tessera_bench::{run, Report};
use tessera_server::{Server, ServerOptions};

const RECORDS: u64 = 1500; // two prefix groups, so scans and searches span more than one
const OPERATIONS: u64 = 1000;

/// A server on a loopback port with a fresh data directory (kept as long as the first value
/// lives), and its `tessera://` URL.
async fn start_server() -> (tempfile::TempDir, Server, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(ServerOptions::new(
        dir.path(),
        "127.0.0.1:0".parse().unwrap(),
    ))
    .await
    .expect("server starts");
    let url = format!("tessera://{}", server.local_addr());
    (dir, server, url)
}

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
    let (_dir, server, url) = start_server().await;

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

/// `--rate` spreads a run's operations over time: 400 reads at 2000 a second take at least the
/// 0.2 s their turns span (unpaced they take a few milliseconds), and a rate that is not a
/// positive number is refused before anything runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paced_run_issues_at_its_rate() {
    let (_dir, server, url) = start_server().await;
    bench(&url, "c", "load").await;
    let paced = |rate: &'static str| {
        run(args(
            &url,
            &[
                "-w",
                "c",
                "--phase",
                "run",
                "--records",
                "1500",
                "--operations",
                "400",
                "-t",
                "4",
                "--rate",
                rate,
            ],
        ))
    };
    let report = paced("2000").await.expect("a paced run");
    let run_report = report.run.expect("run ran");
    assert_eq!((run_report.operations, run_report.errors), (400, 0));
    assert!(
        run_report.elapsed_s >= 399.0 / 2000.0,
        "400 operations at 2000/s span 0.2 s, not {} s",
        run_report.elapsed_s
    );
    for bad in ["0", "NaN", "inf"] {
        let refused = paced(bad).await.expect_err("a bad rate is refused");
        assert!(refused.to_string().contains("--rate"), "{refused}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subspaces_and_search_fixed_against_a_real_server() {
    let (_dir, server, url) = start_server().await;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advisor_eval_against_a_real_server() {
    // One workload (B-WH: a search of one to four attributes, updates of price alone and of
    // three attributes together), two rounds of every configuration, briefly.
    let (_dir, server, url) = start_server().await;
    let eval_args = |workloads: &str| {
        args(
            &url,
            &[
                "-w",
                "advisor-eval",
                "--eval-workloads",
                workloads,
                "--records",
                "300",
                "-t",
                "4",
                "--duration-s",
                "0.3",
                "--warmup-s",
                "0.1",
                "--repetitions",
                "2",
                "--sample-top",
                "2",
                "--sample-random",
                "1",
            ],
        )
    };
    let report = run(eval_args("b-wh")).await.expect("runs");
    assert!(report.load.is_none() && report.run.is_none());
    let eval = report.advisor_eval.expect("advisor_eval section");
    assert_eq!((eval.hotels, eval.repetitions), (300, 2));
    assert_eq!(eval.calibration_source, "default");
    let deployment = eval.deployment.as_ref().expect("ran");
    assert_eq!((deployment.servers, deployment.replicas), (1, 1));
    let names: Vec<&str> = eval.workloads.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["B-WH"]);
    for w in &eval.workloads {
        assert!(w.workload_file.contains("{\"objects\":300}"));
        assert_eq!(w.configurations[0].labels.top_rank, Some(1));
        assert!(w.configurations[0].labels.advised);
        assert!(
            w.configurations.len() >= 4,
            "{}: 2 top, 1 random, baselines",
            w.name
        );
        for c in &w.configurations {
            assert_eq!(c.runs.len(), 2, "{}: {:?}", w.name, c.subspaces);
            assert!(c.predicted_ops_s > 0.0);
            assert!(c.min_ops_s <= c.median_ops_s && c.median_ops_s <= c.max_ops_s);
            for r in &c.runs {
                assert_eq!(r.errors, 0, "{}: {:?}: {r:?}", w.name, c.subspaces);
                assert!(r.throughput_ops_s > 0.0 && r.load_ops_s > 0.0);
                assert_eq!(r.classes.len(), w.classes.len());
                assert_eq!(r.classes.iter().map(|k| k.count).sum::<u64>(), r.operations);
                for k in &r.classes {
                    // Searches look for real hotels: city alone finds several, the others one
                    // (none only if an update of that hotel was in flight).
                    if let (Some(mean), Some(empty)) = (k.returned_mean, k.empty) {
                        assert!(mean >= 0.8, "{}: {k:?}", w.name);
                        assert!(empty * 5 <= k.count.max(5), "{}: {k:?}", w.name);
                    }
                }
            }
        }
    }
    // The space is gone after every configuration; an existing one is never dropped.
    let client = tessera_client::Client::connect(&server.local_addr().to_string())
        .await
        .expect("connects");
    assert!(client
        .describe_space(tessera_bench::hotels::SPACE_NAME)
        .await
        .is_err());
    client
        .add_space(&tessera_bench::hotels::space_description(&[], 8))
        .await
        .expect("creates");
    let refused = run(eval_args("C-RH")).await;
    assert!(
        matches!(&refused, Err(e) if e.to_string().contains("remove it first")),
        "{refused:?}"
    );
    assert!(client
        .describe_space(tessera_bench::hotels::SPACE_NAME)
        .await
        .is_ok());
    let bad = run(eval_args("D-RH")).await;
    assert!(matches!(
        bad,
        Err(tessera_bench::BenchError::InvalidArgs(_))
    ));
    server.shutdown().await;
}

/// Workload secondary against a real server: each query kind loads (once), passes the
/// agreement check against the generator's own counts, and runs with every search answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secondary_searches_against_a_real_server() {
    let (_dir, server, url) = start_server().await;
    common::secondary_searches_agree_and_run(&url).await;
    server.shutdown().await;
}
