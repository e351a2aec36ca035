//! A real cluster on loopback: three `tessera coordinator` processes and four `tessera server`
//! processes (every region on two of them), concurrent clients, and the recorded history
//! checked for linearizability by Porcupine (tools/lincheck, a Go program). The test fails on
//! a violation; a deliberately corrupted copy of the history must fail the checker too.

mod common;

use std::time::Duration;

use common::cluster::{
    admin_with_space, assert_did_work, assert_linearizable, check, final_state_agrees, lincheck,
    runtime, start_workers, Cluster, Op, SPACE,
};
use tessera_client::{Client, Value};

const WORKERS: u64 = 6;
const RUN_FOR: Duration = Duration::from_secs(4);

#[test]
fn three_coordinators_four_servers_linearizable() {
    let checker = lincheck();
    let cluster = Cluster::start(3, 4, &[]);
    let runtime = runtime();
    let history = runtime.block_on(async {
        let admin = admin_with_space(&cluster, SPACE).await;
        assert!(admin.is_cluster());
        let config = admin.configuration();
        assert_eq!(config.servers.len(), 4, "every server registered");
        let space = config.space("kv").expect("the new space");
        for regions in &space.replicas {
            for set in regions {
                assert_eq!(set.len(), 2, "K = f + 1 = 2 replicas");
                assert_ne!(set[0], set[1], "distinct replicas");
            }
        }
        let (_, tasks) = start_workers(&cluster, WORKERS, RUN_FOR).await;
        let mut history = Vec::new();
        for t in tasks {
            history.extend(t.await.expect("a worker panicked"));
        }
        // The final state, as gets and as one search over every server, agree.
        final_state_agrees(&admin).await;
        a_space_change_is_usable_at_once(&admin, &cluster.addresses()).await;
        history
    });
    assert_did_work(&history, 200, 50);
    assert_linearizable(&checker, &history, "history");
    let dir = tempfile::tempdir().expect("temp dir");

    // The checker must be able to fail: a read, after everything, of a value never written.
    let mut corrupted = history.clone();
    let end = corrupted.iter().filter_map(|o| o.ret).max().unwrap_or(0) + 1;
    corrupted.push(Op {
        client: 99,
        op: "get",
        key: "0".into(),
        value: None,
        expect: None,
        call: end,
        ret: Some(end + 1),
        ok: None,
        output: Some(-7),
    });
    let (code, _) = check(&checker, &corrupted, dir.path(), "corrupted.jsonl");
    assert_eq!(
        code, 1,
        "lincheck must reject a read of a value never written"
    );
    drop(cluster);
}

/// A space change is finished when it is answered: a client that cached the old schema uses
/// a space dropped and created again with another schema, and a space just added, at once,
/// without a `WRONGTYPE` checked against the old schema or an `UNKNOWNSPACE`.
async fn a_space_change_is_usable_at_once(admin: &Client, addresses: &str) {
    let stale = Client::connect(addresses).await.expect("connecting");
    stale
        .put("kv", 1i64, [("v", 5i64)])
        .await
        .expect("a put with the old schema");
    admin.rm_space("kv").await.expect("rm-space");
    admin
        .add_space("space kv key int k attributes string v create 8 partitions tolerate 1 failure")
        .await
        .expect("add-space");
    admin
        .add_space("space fresh key int k attributes int n create 4 partitions tolerate 1 failure")
        .await
        .expect("add-space");
    stale
        .put("kv", 1i64, [("v", "text")])
        .await
        .expect("a put with the new schema, from a client that cached the old");
    let record = stale
        .get("kv", 1i64)
        .await
        .expect("get")
        .expect("the new object");
    assert_eq!(record.attributes.get("v"), Some(&Value::from("text")));
    stale
        .put("fresh", 2i64, [("n", 3i64)])
        .await
        .expect("a put to the space just added");
    assert!(stale.get("fresh", 2i64).await.expect("get").is_some());
}
