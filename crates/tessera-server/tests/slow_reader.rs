//! A client that sends searches and never reads their results (issue "Security and limits",
//! items 5 and 6): the server stops producing for it rather than buffering, so its memory
//! stays bounded, and it goes on answering everyone else. Its own test binary: it measures
//! the process's resident memory, which other tests running beside it would disturb.

mod common;

use std::time::Duration;

use common::*;
use futures::{SinkExt, StreamExt};
use tessera_protocol::{codec, encode_request, Configuration, RequestFrame, SearchAnswer};
use tessera_types::Epoch;
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

const OBJECTS: usize = 2_000;
const OBJECT_BYTES: usize = 10 * 1024;
const SLOW_CONNECTIONS: usize = 4;
const SEARCHES_EACH: u64 = 16;

/// The process's resident memory, in MiB.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line");
    kib / 1024.0
}

/// Sends `SEARCHES_EACH` searches for every object (every region of the key subspace of
/// `config`, as a client would) and reads nothing back.
async fn slow_reader(
    server: &TestServer,
    config: &Configuration,
) -> Framed<TcpStream, LengthDelimitedCodec> {
    let stream = TcpStream::connect(server.addr()).await.unwrap();
    let mut conn = Framed::new(stream, codec());
    for id in 1..=SEARCHES_EACH {
        let frame = encode_request(&RequestFrame {
            id,
            epoch: Epoch(0),
            request: search_everything(config, "blobs", SearchAnswer::Matches),
        })
        .unwrap();
        conn.send(frame).await.unwrap();
    }
    conn
}

/// The tests run one at a time: one measures the memory of the process they share.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn load(server: &TestServer) -> tessera_client::Client {
    let client = server.client().await;
    client
        .add_space("space blobs key id attributes string body, int n subspace n")
        .await
        .unwrap();
    let body = "x".repeat(OBJECT_BYTES);
    let puts = (0..OBJECTS).map(|n| {
        let client = &client;
        let body = body.as_str();
        async move {
            client
                .put(
                    "blobs",
                    format!("k{n}").as_str(),
                    [("body", s(body)), ("n", i(n as i64))],
                )
                .await
                .unwrap()
        }
    });
    futures::future::join_all(puts).await;
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_searches_holds_little_server_memory() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let server = TestServer::start().await;
    let client = load(&server).await;
    let data_mib = (OBJECTS * OBJECT_BYTES) as f64 / (1 << 20) as f64;

    // Warm the search path once, fully read, so what it allocates for good is in the baseline.
    assert_eq!(client.search("blobs", vec![]).await.unwrap().len(), OBJECTS);
    let config = client.refresh().await.unwrap();
    let before = rss_mib();

    // Buffering every result would hold SLOW_CONNECTIONS × SEARCHES_EACH × ~20 MiB.
    let mut slow = Vec::new();
    for _ in 0..SLOW_CONNECTIONS {
        slow.push(slow_reader(&server, &config).await);
    }
    let mut peak = before;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        peak = peak.max(rss_mib());
    }

    // Everyone else is still served, searches included, while the slow readers hold on.
    let everything = tokio::time::timeout(Duration::from_secs(20), client.search("blobs", vec![]))
        .await
        .expect("a search in time beside the slow readers")
        .unwrap();
    assert_eq!(everything.len(), OBJECTS);
    assert_serving(server.addr()).await;
    peak = peak.max(rss_mib());

    let grown = peak - before;
    eprintln!(
        "resident memory {before:.0} MiB before, {peak:.0} MiB at most with {SLOW_CONNECTIONS} \
         connections of {SEARCHES_EACH} unread searches over {data_mib:.0} MiB of objects"
    );
    // Per connection: 4 MiB queued, a frame (~256 KiB) per search waiting for room, and the
    // writer's buffer; 24 MiB each is generous and still far below one search's results.
    assert!(
        grown < 24.0 * SLOW_CONNECTIONS as f64,
        "the server buffered for clients that do not read: {grown:.0} MiB more"
    );

    // Closing the slow readers frees their searches' threads: a new connection's searches run.
    drop(slow);
    for _ in 0..SEARCHES_EACH {
        let found = tokio::time::timeout(Duration::from_secs(20), client.search("blobs", vec![]))
            .await
            .expect("searches run again after the slow readers left")
            .unwrap();
        assert_eq!(found.len(), OBJECTS);
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_takes_nothing_for_the_frame_timeout_is_closed() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let server = TestServer::start_with(|o| o.limits.frame_timeout = Duration::from_secs(1)).await;
    let client = load(&server).await;
    let config = client.refresh().await.unwrap();
    let mut slow = slow_reader(&server, &config).await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    // What the server wrote before it gave up is still in the socket; then the stream ends,
    // with most searches unanswered (a client that read would get all of them).
    let mut done = 0;
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(frame) = slow.next().await {
            let Ok(frame) = frame else { break };
            let frame = tessera_protocol::decode_response(&frame).expect("a response");
            done += u64::from(matches!(
                frame.response,
                tessera_protocol::Response::SearchDone
            ));
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the server kept a connection that took nothing for 3 s open"
    );
    assert!(done < SEARCHES_EACH, "every search was answered: {done}");
    assert_serving(server.addr()).await;
    assert_eq!(client.search("blobs", vec![]).await.unwrap().len(), OBJECTS);
    server.shutdown().await;
}
