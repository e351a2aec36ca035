//! `Request::Trace`: servers count the shapes of the requests they serve, and a cluster client's
//! merged trace counts each request once, however many servers a search visited. The expected
//! counts come from the requests the test itself sends, not from the server's code.

mod common;

use std::collections::BTreeMap;

use common::cluster::Cluster;
use common::{error, TestServer};
use tessera_client::{Client, Constraint, Predicate, RequestShape, SpaceTrace, Status};
use tessera_types::PredicateOp;

const HOTELS: &str = "space hotels key id attributes string city, int stars, int price subspace city subspace price create 8 partitions";

fn search(attrs: &[(&str, Constraint)]) -> RequestShape {
    RequestShape::Search(attrs.iter().map(|(a, c)| (a.to_string(), *c)).collect())
}

fn write(attrs: &[&str]) -> RequestShape {
    RequestShape::Write(attrs.iter().map(|a| a.to_string()).collect())
}

/// (requests, matched) per shape.
fn counts(trace: &SpaceTrace) -> BTreeMap<RequestShape, (f64, f64)> {
    trace
        .shapes
        .iter()
        .map(|c| (c.shape.clone(), (c.requests, c.matched)))
        .collect()
}

/// Within rounding: a cluster search's shares are fractions that sum to one.
fn close(a: (f64, f64), b: (f64, f64)) -> bool {
    (a.0 - b.0).abs() < 1e-9 && (a.1 - b.1).abs() < 1e-9
}

/// Sends a known mix: 30 hotels in 3 cities (10 each), prices 10..300.
async fn run_the_mix(client: &Client) {
    for n in 0..30i64 {
        let city = ["Paris", "Lyon", "Nice"][n as usize % 3];
        client
            .put(
                "hotels",
                format!("h{n}").as_str(),
                [
                    ("city", tessera_client::Value::from(city)),
                    ("price", (10 * (n + 1)).into()),
                    ("stars", (n % 5).into()),
                ],
            )
            .await
            .unwrap();
    }
    for n in 0..5i64 {
        client
            .put("hotels", format!("h{n}").as_str(), [("price", 999i64)])
            .await
            .unwrap();
    }
    client.del("hotels", "h29").await.unwrap();
    for n in 0..4 {
        client
            .get("hotels", format!("h{n}").as_str())
            .await
            .unwrap();
    }
    client.get("hotels", "nobody").await.unwrap();
    // h0, h3, … h27: ten in Paris (h29, deleted, was in Nice).
    assert_eq!(
        client
            .search("hotels", vec![Predicate::equals("city", "Paris")])
            .await
            .unwrap()
            .len(),
        10
    );
    assert_eq!(
        client
            .search("hotels", vec![Predicate::equals("city", "Paris")])
            .await
            .unwrap()
            .len(),
        10
    );
    // Prices 60..=100 untouched by the repricing: h5..h9.
    let cheap = vec![
        Predicate::equals("city", "Lyon"),
        Predicate::new("price", PredicateOp::Range(60i64.into(), 100i64.into())),
        Predicate::new("city", PredicateOp::Regex("^L".into())),
    ];
    assert_eq!(client.count("hotels", cheap).await.unwrap(), 1); // h7: Lyon (7 % 3 == 1), price 80
                                                                 // No subspace has stars: every key region is searched (on every server of a cluster).
                                                                 // Two stars: h2, h7, … h27.
    assert_eq!(
        client
            .search("hotels", vec![Predicate::equals("stars", 2i64)])
            .await
            .unwrap()
            .len(),
        6
    );
}

fn assert_the_mix(trace: &SpaceTrace) {
    let got = counts(trace);
    let expected: BTreeMap<RequestShape, (f64, f64)> = [
        (write(&["city", "price", "stars"]), (30.0, 0.0)),
        (write(&["price"]), (5.0, 0.0)),
        (RequestShape::Del, (1.0, 0.0)),
        (RequestShape::Get, (5.0, 4.0)),
        (search(&[("city", Constraint::Eq)]), (2.0, 20.0)),
        (
            search(&[("city", Constraint::Eq), ("price", Constraint::Range)]),
            (1.0, 1.0),
        ),
        (search(&[("stars", Constraint::Eq)]), (1.0, 6.0)),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "{trace:?}"
    );
    for (shape, want) in expected {
        assert!(
            close(got[&shape], want),
            "{shape:?}: {:?}, expected {want:?}",
            got[&shape]
        );
    }
}

#[tokio::test]
async fn a_standalone_server_traces_what_it_serves() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.add_space(HOTELS).await.unwrap();
    run_the_mix(&client).await;
    let trace = client.trace("hotels", 5).await.unwrap();
    assert_eq!(
        (trace.space.as_str(), trace.minutes, trace.servers),
        ("hotels", 5, 1)
    );
    assert_the_mix(&trace);
    // A refused request is not traced; an unknown space is refused.
    assert_eq!(
        error(client.trace("nowhere", 5).await).0,
        Status::UnknownSpace
    );
    // A space of the same name created again starts with an empty trace.
    client.rm_space("hotels").await.unwrap();
    client.add_space(HOTELS).await.unwrap();
    assert!(client.trace("hotels", 5).await.unwrap().shapes.is_empty());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_trace_counts_each_request_once() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let config = cluster.add_space(&client, HOTELS).await;
    run_the_mix(&client).await;
    let trace = client.trace("hotels", 5).await.unwrap();
    assert_eq!(trace.servers as usize, config.servers.len());
    assert_the_mix(&trace);
}
