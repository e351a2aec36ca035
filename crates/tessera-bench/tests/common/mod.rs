//! What the target tests share: `tessera bench`'s arguments as the CLI parses them, and the
//! secondary-attribute searches every searching target runs.
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
