//! The coordinator's listener under hostile clients (issue "Security and limits", item 5): a
//! frame begun and never finished is closed after the frame timeout; past the connection cap a
//! client is told `UNAVAILABLE: too many connections` instead of hanging; connections of members
//! that proved the cluster secret do not count against the cap, so clients filling it cannot
//! shut members out, nor members clients.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use futures::{SinkExt, StreamExt};
use tessera_coordinator::ConnectionLimits;
use tessera_protocol::handshake::Dialer;
use tessera_protocol::{
    codec, decode_response, encode_request, ClusterSecret, Gate, Policy, Request, RequestFrame,
    Response, Status,
};
use tessera_types::Epoch;
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

const SECRET: &str = "the-cluster-secret-0123456789";
const CAP: usize = 3;

async fn limited() -> (tessera_coordinator::Coordinator, tempfile::TempDir) {
    one_coordinator(|options| {
        options.gate = Arc::new(Gate::new(Policy {
            tokens: None,
            secret: Some(ClusterSecret::parse(SECRET.as_bytes()).unwrap()),
        }));
        options.limits = ConnectionLimits {
            frame_timeout: Duration::from_secs(1),
            idle_timeout: None,
            connections_max: CAP,
        };
    })
    .await
}

type Raw = Framed<TcpStream, tokio_util::codec::LengthDelimitedCodec>;

/// Asks for the coordinator's status on `conn`; the answer.
async fn ask(conn: &mut Raw) -> Response {
    let frame = RequestFrame {
        id: 1,
        epoch: Epoch(0),
        request: Request::CoordinatorStatus,
    };
    conn.send(encode_request(&frame).unwrap()).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), conn.next())
        .await
        .expect("an answer in time")
        .expect("an answer")
        .unwrap();
    decode_response(&answer).unwrap().response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_frame_is_closed_after_the_frame_timeout() {
    let (c, _dir) = limited().await;
    let mut tcp = TcpStream::connect(c.local_addr()).await.unwrap();
    // A length prefix of 100 bytes, then 10 of them, then nothing.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tcp.write_all(&[0, 0, 0, 100]).await.unwrap();
    tcp.write_all(&[1; 10]).await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf))
        .await
        .expect("closed well within 10 s");
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "closed, not answered: {read:?}"
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(5),
        "closed after {took:?}"
    );
    // The coordinator still serves.
    let mut conn: Raw = Framed::new(TcpStream::connect(c.local_addr()).await.unwrap(), codec());
    assert!(matches!(
        ask(&mut conn).await,
        Response::CoordinatorStatus(_)
    ));
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_cap_clients_are_told_and_members_do_not_count() {
    let (c, _dir) = limited().await;
    // CAP idle clients fill the cap.
    let mut idle = Vec::new();
    for _ in 0..CAP {
        let mut conn: Raw = Framed::new(TcpStream::connect(c.local_addr()).await.unwrap(), codec());
        assert!(matches!(
            ask(&mut conn).await,
            Response::CoordinatorStatus(_)
        ));
        idle.push(conn);
    }
    // One more is told why, and closed.
    let mut over: Raw = Framed::new(TcpStream::connect(c.local_addr()).await.unwrap(), codec());
    let _ = over
        .send(
            encode_request(&RequestFrame {
                id: 1,
                epoch: Epoch(0),
                request: Request::CoordinatorStatus,
            })
            .unwrap(),
        )
        .await;
    let told = decode_response(&over.next().await.unwrap().unwrap()).unwrap();
    assert_eq!(told.id, 0);
    match told.response {
        Response::Error(e) => {
            assert_eq!(e.status, Status::Unavailable);
            assert!(e.message.contains("too many connections"), "{}", e.message);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Once the clients leave, CAP members connect, prove the secret, and stay...
    drop(idle);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let member = Dialer::member(Some(ClusterSecret::parse(SECRET.as_bytes()).unwrap()), None);
    let mut members = Vec::new();
    for _ in 0..CAP {
        let conn = member
            .connect(&c.local_addr().to_string(), codec(), Duration::from_secs(5))
            .await
            .expect("a member connects");
        members.push(conn);
    }
    // ...and CAP clients are still served beside them.
    let mut clients = Vec::new();
    for _ in 0..CAP {
        let mut conn: Raw = Framed::new(TcpStream::connect(c.local_addr()).await.unwrap(), codec());
        assert!(matches!(
            ask(&mut conn).await,
            Response::CoordinatorStatus(_)
        ));
        clients.push(conn);
    }
    c.shutdown().await;
}
