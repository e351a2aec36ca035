//! The Tessera target against a real in-process `tessera-server` on a loopback port: a tiny
//! load and run of workloads A, C, E and S, checking every operation succeeds and the counts
//! add up. (Figures come from `scripts/bench.sh`, not from here: this is a correctness test.)

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
    run(args(url, &["-w", workload, "--phase", phase, "--records", &records, "--operations", &operations, "-t", "4"]))
        .await
        .unwrap_or_else(|e| panic!("workload {workload} ({phase}) against {url}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_a_c_e_s_against_a_real_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(ServerOptions::new(dir.path(), "127.0.0.1:0".parse().unwrap()))
        .await
        .expect("server starts");
    let url = format!("tessera://{}", server.local_addr());

    // Load once (workload A's load creates the space), then run each workload over the records.
    let loaded = bench(&url, "a", "load").await;
    let load = loaded.load.expect("load ran");
    assert_eq!((load.operations, load.errors), (RECORDS, 0), "{load:?}");
    assert_eq!(load.ops.keys().collect::<Vec<_>>(), ["insert"]);
    assert!(loaded.run.is_none());

    for (workload, expected_ops) in
        [("a", &["read", "update"][..]), ("c", &["read"][..]), ("e", &["insert", "scan"][..]), ("s", &["search"][..])]
    {
        let report = bench(&url, workload, "run").await;
        assert!(report.load.is_none());
        let run = report.run.expect("run ran");
        assert_eq!(run.errors, 0, "workload {workload}: {run:?}");
        assert_eq!(run.operations, OPERATIONS, "workload {workload}: {run:?}");
        assert!(!run.stopped_by_duration);
        assert_eq!(run.ops.keys().map(String::as_str).collect::<Vec<_>>(), expected_ops, "workload {workload}");
        for (name, op) in &run.ops {
            assert_eq!((op.errors, op.not_found), (0, 0), "workload {workload} op {name}: {op:?}");
            assert!(op.p50_us > 0 && op.p50_us <= op.p99_us, "workload {workload} op {name}: {op:?}");
        }
        match workload {
            // Each search fixes (prefix, suffix) of an existing record: exactly one hit each,
            // or the driver would have counted an error.
            "s" => assert_eq!(run.ops["search"].count, OPERATIONS),
            "e" => {
                let scan = &run.ops["scan"];
                // Scans of 1..=100 records from a loaded record find ~50 on average.
                assert!(scan.records_scanned.unwrap_or(0) > scan.count * 10, "{scan:?}");
            }
            _ => {}
        }
    }

    server.shutdown().await;
}
