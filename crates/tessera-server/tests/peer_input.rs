//! What a peer sends is checked, never trusted: a connection that says `PeerHello` and then
//! sends one bad envelope is closed, whatever is wrong with it, and nothing changes: the server
//! still answers clients, and the stored data is what it was.
//!
//! A real cluster server (two servers, K = 1, so each holds only some regions) with a real
//! coordinator; the envelopes are built with the real types and framing, each with exactly one
//! defect. A control envelope without a defect (from a stale incarnation of a real peer, so
//! the state machine drops it) leaves the connection open.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::cluster::{peer_connection, point_leader, Cluster, Raw};
use futures::{SinkExt, StreamExt};
use tessera_client::{Client, Predicate, Record, Value};
use tessera_geometry::{key_region, RegionIndex};
use tessera_protocol::frame::encode;
use tessera_protocol::Configuration;
use tessera_replication::message::TransferChunk;
use tessera_replication::{ChainAck, ChainUpdate, Envelope, PeerMessage};
use tessera_server::Server;
use tessera_types::{Object, ServerId, StoredObject, SubspaceId, Version};

const SPACE: &str =
    "space t key k attributes int x subspace x create 8 partitions tolerate 0 failures";
const KEYS: usize = 40;

/// Everything a bad envelope must leave alone: every key's object and version, and a search.
async fn stored(client: &Client) -> (Vec<Option<Record>>, Vec<Record>) {
    let mut gets = Vec::new();
    for n in 0..KEYS {
        gets.push(client.get("t", format!("k{n}").as_str()).await.unwrap());
    }
    let mut all = client
        .search(
            "t",
            vec![Predicate::new(
                "x",
                tessera_client::PredicateOp::LessThan(Value::Int(1000)),
            )],
        )
        .await
        .unwrap();
    all.sort_by(|a, b| a.key.cmp(&b.key));
    (gets, all)
}

/// The first key `p{n}` whose point leader is (or, with `led` false, is not) `server`.
fn key_led(config: &Configuration, server: ServerId, led: bool) -> Value {
    (0..)
        .map(|n| Value::from(format!("p{n}").as_str()))
        .find(|k| (point_leader(config, "t", k) == server) == led)
        .expect("some key")
}

fn object(key: &Value, x: i64) -> Object {
    Object {
        values: vec![key.clone(), Value::Int(x)],
    }
}

fn envelope(from: ServerId, seq: u64, body: Option<PeerMessage>) -> Bytes {
    let envelope = Envelope {
        from,
        incarnation: 1,
        to_incarnation: 0,
        seq,
        ack: 0,
        body,
    };
    encode(&envelope).expect("an envelope encodes")
}

