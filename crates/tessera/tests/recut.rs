//! Re-cuts under load: a space on a real cluster (three coordinator and four server processes,
//! every region on two servers), clients writing and reading its keys without pause while its
//! `v` subspace is re-cut twice: once by `tessera recut` (another process, cuts from the
//! statistics), once at cut points the test chooses. Nothing is lost: the recorded history is
//! linearizable (Porcupine, tools/lincheck), and at the end gets, a search, a count and searches
//! by ranges of `v` agree, on the subspace the second re-cut made.

mod common;

use std::process::Command;
use std::time::Duration;

use common::cluster::{
    admin_with_space, assert_did_work, assert_linearizable, final_state_agrees, lincheck, runtime,
    start_workers, value_of, Cluster, SPACE,
};
use common::TESSERA;
use tessera_client::{Predicate, PredicateOp, SpaceChange, SubspaceId, Value};
use tessera_types::{AxisCuts, SubspaceState};

const WORKERS: u64 = 6;
const RUN_FOR: Duration = Duration::from_secs(8);

#[test]
fn subspaces_re_cut_under_concurrent_writes_lose_nothing() {
    let checker = lincheck();
    let cluster = Cluster::start(3, 4, &["--recut-period-s", "0"]);
    let runtime = runtime();
    let history = runtime.block_on(async {
        let admin = admin_with_space(&cluster, SPACE).await;
        let (started, tasks) = start_workers(&cluster, WORKERS, RUN_FOR).await;
        // A quarter into the run, `tessera recut` (its own process) re-cuts subspace 1.
        tokio::time::sleep_until((started + RUN_FOR / 4).into()).await;
        let addresses = cluster.addresses();
        let out = tokio::task::spawn_blocking(move || {
            Command::new(TESSERA)
                .args([
                    "--addr",
                    &addresses,
                    "recut",
                    "kv",
                    "1",
                    "--wait-timeout",
                    "60",
                ])
                .output()
                .expect("running tessera recut")
        })
        .await
        .expect("the recut command");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "tessera recut: {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line: serde_json::Value = serde_json::from_str(stdout.trim()).expect("a JSON line");
        assert_eq!(line["replaced_by"], 2, "{line}");
        // Then, still under load, a re-cut at points of the test's own choosing.
        let cuts = vec![AxisCuts::At(
            [-50i64, 0, 3, 10, 100]
                .iter()
                .map(|&v| tessera_geometry::coordinate(&Value::Int(v)))
                .collect(),
        )];
        admin
            .alter_space("kv", SpaceChange::RecutSubspace { subspace: 2, cuts })
            .await
            .expect("the second re-cut");
        let built = admin
            .wait_built("kv", Some(Duration::from_secs(60)))
            .await
            .expect("the second re-cut is built");
        let states: Vec<SubspaceState> = built.schema.subspaces.iter().map(|s| s.state).collect();
        assert_eq!(
            states,
            [
                SubspaceState::Serving,
                SubspaceState::Dropped,
                SubspaceState::Dropped,
                SubspaceState::Serving
            ]
        );
        let mut history = Vec::new();
        for t in tasks {
            history.extend(t.await.expect("a worker panicked"));
        }
        // Every key read by key, one search and a count agree, and so do searches by ranges
        // of v, read from the subspace the second re-cut made.
        let gets = final_state_agrees(&admin).await;
        for (lo, hi) in [(i64::MIN, -1), (-50, 2), (0, 9), (3, 100), (101, i64::MAX)] {
            let predicates = vec![
                Predicate::new("v", PredicateOp::GreaterEqual(Value::Int(lo))),
                Predicate::new("v", PredicateOp::LessEqual(Value::Int(hi))),
            ];
            let explained = admin
                .explain("kv", predicates.clone())
                .await
                .expect("explain");
            assert_eq!(explained.subspace, SubspaceId(3));
            let mut found: Vec<(i64, i64)> = admin
                .search("kv", predicates)
                .await
                .expect("search")
                .iter()
                .map(|r| match &r.key {
                    Value::Int(k) => (*k, value_of(r)),
                    other => panic!("int keys, got {other:?}"),
                })
                .collect();
            found.sort();
            let expected: Vec<(i64, i64)> = gets
                .iter()
                .filter(|(_, v)| (lo..=hi).contains(*v))
                .map(|(k, v)| (*k, *v))
                .collect();
            assert_eq!(found, expected, "v in [{lo}, {hi}]");
        }
        history
    });
    assert_did_work(&history, 200, 50);
    assert_linearizable(&checker, &history, "recut");
    drop(cluster);
}
