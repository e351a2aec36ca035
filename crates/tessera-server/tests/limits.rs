//! Connection limits (issue "Security and limits", item 5): a frame begun and never finished is
//! closed after the frame timeout, an idle connection after the idle timeout (only when one is
//! set), and a connection past the cap is told why and closed — while the server goes on
//! answering everyone else.

mod common;

use std::time::{Duration, Instant};

use common::*;
use futures::{SinkExt, StreamExt};
use tessera_protocol::{
    codec, decode_response, encode_request, Request, RequestFrame, Response, Status,
};
use tessera_server::ConnectionLimits;
use tessera_types::Epoch;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

type Raw = Framed<TcpStream, LengthDelimitedCodec>;

async fn limited(limits: ConnectionLimits) -> TestServer {
    TestServer::start_with(move |o| o.limits = limits).await
}

async fn raw(server: &TestServer) -> Raw {
    Framed::new(TcpStream::connect(server.addr()).await.unwrap(), codec())
}

/// A request that needs no space: the configuration.
async fn ask(conn: &mut Raw, id: u64) -> Response {
    let bytes = encode_request(&RequestFrame {
        id,
        epoch: Epoch(0),
        request: Request::GetConfig,
    })
    .unwrap();
    conn.send(bytes).await.unwrap();
    let frame = decode_response(&next_frame(conn).await).unwrap();
    assert_eq!(frame.id, id);
    frame.response
}

/// The next frame the server sends, within 10 s.
async fn next_frame(conn: &mut Raw) -> bytes::BytesMut {
    tokio::time::timeout(Duration::from_secs(10), conn.next())
        .await
        .expect("a frame in time")
        .expect("a frame before the connection closed")
        .expect("a well-formed frame")
}

/// Waits (at most 10 s) for the server to close the connection; how long it took.
async fn closed_after(conn: &mut Raw) -> Duration {
    let start = Instant::now();
    match tokio::time::timeout(Duration::from_secs(10), conn.next())
        .await
        .expect("closed in time")
    {
        None | Some(Err(_)) => start.elapsed(),
        Some(Ok(body)) => panic!("expected a close, got {:?}", decode_response(&body)),
    }
}

/// Still open after `wait`: nothing to read and no end of stream.
async fn still_open(conn: &mut Raw, wait: Duration) {
    assert!(
        tokio::time::timeout(wait, conn.next()).await.is_err(),
        "the connection ended or answered unasked"
    );
}

fn limits(frame_ms: u64, idle_ms: Option<u64>, max: usize) -> ConnectionLimits {
    ConnectionLimits {
        frame_timeout: Duration::from_millis(frame_ms),
        idle_timeout: idle_ms.map(Duration::from_millis),
        connections_max: max,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_frame_is_closed_after_the_frame_timeout() {
    let server = limited(limits(400, None, 64)).await;
    // A length prefix announcing 100 bytes, and 10 of them.
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    stream.write_all(&100u32.to_be_bytes()).await.unwrap();
    stream.write_all(&[0u8; 10]).await.unwrap();
    let mut half = Framed::new(stream, codec());
    let took = closed_after(&mut half).await;
    assert!(
        took <= Duration::from_secs(3),
        "closed only after {took:?} (timeout 400 ms)"
    );
    // A connection that sends whole frames, slowly, is not touched; nor is an idle one.
    let mut slow = raw(&server).await;
    for id in 1..=3 {
        assert!(matches!(ask(&mut slow, id).await, Response::Config(_)));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    still_open(&mut slow, Duration::from_millis(900)).await;
    assert!(matches!(ask(&mut slow, 4).await, Response::Config(_)));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed_only_when_an_idle_timeout_is_set() {
    let server = limited(limits(200, Some(600), 64)).await;
    let mut idle = raw(&server).await;
    assert!(matches!(ask(&mut idle, 1).await, Response::Config(_)));
    let took = closed_after(&mut idle).await;
    assert!(
        took >= Duration::from_millis(500) && took <= Duration::from_secs(4),
        "closed after {took:?} (idle timeout 600 ms)"
    );
    // A busy connection is not idle.
    let mut busy = raw(&server).await;
    for id in 1..=10 {
        assert!(matches!(ask(&mut busy, id).await, Response::Config(_)));
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    server.shutdown().await;

    // Without an idle timeout (the default) an idle connection stays.
    let server = limited(limits(200, None, 64)).await;
    let mut idle = raw(&server).await;
    assert!(matches!(ask(&mut idle, 1).await, Response::Config(_)));
    still_open(&mut idle, Duration::from_millis(1500)).await;
    assert!(matches!(ask(&mut idle, 2).await, Response::Config(_)));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_past_the_cap_is_told_why_and_closed() {
    let server = limited(limits(30_000, None, 3)).await;
    let mut open = Vec::new();
    for n in 0..3 {
        let mut conn = raw(&server).await;
        assert!(matches!(ask(&mut conn, n).await, Response::Config(_)));
        open.push(conn);
    }
    // The fourth gets an answer it did not ask for, then the end of the stream.
    let mut fourth = raw(&server).await;
    match decode_response(&next_frame(&mut fourth).await)
        .unwrap()
        .response
    {
        Response::Error(e) => {
            assert_eq!(e.status, Status::Unavailable, "{e}");
            assert!(e.message.contains("too many connections"), "{e}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    closed_after(&mut fourth).await;
    // The three still work; once one closes, a new connection is served.
    for (n, conn) in open.iter_mut().enumerate() {
        assert!(matches!(
            ask(conn, 10 + n as u64).await,
            Response::Config(_)
        ));
    }
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        // A refused connection gets its refusal (id 0) before any answer: ask with id 0.
        let response = ask(&mut raw(&server).await, 0).await;
        if matches!(response, Response::Config(_)) {
            break;
        }
        // The server may not have noticed the close yet.
        assert!(Instant::now() < deadline, "still refused: {response:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.shutdown().await;
}

#[test]
fn the_connection_cap_fits_under_the_descriptor_limit() {
    let asked = ConnectionLimits::default();
    assert_eq!(
        asked.fit_to_descriptors(Some(300)).connections_max,
        300 - 128
    );
    assert_eq!(asked.fit_to_descriptors(Some(20_000)), asked);
    assert_eq!(asked.fit_to_descriptors(None), asked);
    assert_eq!(asked.fit_to_descriptors(Some(10)).connections_max, 1);
}
