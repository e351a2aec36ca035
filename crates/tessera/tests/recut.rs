//! Re-cuts under load: a space on a real cluster (three coordinator and four server processes,
//! every region on two servers), clients writing and reading its keys without pause while two
//! of its subspaces are re-cut, one after the other: `v` by `tessera recut` (another process,
//! cuts from the statistics), then `v, w` at cut points the test chooses. Nothing is lost: the
//! recorded history is linearizable (Porcupine, tools/lincheck), and at the end gets, a search,
//! a count and searches by ranges of `v` agree, on each subspace the re-cuts made.

mod common;

use std::process::Command;
use std::time::Duration;

use common::cluster::{
    admin_with_space, assert_did_work, assert_linearizable, final_state_agrees, lincheck, runtime,
    start_workers, value_of, Cluster, SPACE,
};
use common::TESSERA;
use tessera_client::{Client, Predicate, PredicateOp, SpaceChange, SubspaceId, Value};
use tessera_types::{AxisCuts, SubspaceState};

const WORKERS: u64 = 6;
const RUN_FOR: Duration = Duration::from_secs(8);
/// The workers' space with a second subspace: they write `v` only, so `w` is 0 everywhere.
const TWO_SUBSPACES: &str = "space kv key int k attributes int v, int w subspace v \
     subspace v, w create 8 partitions tolerate 1 failure";
/// Worker `i` writes values from `(i + 1) * 1 000 000` up: the test's cuts of `v` put each
/// worker's values in a region of its own, and its ranges select some of them.
const WORKER_STARTS: [i64; 5] = [2_000_000, 3_000_000, 4_000_000, 5_000_000, 6_000_000];

#[test]
fn subspaces_re_cut_under_concurrent_writes_lose_nothing() {
    let checker = lincheck();
    let cluster = Cluster::start(3, 4, &["--recut-period-s", "0"]);
    let runtime = runtime();
    let history = runtime.block_on(async {
        assert!(
            SPACE.contains("subspace v create"),
            "the workers' space changed: {SPACE}"
        );
        let admin = admin_with_space(&cluster, TWO_SUBSPACES).await;
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
        assert_eq!(line["replaced_by"], 3, "{line}");
        // Then, still under load, subspace 2 (v, w) at points of the test's own choosing.
        let at = |values: &[i64]| {
            AxisCuts::At(
                values
                    .iter()
                    .map(|&v| tessera_geometry::coordinate(&Value::Int(v)))
                    .collect(),
            )
        };
        let cuts = vec![at(&WORKER_STARTS), at(&[1])];
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
                SubspaceState::Serving,
                SubspaceState::Serving
            ]
        );
        let mut history = Vec::new();
        for t in tasks {
            history.extend(t.await.expect("a worker panicked"));
        }
        // Every key read by key, one search and a count agree, and so do searches by ranges
        // of v, read from a subspace the re-cuts made (3: v; 4: v, w). Then, subspace 3
        // dropped, the same searches with w = 0 read subspace 4 (6 regions at most, against
        // the key subspace's 8).
        let gets = final_state_agrees(&admin).await;
        let ranges = [
            (i64::MIN, i64::MAX),
            (i64::MIN, 1_999_999),
            (2_000_000, 3_500_000),
            (3_000_000, 6_000_000),
            (4_000_000, i64::MAX),
        ];
        for drop_v in [false, true] {
            if drop_v {
                admin
                    .alter_space("kv", SpaceChange::DropSubspace { subspace: 3 })
                    .await
                    .expect("dropping subspace 3");
            }
            for (lo, hi) in ranges {
                let mut predicates = vec![
                    Predicate::new("v", PredicateOp::GreaterEqual(Value::Int(lo))),
                    Predicate::new("v", PredicateOp::LessEqual(Value::Int(hi))),
                ];
                if drop_v {
                    predicates.push(Predicate::equals("w", 0));
                }
                let expected: Vec<(i64, i64)> = gets
                    .iter()
                    .filter(|(_, v)| (lo..=hi).contains(*v))
                    .map(|(k, v)| (*k, *v))
                    .collect();
                let (subspace, found) = search(&admin, predicates).await;
                // The whole axis crosses every region of 3 too: the key subspace's as many
                // may win.
                let planned_on = match (drop_v, (lo, hi) == ranges[0]) {
                    (true, _) => &[4][..],
                    (false, false) => &[3, 4][..],
                    (false, true) => &[0, 3, 4][..],
                };
                assert!(
                    planned_on.contains(&subspace.0),
                    "v in [{lo}, {hi}]: subspace {subspace:?}"
                );
                assert_eq!(
                    found, expected,
                    "v in [{lo}, {hi}] on subspace {subspace:?}"
                );
            }
        }
        history
    });
    assert_did_work(&history, 200, 50);
    assert_linearizable(&checker, &history, "recut");
    drop(cluster);
}

/// The subspace explain plans `predicates` on, and the (key, v) of every object matching
/// them, sorted.
async fn search(admin: &Client, predicates: Vec<Predicate>) -> (SubspaceId, Vec<(i64, i64)>) {
    let explained = admin
        .explain("kv", predicates.clone())
        .await
        .expect("explain");
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
    (explained.subspace, found)
}
