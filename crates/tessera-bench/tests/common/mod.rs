//! What the target tests share: `tessera bench`'s arguments as the CLI parses them, the YCSB
//! workloads every key-value target runs, and the secondary-attribute searches every searching
//! target runs.
#![allow(dead_code)]

use clap::Parser;
use tessera_bench::{run, BenchArgs};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    bench: BenchArgs,
}

/// `tessera bench --progress never --target URL EXTRA…`, parsed.
pub fn args(url: &str, extra: &[&str]) -> BenchArgs {
    let mut argv = vec!["bench", "--progress", "never", "--target", url];
    argv.extend_from_slice(extra);
    Cli::parse_from(argv).bench
}

/// Workload secondary against `url`: each query kind (the first one loading 3000 people)
/// passes the agreement check against the generator's own counts, then runs 300 searches,
/// every one answered.
pub async fn secondary_searches_agree_and_run(url: &str) {
    for (query, phase) in [("eq1", "both"), ("eq2", "run"), ("range", "run")] {
        let report = run(args(
            url,
            &[
                "-w",
                "secondary",
                "--query",
                query,
                "--phase",
                phase,
                "--records",
                "3000",
                "--operations",
                "300",
                "-t",
                "4",
            ],
        ))
        .await
        .unwrap_or_else(|e| panic!("secondary {query} against {url}: {e}"));
        if phase == "both" {
            assert_eq!(report.load.expect("load ran").errors, 0);
        }
        let run = report.run.expect("run ran");
        assert_eq!((run.operations, run.errors), (300, 0), "{query}: {run:?}");
        let extra = report.secondary.expect("secondary section");
        assert_eq!(extra.agreement_samples, 16);
        let json = serde_json::to_value(&extra).unwrap();
        assert_eq!(json["query"], query);
    }
}

/// YCSB workloads against `url` (`system` names it in failures), each `(workload, phase, the
/// operations its run reports)`: a load of 1500 records where the phase has one, then 1000
/// operations, none failing, and E's scans reading ten records a scan or more on average.
pub async fn ycsb_workloads_run(url: &str, system: &str, cases: &[(&str, &str, &[&str])]) {
    for &(workload, phase, ops) in cases {
        let report = run(args(
            url,
            &[
                "-w",
                workload,
                "--phase",
                phase,
                "--records",
                "1500",
                "--operations",
                "1000",
                "-t",
                "4",
            ],
        ))
        .await
        .unwrap_or_else(|e| panic!("workload {workload} against {system}: {e}"));
        if phase == "both" {
            let load = report.load.expect("load ran");
            assert_eq!(
                (load.operations, load.errors),
                (1500, 0),
                "workload {workload}"
            );
        }
        let run = report.run.expect("run ran");
        assert_eq!(
            (run.operations, run.errors),
            (1000, 0),
            "workload {workload}: {run:?}"
        );
        let names: Vec<&str> = run.ops.keys().map(|s| s.as_str()).collect();
        assert_eq!(names, ops, "workload {workload}");
        if workload == "e" {
            let scan = &run.ops["scan"];
            // Scans of 1-100 records average ~50 where the prefix group has room.
            assert!(
                scan.records_scanned.unwrap_or(0) > scan.count * 10,
                "{scan:?}"
            );
        }
    }
}
