//! Fail-stop (DESIGN §7): after a failed commit a server acknowledges nothing of what it could
//! not persist, refuses every later write with `READONLY`, sends its peers nothing more, and
//! says so (`storage_failed`, which the heartbeats report so the coordinators take it out of
//! its chains). Reads go on; a restart recovers the store.
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
async fn a_failed_commit_is_answered_readonly_and_the_server_takes_no_more_writes() {
    let mut server = TestServer::start().await;
    let client = server.client().await;
    client.add_space(SPACE).await.unwrap();
    for n in 0..20i64 {
        client.put("t", format!("k{n}").as_str(), [("x", n)]).await.unwrap();
    }
    let before = snapshot(&client, "t").await;
    let running = server.server.as_ref().unwrap();
    assert!(!running.storage_failed());

    running.inject_storage_failure();
    // Pipelined writes: the batch whose commit fails, and those queued behind it. None is
    // acknowledged.
    let writes = (0..50i64).map(|n| client.put("t", format!("k{}", n % 30), [("x", 100 + n)]));
    for (n, result) in futures::future::join_all(writes).await.into_iter().enumerate() {
        assert_eq!(status(result), Status::ReadOnly, "write {n}");
    }
    assert!(running.storage_failed(), "the failure is exposed to the rest of the server");

    // Every later write is refused, whatever its kind; reads go on, and nothing changed.
    assert_eq!(status(client.put("t", "k1", [("x", 9i64)]).await), Status::ReadOnly);
    assert_eq!(status(client.del("t", "k2").await), Status::ReadOnly);
    assert_eq!(status(client.put_if_not_exist("t", "new", [("x", 9i64)]).await), Status::ReadOnly);
    assert_eq!(status(client.group_del("t", vec![Predicate::equals("x", 3i64)]).await), Status::ReadOnly);
    assert_eq!(status(client.add_space("space u key k attributes int n").await), Status::ReadOnly);
    assert_eq!(status(client.rm_space("t").await), Status::ReadOnly);
    assert_eq!(snapshot(&client, "t").await, before);
    assert_eq!(client.get("t", "k1").await.unwrap().unwrap().attributes["x"], Value::Int(1));
    assert_eq!(client.list_spaces().await.unwrap().len(), 1);

    // A restart recovers the store from its journal: what was acknowledged, and nothing else.
    drop(client);
    server.restart().await;
    let client = server.client().await;
    assert!(!server.server.as_ref().unwrap().storage_failed());
    assert_eq!(snapshot(&client, "t").await, before);
    client.put("t", "k1", [("x", 9i64)]).await.unwrap();
    assert_eq!(client.get("t", "k1").await.unwrap().unwrap().attributes["x"], Value::Int(9));
    server.shutdown().await;
}

/// Two servers holding every region (K = 2): a key's chain is its point leader, then the
/// other server, the tail.
const REPLICATED: &str = "space t key k attributes int x create 8 partitions tolerate 1 failure";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_point_leader_whose_commit_fails_answers_readonly() {
    let cluster = Cluster::start(2).await;
    let client = cluster.client().await;
    let config = cluster.add_space(&client, REPLICATED).await;
    let key = Value::from("a");
    client.put("t", "a", [("x", 1i64)]).await.unwrap();
    let leader = cluster.server_of(point_leader(&config, "t", &key));

    leader.inject_storage_failure();
    // The tail commits and acknowledges; the leader's own commit fails: not acknowledged.
    assert_eq!(status(client.put("t", "a", [("x", 2i64)]).await), Status::ReadOnly);
    assert!(leader.storage_failed());
    assert_eq!(status(client.put("t", "a", [("x", 3i64)]).await), Status::ReadOnly, "and it takes no more writes");
    // Its committed state is what it was (the point leader answers gets).
    assert_eq!(client.get("t", "a").await.unwrap().unwrap().attributes["x"], Value::Int(1));
    let other = cluster.servers.iter().find(|s| s.id() != leader.id()).unwrap();
    assert!(!other.storage_failed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_whose_commit_fails_sends_nothing_more() {
    let cluster = Cluster::start(2).await;
    let client = cluster.client().await;
    let config = cluster.add_space(&client, REPLICATED).await;
    let key = Value::from("a");
    client.put("t", "a", [("x", 1i64)]).await.unwrap();
    let leader = point_leader(&config, "t", &key);
    let tail = cluster.servers.iter().find(|s| s.id() != leader).unwrap();

    tail.inject_storage_failure();
    // The tail's commit fails, so its acknowledgement is never sent, however often the point
    // leader sends the update again (every few ticks): the write is never acknowledged.
    let write = tokio::time::timeout(Duration::from_secs(3), client.put("t", "a", [("x", 2i64)])).await;
    assert!(write.is_err(), "a write the tail could not persist is never acknowledged: {write:?}");
    assert!(tail.storage_failed());
    assert!(!cluster.server_of(leader).storage_failed());
    // The point leader has not committed it either.
    assert_eq!(client.get("t", "a").await.unwrap().unwrap().attributes["x"], Value::Int(1));
}
