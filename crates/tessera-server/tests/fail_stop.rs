//! Fail-stop (docs/design.md §7): after a failed commit a server acknowledges nothing of what it
//! could not persist, refuses every later write with `READONLY`, sends its peers nothing more, and
//! says so (`storage_failed`, which the heartbeats report so the coordinators take it out of its
//! chains). Reads go on; a restart recovers the store.
//!
//! The failure is real as far as the server can tell: the store is made to fail every write
//! (`Server::inject_storage_failure`, the `fault-injection` feature), exactly as after a failed
//! fsync, and the chain loop meets it in `Store::commit`.

mod common;

use std::time::Duration;

use common::cluster::{point_leader, Cluster};
use common::*;
use tessera_client::{Predicate, Status, Value};

const SPACE: &str = "space t key k attributes int x subspace x create 8 partitions";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_is_acknowledged_to_nobody_and_the_server_takes_no_more_writes() {
    let mut server = TestServer::start().await;
    let client = server.client().await;
    client.add_space(SPACE).await.unwrap();
    for n in 0..20i64 {
        client
            .put("t", format!("k{n}").as_str(), [("x", n)])
            .await
            .unwrap();
    }
    let before = snapshot(&client, "t").await;
    let running = server.server.as_ref().unwrap();
    assert!(!running.storage_failed());

    running.inject_storage_failure();
    // Pipelined writes: the batch whose commit fails, and those queued behind it. None is
    // acknowledged: those of the failed batch get TIMEOUT (a failed fsync leaves the disk's
    // state unknown: they may or may not be there after a restart), the others READONLY.
    let writes = (0..50i64).map(|n| client.put("t", format!("k{}", n % 30), [("x", 100 + n)]));
    let mut timeouts = 0;
    for (n, result) in futures::future::join_all(writes)
        .await
        .into_iter()
        .enumerate()
    {
        match status(result) {
            Status::Timeout => timeouts += 1,
            other => assert_eq!(other, Status::ReadOnly, "write {n}"),
        }
    }
    assert!(
        timeouts > 0,
        "the failed batch's writes are answered TIMEOUT"
    );
    assert!(
        running.storage_failed(),
        "the failure is exposed to the rest of the server"
    );

    // Every later write is refused, whatever its kind; reads go on, and nothing changed.
    assert_eq!(
        status(client.put("t", "k1", [("x", 9i64)]).await),
        Status::ReadOnly
    );
    assert_eq!(status(client.del("t", "k2").await), Status::ReadOnly);
    assert_eq!(
        status(client.put_if_not_exist("t", "new", [("x", 9i64)]).await),
        Status::ReadOnly
    );
    assert_eq!(
        status(
            client
                .group_del("t", vec![Predicate::equals("x", 3i64)])
                .await
        ),
        Status::ReadOnly
    );
    assert_eq!(
        status(client.add_space("space u key k attributes int n").await),
        Status::ReadOnly
    );
    assert_eq!(status(client.rm_space("t").await), Status::ReadOnly);
    assert_eq!(snapshot(&client, "t").await, before);
    assert_eq!(
        client.get("t", "k1").await.unwrap().unwrap().attributes["x"],
        Value::Int(1)
    );
    assert_eq!(client.list_spaces().await.unwrap().len(), 1);

    // A restart recovers the store from its journal: what was acknowledged, and nothing else.
    drop(client);
    server.restart().await;
    let client = server.client().await;
    assert!(!server.server.as_ref().unwrap().storage_failed());
    assert_eq!(snapshot(&client, "t").await, before);
    client.put("t", "k1", [("x", 9i64)]).await.unwrap();
    assert_eq!(
        client.get("t", "k1").await.unwrap().unwrap().attributes["x"],
        Value::Int(9)
    );
    server.shutdown().await;
}

/// Two servers holding every region (K = 2): a key's chain is its point leader, then the
/// other server, the tail.
const REPLICATED: &str = "space t key k attributes int x create 8 partitions tolerate 1 failure";

/// Waits until the client's configuration (refreshed) has `server` offline.
async fn until_offline(
    client: &tessera_client::Client,
    server: tessera_types::ServerId,
) -> tessera_protocol::Configuration {
    for _ in 0..100 {
        let config = client.refresh().await.unwrap();
        if config
            .server(server)
            .is_some_and(|s| s.state == tessera_protocol::ServerState::Offline)
        {
            return (*config).clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("server {server} was not taken offline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_point_leader_whose_commit_fails_leaves_the_chain() {
    let cluster = Cluster::start(2).await;
    let client = cluster.client().await;
    let config = cluster.add_space(&client, REPLICATED).await;
    let key = Value::from("a");
    client.put("t", "a", [("x", 1i64)]).await.unwrap();
    let leader = cluster.server_of(point_leader(&config, "t", &key));

    leader.inject_storage_failure();
    // The tail commits and acknowledges; the leader's own commit fails: not acknowledged as
    // done (the tail has it, so it may yet apply: TIMEOUT, not READONLY).
    let (status, message) = error(client.put("t", "a", [("x", 2i64)]).await);
    assert_eq!(status, Status::Timeout, "{message}");
    assert!(message.contains("may or may not apply"), "{message}");
    assert!(leader.storage_failed());
    // Fail-stop: it reports the failure, the coordinators take it out of every chain, and the
    // other replica leads the key from then on.
    let after = until_offline(&client, leader.id()).await;
    assert_ne!(point_leader(&after, "t", &key), leader.id());
    client
        .put("t", "a", [("x", 3i64)])
        .await
        .expect("the new point leader takes writes");
    assert_eq!(
        client.get("t", "a").await.unwrap().unwrap().attributes["x"],
        Value::Int(3)
    );
    let other = cluster
        .servers
        .iter()
        .find(|s| s.id() != leader.id())
        .unwrap();
    assert!(!other.storage_failed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_whose_commit_fails_acknowledges_nothing_and_leaves_the_chain() {
    let cluster = Cluster::start(2).await;
    let client = cluster.client().await;
    let config = cluster.add_space(&client, REPLICATED).await;
    let key = Value::from("a");
    client.put("t", "a", [("x", 1i64)]).await.unwrap();
    let leader = point_leader(&config, "t", &key);
    let tail = cluster.servers.iter().find(|s| s.id() != leader).unwrap();

    tail.inject_storage_failure();
    // The tail's commit fails, so it never acknowledges (not even when the point leader sends
    // the update again): the write completes only once the coordinators have taken the failed
    // tail out of the chain and the point leader, now its tail, commits it alone.
    client
        .put("t", "a", [("x", 2i64)])
        .await
        .expect("done once the chain is repaired");
    let now = client.refresh().await.unwrap();
    assert_eq!(
        now.server(tail.id()).map(|s| s.state),
        Some(tessera_protocol::ServerState::Offline),
        "acknowledged only after the failed tail left"
    );
    assert!(tail.storage_failed());
    assert!(!cluster.server_of(leader).storage_failed());
    assert_eq!(
        client.get("t", "a").await.unwrap().unwrap().attributes["x"],
        Value::Int(2)
    );
}
