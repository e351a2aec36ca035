//! A cluster whose coordinator and servers serve TLS (issue "Security and limits", items 3 and
//! 6), with certificates from an authority made here: members connect to each other over TLS
//! (registration, configurations, chains), clients trusting the authority read and write, and
//! plain TCP to any of its ports — a client without TLS, or raw frames — is told the port
//! speaks TLS, closed, and changes nothing. A client trusting another authority cannot connect.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::cluster::{replicated_kv, Cluster, Raw};
use common::*;
use futures::{SinkExt, StreamExt};
use tessera_client::{Client, ClientError, ClientOptions, Predicate, Status};
use tessera_protocol::tls::{write_pem, Authority, ClientTls, MemberTls, ServerTls};
use tessera_protocol::{
    codec, decode_response, encode_request, ClusterSecret, Gate, Policy, Request, RequestFrame,
    Response, TokenTable,
};
use tessera_types::Epoch;
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

const ADMIN: &str = "admin-0123456789abcdef";

/// An authority's certificate and a certificate for 127.0.0.1 it signed, as files in `dir`.
fn certificates(dir: &Path) -> (std::path::PathBuf, MemberTls) {
    let authority = Authority::create().unwrap();
    let issued = authority.issue(&["127.0.0.1".to_string()]).unwrap();
    let (ca, cert, key) = (dir.join("ca.pem"), dir.join("d.pem"), dir.join("d.key"));
    write_pem(&ca, authority.certificate_pem(), false).unwrap();
    write_pem(&cert, &issued.certificate_pem, false).unwrap();
    write_pem(&key, &issued.key_pem, true).unwrap();
    let tls = MemberTls {
        serve: ServerTls::from_pem_files(&cert, &key).unwrap(),
        dial: ClientTls::from_ca_file(&ca).unwrap(),
    };
    (ca, tls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_tls_serves_trusting_clients_and_tells_plain_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, tls) = certificates(dir.path());
    let gate = Arc::new(Gate::new(Policy {
        tokens: Some(TokenTable::parse(&format!("{ADMIN} admin")).unwrap()),
        secret: Some(ClusterSecret::parse(b"the-cluster-secret-0123456789").unwrap()),
    }));
    let cluster = Cluster::start_guarded(3, true, (gate, Some(tls)), |_| {}).await;
    let address = cluster.coordinator.local_addr().to_string();

    let trusting = ClientOptions::default()
        .with_token(ADMIN)
        .with_tls_ca(&ca)
        .unwrap();
    let client = Client::connect_with(&address, trusting).await.unwrap();
    // Two replicas: every write goes along a chain of two servers, over TLS peer links.
    replicated_kv(&client, 50).await;
    let found = client
        .search("kv", vec![Predicate::equals("n", 7i64)])
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect::<Vec<_>>();
    assert_eq!(found, vec![s("k7")]);
    let before = snapshot(&client, "kv").await;

    // A client without TLS is told what is wrong.
    let plain = ClientOptions::default().with_token(ADMIN);
    let refused = Client::connect_with(&address, plain).await.err().unwrap();
    assert_eq!(
        refused.status(),
        Some(Status::UnsupportedProtocol),
        "{refused}"
    );
    assert!(refused.to_string().contains("speaks TLS"), "{refused}");

    // Raw plain frames to every port: a space removal to the coordinator, a write to each
    // server. Each is answered with the same error and the connection closed.
    let mut ports = vec![(
        cluster.coordinator.local_addr(),
        Request::RmSpace { name: "kv".into() },
    )];
    for server in &cluster.servers {
        let put = Request::Del {
            space: "kv".into(),
            key: s("k1"),
            conditions: vec![],
        };
        ports.push((server.local_addr(), put));
    }
    for (port, request) in ports {
        let mut conn: Raw = Framed::new(TcpStream::connect(port).await.unwrap(), codec());
        let frame = RequestFrame {
            id: 9,
            epoch: Epoch(0),
            request,
        };
        conn.send(encode_request(&frame).unwrap()).await.unwrap();
        let answer = decode_response(&conn.next().await.unwrap().unwrap()).unwrap();
        assert_eq!(answer.id, 0, "about the connection, not the request");
        assert!(
            matches!(&answer.response, Response::Error(e) if e.status == Status::UnsupportedProtocol),
            "{answer:?}"
        );
        let after = tokio::time::timeout(Duration::from_secs(5), conn.next())
            .await
            .unwrap();
        assert!(after.is_none() || after.unwrap().is_err(), "closed");
    }
    assert_eq!(snapshot(&client, "kv").await, before);

    // A client trusting another authority refuses the daemons.
    let elsewhere = tempfile::tempdir().unwrap();
    let (other_ca, _) = certificates(elsewhere.path());
    let untrusting = ClientOptions::default()
        .with_token(ADMIN)
        .with_tls_ca(&other_ca)
        .unwrap();
    match Client::connect_with(&address, untrusting).await {
        Err(ClientError::Tls(message)) => assert!(message.contains("UnknownIssuer"), "{message}"),
        other => panic!("expected a TLS failure, got {:?}", other.err()),
    }

    // The cluster goes on writing.
    client.put("kv", "k50", [("n", i(50))]).await.unwrap();
    assert_eq!(client.count("kv", vec![]).await.unwrap(), 51);
}