async fn closed_in_time(conn: &mut Raw) -> bool {
    match tokio::time::timeout(Duration::from_secs(10), conn.next()).await {
        Ok(None | Some(Err(_))) => true,
        Ok(Some(Ok(frame))) => panic!("a peer connection got an answer: {frame:?}"),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_envelope_closes_its_connection_and_changes_nothing() {
    let cluster = Cluster::start(2).await;
    let client = cluster.client().await;
    let config = cluster.add_space(&client, SPACE).await;
    for n in 0..KEYS {
        client
            .put("t", format!("k{n}").as_str(), [("x", n as i64)])
            .await
            .unwrap();
    }
    let before = stored(&client).await;
    let target: &Server = &cluster.servers[0];
    let (me, other) = (target.id(), cluster.servers[1].id());
    let space = config.space("t").unwrap();
    let tessellation = &space.tessellations()[0];

    // An update this server takes as the head of a key region it holds: valid in every way.
    let mine = key_led(&config, me, true);
    let update = ChainUpdate {
        space: space.id,
        epoch: config.epoch,
        version: Version(1_000_000),
        after: None,
        old: None,
        new: Some(object(&mine, 7)),
        subspace: SubspaceId::KEY,
        region: key_region(tessellation, &mine),
        resent: false,
    };
    let chain = |u: ChainUpdate| Some(PeerMessage::Chain(u));
    let theirs = key_led(&config, me, false);
    // A transfer chunk of the key region of `mine`: its positions are storage keys of the
    // region (`region (u32 BE) | key bytes`).
    let region = key_region(tessellation, &mine);
    let at = |region: RegionIndex, key: &[u8]| {
        let mut position = region.0.to_be_bytes().to_vec();
        position.extend_from_slice(key);
        Some(position)
    };
    let chunk = TransferChunk {
        space: space.id,
        epoch: config.epoch,
        id: config.epoch.0,
        subspace: SubspaceId::KEY,
        region,
        after: at(region, b"a"),
        through: at(region, b"b"),
        entries: vec![],
        left_out: vec![],
        last: false,
    };
    let transfer = |c: TransferChunk| Some(PeerMessage::Transfer(c));
    let other_region = RegionIndex((region.0 + 1) % 8);
    // A key of the region past the chunk's range.
    let past = (0..)
        .map(|n| Value::from(format!("z{n}").as_str()))
        .find(|k| key_region(tessellation, k) == region)
        .expect("some key");
    let cases: Vec<(&str, Bytes)> = vec![
        (
            "sequence 0 with a body",
            envelope(other, 0, chain(update.clone())),
        ),
        ("no body with a sequence number", envelope(other, 3, None)),
        (
            "an update with neither old nor new object",
            envelope(
                other,
                1,
                chain(ChainUpdate {
                    new: None,
                    ..update.clone()
                }),
            ),
        ),
        (
            "a truncated object",
            envelope(
                other,
                1,
                chain(ChainUpdate {
                    new: Some(Object {
                        values: vec![mine.clone()],
                    }),
                    ..update.clone()
                }),
            ),
        ),
        (
            "an object of the wrong types",
            envelope(
                other,
                1,
                chain(ChainUpdate {
                    new: Some(Object {
                        values: vec![mine.clone(), Value::from("seven")],
                    }),
                    ..update.clone()
                }),
            ),
        ),
        (
            "old and new of different keys",
            envelope(
                other,
                1,
                chain(ChainUpdate {
                    old: Some(object(&theirs, 1)),
                    ..update.clone()
                }),
            ),
        ),
        (
            "version 0",
            envelope(
                other,
                1,
                chain(ChainUpdate {
                    version: Version::NONE,
                    ..update.clone()
                }),
            ),
        ),
        (
            "a region that does not exist",
            envelope(
                other,
                1,
                chain(ChainUpdate {
                    region: RegionIndex(1_000_000),
                    ..update.clone()
                }),
            ),
        ),
        (
            "a region this server does not hold",
            envelope(
                other,
                1,
                chain(ChainUpdate {
                    new: Some(object(&theirs, 7)),
                    region: key_region(tessellation, &theirs),
                    ..update.clone()
                }),
            ),
        ),
        (
            "a space that does not exist",
            envelope(
                other,
                1,
                chain(ChainUpdate {
                    space: space.id + 1000,
                    ..update.clone()
                }),
            ),
        ),
        (
            "an acknowledgement of version 0",
            envelope(
                other,
                1,
                Some(PeerMessage::Ack(ChainAck {
                    space: space.id,
                    epoch: config.epoch,
                    key: mine.clone(),
                    version: Version::NONE,
                    subspace: SubspaceId::KEY,
                    region: key_region(tessellation, &mine),
                })),
            ),
        ),
        (
            "a transfer chunk whose range runs backwards",
            envelope(
                other,
                1,
                transfer(TransferChunk {
                    after: at(region, b"b"),
                    through: at(region, b"a"),
                    ..chunk.clone()
                }),
            ),
        ),
        (
            "a transfer chunk whose range is another region's",
            envelope(
                other,
                1,
                transfer(TransferChunk {
                    through: at(other_region, b"b"),
                    ..chunk.clone()
                }),
            ),
        ),
        (
            "a transfer chunk with an entry outside its range",
            envelope(
                other,
                1,
                transfer(TransferChunk {
                    entries: vec![StoredObject {
                        version: Version(1),
                        object: object(&past, 1),
                    }],
                    ..chunk.clone()
                }),
            ),
        ),
        (
            "a transfer chunk said to be the last that ends before the region does",
            envelope(
                other,
                1,
                transfer(TransferChunk {
                    last: true,
                    ..chunk.clone()
                }),
            ),
        ),
        (
            "a transfer chunk leaving out a key of the wrong type",
            envelope(
                other,
                1,
                transfer(TransferChunk {
                    left_out: vec![Value::Int(1)],
                    ..chunk.clone()
                }),
            ),
        ),
        (
            "an envelope claiming to come from the server itself",
            envelope(me, 1, chain(update.clone())),
        ),
        (
            "an envelope from another server than the hello's",
            envelope(ServerId(77), 1, chain(update.clone())),
        ),
        (
            "undecodable bytes",
            Bytes::from_static(b"\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff not an envelope"),
        ),
        ("an empty frame", Bytes::new()),
    ];
    for (n, (what, frame)) in cases.into_iter().enumerate() {
        let mut conn = peer_connection(target.local_addr(), other).await;
        conn.send(frame).await.unwrap();
        assert!(
            closed_in_time(&mut conn).await,
            "{what}: the server closes the connection"
        );
        // The server still answers clients: a write and a read of a key outside the data.
        let probe = format!("probe{n}");
        client
            .put("t", probe.as_str(), [("x", 5000i64)])
            .await
            .unwrap_or_else(|e| panic!("{what}: a write after it: {e}"));
        assert!(
            client.get("t", probe.as_str()).await.unwrap().is_some(),
            "{what}"
        );
        assert_eq!(
            stored(&client).await,
            before,
            "{what}: the stored data is unchanged"
        );
    }
    assert!(!target.storage_failed());

    // The control: the same valid update, addressed to an earlier life of the server (so the
    // state machine drops it), passes the checks and the connection stays open.
    let mut conn = peer_connection(target.local_addr(), other).await;
    let stale = Envelope {
        from: other,
        incarnation: 1,
        to_incarnation: 1,
        seq: 1,
        ack: 0,
        body: chain(update),
    };
    conn.send(encode(&stale).unwrap()).await.unwrap();
    let open = tokio::time::timeout(Duration::from_millis(500), conn.next()).await;
    assert!(
        open.is_err(),
        "a good envelope leaves the connection open: {open:?}"
    );
    assert_eq!(
        stored(&client).await,
        before,
        "a stale peer's update changes nothing"
    );
    assert!(client.get("t", mine).await.unwrap().is_none());
}
