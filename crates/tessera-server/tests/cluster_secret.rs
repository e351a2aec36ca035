//! A cluster whose coordinator and servers share a secret (issue "Security and limits", items 2
//! and 6): its members prove it to each other on every connection (registration, heartbeats,
//! configurations, chains), so it works as before, with client tokens; a socket that does not
//! prove it and says `PeerHello` to a server is refused and closed, and nothing it sends after
//! is acted on.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::cluster::{replicated_kv, Cluster, Raw};
use common::*;
use futures::{SinkExt, StreamExt};
use tessera_client::{Client, ClientOptions, Status};
use tessera_protocol::{
    codec, decode_response, encode_request, ClusterSecret, Gate, Policy, Request, RequestFrame,
    Response, TokenTable,
};
use tessera_types::{Epoch, ServerId};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

const ADMIN: &str = "admin-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secured_cluster_serves_and_refuses_a_socket_posing_as_a_peer() {
    let gate = Arc::new(Gate::new(Policy {
        tokens: Some(TokenTable::parse(&format!("{ADMIN} admin")).unwrap()),
        secret: Some(ClusterSecret::parse(b"the-cluster-secret-0123456789").unwrap()),
    }));
    let cluster = Cluster::start_guarded(3, true, (gate, None), |_| {}).await;
    let address = cluster.coordinator.local_addr().to_string();
    assert_eq!(
        Client::connect(&address)
            .await
            .err()
            .and_then(|e| e.status()),
        Some(Status::Unauthorized)
    );
    let client = Client::connect_with(&address, ClientOptions::default().with_token(ADMIN))
        .await
        .unwrap();
    // Two replicas: every write goes along a chain of two servers, over their peer links.
    replicated_kv(&client, 50).await;
    let before = snapshot(&client, "kv").await;

    // A socket posing as server 1 to each server, then sending what a peer would.
    for server in &cluster.servers {
        let mut conn: Raw = Framed::new(
            TcpStream::connect(server.local_addr()).await.unwrap(),
            codec(),
        );
        let hello = RequestFrame {
            id: 1,
            epoch: Epoch(0),
            request: Request::PeerHello { from: ServerId(1) },
        };
        conn.send(encode_request(&hello).unwrap()).await.unwrap();
        let answer = decode_response(&conn.next().await.unwrap().unwrap()).unwrap();
        assert!(
            matches!(&answer.response, Response::Error(e) if e.status == Status::Unauthorized),
            "{answer:?}"
        );
        let _ = conn.send(bytes::Bytes::from_static(&[1, 0, 0, 0])).await;
        let after = tokio::time::timeout(Duration::from_secs(5), conn.next())
            .await
            .unwrap();
        assert!(
            after.is_none() || after.unwrap().is_err(),
            "the connection is closed"
        );
    }
    assert_eq!(snapshot(&client, "kv").await, before);
    client.put("kv", "k50", [("n", i(50))]).await.unwrap();
    assert_eq!(client.count("kv", vec![]).await.unwrap(), 51);
}
