//! A server told to stop: it answers what it has read, refuses what comes after (as
//! retryable), and lets go of its data directory at once, whoever still holds its metrics
//! publisher.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{TestServer, PROBE};
use tessera_client::{Client, ClientError, ClientOptions, Status, Value};

/// The metrics endpoint keeps the publisher of every server it reports on; a stopped server
/// must not be kept open by it (restarting on the same directory would find the store in use).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_lets_go_of_its_store_while_its_publisher_lives() {
    let mut s = TestServer::start().await;
    let publisher = s.server.as_ref().expect("running").metrics_publisher();
    publisher();
    s.restart().await;
    // The old server's publisher outlives it and does nothing.
    publisher();
    common::assert_serving(s.addr()).await;
    s.shutdown().await;
}

/// How a write ended, as far as its client can tell.
#[derive(Debug, PartialEq)]
enum Outcome {
    Applied,
    NotApplied,
    /// The connection closed with the write sent and unanswered: it may or may not be there.
    Unknown(String),
}

fn outcome(result: Result<(), ClientError>) -> Outcome {
    match result {
        Ok(()) => Outcome::Applied,
        Err(ClientError::Server { status, message })
            if status == Status::Unavailable
                || (status == Status::Timeout && !message.contains("may")) =>
        {
            Outcome::NotApplied
        }
        // Refused at connect: never sent.
        Err(ClientError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            Outcome::NotApplied
        }
        Err(e) => Outcome::Unknown(e.to_string()),
    }
}

/// Writes pipelined on one connection while the server stops: those it read are answered
/// (written, or refused as `Unavailable` because the server is stopping), one still on its way
/// when the connection closes is refused by the server's goodbye (it was not read), so no
/// outcome is unknown; after a restart every write answered done is there and none refused is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_answers_every_write_it_has_read() {
    let mut s = TestServer::start().await;
    let options = ClientOptions::with_timeout(Duration::from_secs(2));
    let client = Client::connect_with(&s.addr_string(), options)
        .await
        .expect("connecting");
    client.add_space(PROBE).await.expect("probe space");
    const WRITES: i64 = 400;
    let writes: Vec<_> = (0..WRITES)
        .map(|n| {
            let client = client.clone();
            tokio::spawn(async move {
                let result = client.put("probe", format!("w{n}"), [("n", n)]).await;
                (n, result)
            })
        })
        .collect();
    // Stop once the server has answered some of them, so that others are in flight.
    while client.count("probe", vec![]).await.unwrap_or(0) == 0 {
        tokio::task::yield_now().await;
    }
    s.server.take().expect("running").shutdown().await;
    let (mut applied, mut refused) = (BTreeSet::new(), BTreeSet::new());
    for w in writes {
        let (n, result) = w.await.expect("the task ends");
        match outcome(result) {
            Outcome::Applied => {
                applied.insert(n);
            }
            Outcome::NotApplied => {
                refused.insert(n);
            }
            Outcome::Unknown(e) => panic!("write {n} has an unknown outcome: {e}"),
        }
    }
    assert!(!applied.is_empty(), "the stop came after some writes");
    // The model: exactly the writes answered done are there.
    s.server = Some(common::start_in(&s.dir).await);
    let client = s.client().await;
    for n in 0..WRITES {
        let got = client.get("probe", format!("w{n}")).await.expect("get");
        match got {
            Some(record) => {
                assert!(!refused.contains(&n), "write {n} was refused but is there");
                assert_eq!(record.attributes["n"], Value::Int(n));
            }
            None => assert!(
                !applied.contains(&n),
                "write {n} was answered done but is lost"
            ),
        }
    }
    s.shutdown().await;
}

/// A cluster server told to stop while writes it leads are in flight: it answers them once
/// their chains have acknowledged them, and refuses what comes after (the client retries those
/// at the key's next point leader: the stopped one announced its rest, and the coordinators took
/// it out of the chains). No outcome is unknown, and every write answered done is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_server_stops_after_its_chains_acknowledge() {
    use common::cluster::{point_leader, Cluster};
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let config = cluster
        .add_space(
            &client,
            "space t key k attributes int x subspace x create 8 partitions tolerate 1 failure",
        )
        .await;
    let stopped = cluster.servers[0].id();
    let keys: Vec<String> = (0..2000)
        .map(|n| format!("k{n}"))
        .filter(|k| point_leader(&config, "t", &Value::from(k.as_str())) == stopped)
        .take(300)
        .collect();
    assert!(keys.len() >= 100, "{} keys led by {stopped}", keys.len());
    let writes: Vec<_> = keys
        .iter()
        .enumerate()
        .map(|(n, key)| {
            let (client, key) = (client.clone(), key.clone());
            tokio::spawn(async move {
                let result = client.put("t", key.as_str(), [("x", n as i64)]).await;
                (key, n as i64, result)
            })
        })
        .collect();
    while client.count("t", vec![]).await.unwrap_or(0) == 0 {
        tokio::task::yield_now().await;
    }
    cluster.servers.remove(0).shutdown().await;
    let mut applied = Vec::new();
    for w in writes {
        let (key, n, result) = w.await.expect("the task ends");
        match outcome(result) {
            Outcome::Applied => applied.push((key, n)),
            Outcome::NotApplied => {}
            Outcome::Unknown(e) => panic!("the write of {key} has an unknown outcome: {e}"),
        }
    }
    assert!(!applied.is_empty());
    for (key, n) in applied {
        let got = client.get("t", key.as_str()).await.expect("get");
        let record = got.unwrap_or_else(|| panic!("{key} was answered done but is lost"));
        assert_eq!(record.attributes["x"], Value::Int(n));
    }
}
