//! An acknowledged write survives `kill -9`: a real `tessera dev` process is killed with
//! SIGKILL in the middle of 100k pipelined puts, restarted on the same data directory, and
//! must hold every put it acknowledged.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::DevServer;
use futures::stream::{FuturesUnordered, StreamExt};
use tessera_client::{Client, Value};

const PUTS: i64 = 100_000;
const IN_FLIGHT: usize = 256;

fn pad(i: i64) -> String {
    format!("{i:08}-{}", "x".repeat(40))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_put_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = DevServer::start(dir.path());
    let client = Client::connect(&server.addr).await.unwrap();
    client
        .add_space("space crash key int k attributes int v, string pad subspace v create 16 partitions tolerate 0 failures")
        .await
        .unwrap();

    let acked = Arc::new(Mutex::new(Vec::new()));
    let acked_count = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (client, acked, acked_count) = (client.clone(), acked.clone(), acked_count.clone());
        tokio::spawn(async move {
            let mut in_flight = FuturesUnordered::new();
            let mut next = 0i64;
            let mut failures = 0usize;
            loop {
                while next < PUTS && in_flight.len() < IN_FLIGHT {
                    let (client, i) = (client.clone(), next);
                    in_flight.push(async move {
                        let r = client
                            .put(
                                "crash",
                                i,
                                [("v", Value::Int(i * 7)), ("pad", Value::from(pad(i)))],
                            )
                            .await;
                        (i, r)
                    });
                    next += 1;
                }
                match in_flight.next().await {
                    None => break,
                    Some((i, Ok(()))) => {
                        acked.lock().unwrap().push(i);
                        acked_count.fetch_add(1, Ordering::Relaxed);
                    }
                    Some((_, Err(_))) => {
                        failures += 1;
                        // Once the server is gone every request fails: stop issuing more.
                        next = PUTS;
                    }
                }
            }
            failures
        })
    };

    // Kill once a good share of the puts is acknowledged, while many more are in flight.
    let deadline = Instant::now() + Duration::from_secs(120);
    while acked_count.load(Ordering::Relaxed) < 30_000 {
        assert!(Instant::now() < deadline, "the puts made no progress");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.kill();
    let failures = writer.await.unwrap();
    let acked = acked.lock().unwrap().clone();
    assert!(failures > 0, "the kill must interrupt puts in flight");
    assert!(
        (acked.len() as i64) < PUTS,
        "the kill must land during the puts"
    );

    let server = DevServer::start(dir.path());
    let client = Client::connect(&server.addr).await.unwrap();
    let mut checks = FuturesUnordered::new();
    let mut missing = Vec::new();
    for &i in &acked {
        let client = client.clone();
        checks.push(async move { (i, client.get("crash", i).await) });
        if checks.len() >= IN_FLIGHT {
            let (i, r) = checks.next().await.unwrap();
            check(i, r.unwrap(), &mut missing);
        }
    }
    while let Some((i, r)) = checks.next().await {
        check(i, r.unwrap(), &mut missing);
    }
    assert!(
        missing.is_empty(),
        "{} acknowledged puts lost, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );

    // Every object found is whole, and nothing appears that was never sent.
    let total = client.count("crash", vec![]).await.unwrap();
    assert!(
        total as usize >= acked.len(),
        "{total} objects but {} acknowledged",
        acked.len()
    );
    assert!(total <= PUTS as u64);
    eprintln!(
        "acknowledged {} of {PUTS} puts before SIGKILL; {total} recovered",
        acked.len()
    );
}

fn check(i: i64, record: Option<tessera_client::Record>, missing: &mut Vec<i64>) {
    match record {
        None => missing.push(i),
        Some(r) => {
            assert_eq!(r.attributes["v"], Value::Int(i * 7), "key {i}");
            assert_eq!(r.attributes["pad"], Value::from(pad(i)), "key {i}");
        }
    }
}
