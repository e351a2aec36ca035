//! Bad input (issue 2, "Bad input"): every case gets a typed error, or a closed connection when
//! the framing cannot be trusted any more; none changes any data; and the server goes on
//! serving everyone else, which each test checks with a second, independent client.

mod common;

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use common::*;
use futures::{SinkExt, StreamExt};
use tessera_client::{
    Client, ClientError, Funcall, FuncallOp, Predicate, PredicateOp, SortOrder, Status, Value,
};
use tessera_protocol::constants::{DESCRIPTION_BYTES_MAX, FRAME_BYTES_MAX};
use tessera_protocol::{
    codec, decode_response, encode_request, KeysChange, Request, RequestFrame, Response,
    ResponseFrame, SearchAnswer, WriteMode,
};
use tessera_types::constants::{KEY_BYTES_MAX, OBJECT_BYTES_MAX};
use tessera_types::{Epoch, SpaceSchema, SubspaceId};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// A server with the hotels space, a few hotels, and an int-keyed space.
async fn setup() -> (TestServer, Client) {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.add_space(HOTELS).await.unwrap();
    client
        .add_space("space cube key int id attributes int x, float f subspace x")
        .await
        .unwrap();
    for n in 0..20i64 {
        let attributes = [
            ("city", s(["Ithaca", "Oslo"][n as usize % 2])),
            ("stars", i(n % 5)),
            ("price", i(100 + n)),
            ("tags", string_set(["pool"])),
            ("floors", int_set([n])),
        ];
        client
            .put("hotels", format!("h{n}"), attributes)
            .await
            .unwrap();
        client.put("cube", n, [("x", i(n))]).await.unwrap();
    }
    (server, client)
}

/// Everything a bad request must leave alone.
#[derive(Debug, PartialEq)]
struct State {
    spaces: Vec<SpaceSchema>,
    hotels: Vec<tessera_client::Record>,
    cube: Vec<tessera_client::Record>,
}

async fn state(client: &Client) -> State {
    State {
        spaces: client
            .list_spaces()
            .await
            .unwrap()
            .into_iter()
            .filter(|s| s.name != "probe")
            .collect(),
        hotels: snapshot(client, "hotels").await,
        cube: snapshot(client, "cube").await,
    }
}

/// Runs the bad requests of one case and checks that they changed nothing and that the
/// server still serves another client.
async fn unchanged<F: std::future::Future<Output = ()>>(
    server: &TestServer,
    client: &Client,
    case: F,
) {
    let before = state(client).await;
    case.await;
    assert_eq!(
        state(client).await,
        before,
        "a refused request changed nothing"
    );
    assert_serving(server.addr()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_space() {
    let (server, client) = setup().await;
    unchanged(&server, &client, async {
        let c = &client;
        assert_eq!(status(c.get("nope", "k").await), Status::UnknownSpace);
        assert_eq!(
            status(c.put("nope", "k", [("a", 1i64)]).await),
            Status::UnknownSpace
        );
        assert_eq!(status(c.del("nope", "k").await), Status::UnknownSpace);
        assert_eq!(
            status(
                c.cond_del("nope", "k", vec![Predicate::equals("a", 1i64)])
                    .await
            ),
            Status::UnknownSpace
        );
        assert_eq!(status(c.search("nope", vec![]).await), Status::UnknownSpace);
        assert_eq!(status(c.count("nope", vec![]).await), Status::UnknownSpace);
        assert_eq!(
            status(
                c.sorted_search("nope", vec![], "a", 3, SortOrder::Ascending)
                    .await
            ),
            Status::UnknownSpace
        );
        assert_eq!(
            status(c.group_del("nope", vec![]).await),
            Status::UnknownSpace
        );
        assert_eq!(
            status(c.explain("nope", vec![]).await),
            Status::UnknownSpace
        );
        assert_eq!(status(c.rm_space("nope").await), Status::UnknownSpace);
        assert_eq!(
            status(c.region_counts("nope", SubspaceId(0)).await),
            Status::UnknownSpace
        );
        assert_eq!(
            status(c.multi_get("nope", vec![s("k")]).await),
            Status::UnknownSpace
        );
    })
    .await;
    server.shutdown().await;
}

/// Region counts (the console's shading) of every subspace add up to the objects stored; a
/// subspace the space does not have is refused as malformed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn region_counts_and_a_subspace_the_space_lacks() {
    let (server, client) = setup().await;
    let subspaces = client
        .describe_space("hotels")
        .await
        .unwrap()
        .subspaces
        .len();
    for n in 0..subspaces {
        let counts = client
            .region_counts("hotels", SubspaceId(n as u16))
            .await
            .unwrap();
        let regions: Vec<u32> = counts.iter().map(|c| c.region).collect();
        assert_eq!(regions, (0..regions.len() as u32).collect::<Vec<_>>());
        assert_eq!(
            counts.iter().map(|c| c.objects).sum::<u64>(),
            20,
            "subspace {n}"
        );
    }
    unchanged(&server, &client, async {
        let refused = client
            .region_counts("hotels", SubspaceId(subspaces as u16))
            .await;
        assert_eq!(status(refused), Status::Malformed);
    })
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_attribute() {
    let (server, client) = setup().await;
    unchanged(&server, &client, async {
        let c = &client;
        let unknown = || vec![Predicate::equals("nope", 1i64)];
        // In a put, even beside valid attributes: nothing of it applies.
        assert_eq!(
            status(
                c.put("hotels", "h1", [("stars", i(5)), ("nope", i(1))])
                    .await
            ),
            Status::UnknownAttribute
        );
        assert_eq!(
            status(c.put("hotels", "new", [("nope", i(1))]).await),
            Status::UnknownAttribute
        );
        assert_eq!(
            status(c.put_if_not_exist("hotels", "new", [("nope", i(1))]).await),
            Status::UnknownAttribute
        );
        // In a predicate.
        assert_eq!(
            status(
                c.cond_put("hotels", "h1", unknown(), [("stars", i(5))])
                    .await
            ),
            Status::UnknownAttribute
        );
        assert_eq!(
            status(c.cond_del("hotels", "h1", unknown()).await),
            Status::UnknownAttribute
        );
        assert_eq!(
            status(c.search("hotels", unknown()).await),
            Status::UnknownAttribute
        );
        assert_eq!(
            status(c.count("hotels", unknown()).await),
            Status::UnknownAttribute
        );
        assert_eq!(
            status(c.group_del("hotels", unknown()).await),
            Status::UnknownAttribute
        );
        assert_eq!(
            status(c.explain("hotels", unknown()).await),
            Status::UnknownAttribute
        );
        assert_eq!(
            status(
                c.sorted_search("hotels", unknown(), "stars", 3, SortOrder::Ascending)
                    .await
            ),
            Status::UnknownAttribute
        );
        // In sort_by; and sorting by a container is a type error.
        assert_eq!(
            status(
                c.sorted_search("hotels", vec![], "nope", 3, SortOrder::Ascending)
                    .await
            ),
            Status::UnknownAttribute
        );
        assert_eq!(
            status(
                c.sorted_search("hotels", vec![], "tags", 3, SortOrder::Descending)
                    .await
            ),
            Status::WrongType
        );
    })
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_types() {
    let (server, client) = setup().await;
    unchanged(&server, &client, async {
        let c = &client;
        let wrong_puts: Vec<(&str, Value)> = vec![
            ("stars", s("four")),                             // a string for an int
            ("city", i(3)),                                   // an int for a string
            ("rating", Value::Float(f64::NAN)),               // NaN is refused everywhere
            ("floors", list([s("one"), s("two")])),           // a list of strings for a set of ints
            ("floors", list([i(1), Value::Float(f64::NAN)])), // a NaN inside a container
            ("tags", int_set([1, 2])),                        // a set of ints for a set of strings
            ("notes", string_set(["a"])),                     // a set for a list
            ("rooms", map([("suite", "big")])),               // map values of the wrong type
            ("rooms", map([(1i64, 2i64)])),                   // map keys of the wrong type
            ("price", Value::Float(1.5)),                     // a float for an int
        ];
        for (attr, value) in wrong_puts {
            assert_eq!(
                status(c.put("hotels", "h1", [(attr, value.clone())]).await),
                Status::WrongType,
                "{attr} = {value:?}"
            );
            assert_eq!(
                status(c.put("hotels", "fresh", [(attr, value.clone())]).await),
                Status::WrongType,
                "{attr} = {value:?}"
            );
        }
        // One bad value spoils the whole put.
        assert_eq!(
            status(
                c.put("hotels", "h1", [("price", i(1)), ("stars", s("x"))])
                    .await
            ),
            Status::WrongType
        );
        assert_eq!(
            status(c.put("cube", 1i64, [("f", Value::Float(f64::NAN))]).await),
            Status::WrongType
        );
        // Keys of the wrong type.
        assert_eq!(status(c.get("hotels", 7i64).await), Status::WrongType);
        assert_eq!(
            status(c.put("hotels", 7i64, [("stars", i(1))]).await),
            Status::WrongType
        );
        assert_eq!(status(c.get("cube", "seven").await), Status::WrongType);
        assert_eq!(
            status(c.put("cube", "seven", [("x", i(1))]).await),
            Status::WrongType
        );
        assert_eq!(
            status(c.del("cube", Value::Float(1.0)).await),
            Status::WrongType
        );
        assert_eq!(status(c.del("cube", list([i(1)])).await), Status::WrongType);
        // Predicate operands of the wrong type.
        for p in [
            Predicate::equals("stars", "three"),
            Predicate::equals("rating", Value::Float(f64::NAN)),
            Predicate::new("price", PredicateOp::LessThan(s("10"))),
            Predicate::new("price", PredicateOp::Range(i(1), s("10"))),
            Predicate::new("tags", PredicateOp::Contains(i(1))),
            Predicate::new("floors", PredicateOp::Contains(s("1"))),
            Predicate::equals("floors", string_set(["1"])),
        ] {
            assert_eq!(
                status(c.search("hotels", vec![p.clone()]).await),
                Status::WrongType,
                "{p:?}"
            );
            assert_eq!(
                status(
                    c.cond_put("hotels", "h1", vec![p.clone()], [("stars", i(0))])
                        .await
                ),
                Status::WrongType,
                "{p:?}"
            );
        }
    })
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn predicates_that_cannot_apply_and_bad_regexes() {
    let (server, client) = setup().await;
    unchanged(&server, &client, async {
        let c = &client;
        for p in [
            Predicate::new("stars", PredicateOp::Regex("1".into())), // regex on an int
            Predicate::new("tags", PredicateOp::Regex("pool".into())), // regex on a set
            Predicate::new("price", PredicateOp::LengthEquals(3)),   // length of an int
            Predicate::new("rating", PredicateOp::LengthGreaterEqual(1)), // length of a float
            Predicate::new("notes", PredicateOp::LessThan(list([s("a")]))), // < on a list
            Predicate::new("tags", PredicateOp::GreaterEqual(s("a"))), // >= on a set
            Predicate::new("rooms", PredicateOp::Range(s("a"), s("b"))), // range on a map
            Predicate::new("price", PredicateOp::Contains(i(1))),    // contains on an int
        ] {
            assert_eq!(
                status(c.search("hotels", vec![p.clone()]).await),
                Status::WrongType,
                "{p:?}"
            );
            assert_eq!(
                status(c.count("hotels", vec![p.clone()]).await),
                Status::WrongType,
                "{p:?}"
            );
            assert_eq!(
                status(c.group_del("hotels", vec![p.clone()]).await),
                Status::WrongType,
                "{p:?}"
            );
            assert_eq!(
                status(c.cond_del("hotels", "h1", vec![p.clone()]).await),
                Status::WrongType,
                "{p:?}"
            );
        }
        for pattern in ["(unclosed", "[z-a]", "a{2,1}", "\\"] {
            let p = Predicate::new("city", PredicateOp::Regex(pattern.into()));
            assert_eq!(
                status(c.search("hotels", vec![p.clone()]).await),
                Status::BadPredicate,
                "{pattern}"
            );
            assert_eq!(
                status(c.explain("hotels", vec![p.clone()]).await),
                Status::BadPredicate,
                "{pattern}"
            );
            assert_eq!(
                status(c.group_del("hotels", vec![p.clone()]).await),
                Status::BadPredicate,
                "{pattern}"
            );
            assert_eq!(
                status(c.cond_put("hotels", "h1", vec![p], [("stars", i(0))]).await),
                Status::BadPredicate
            );
        }
        let huge = Predicate::new("city", PredicateOp::Regex("a".repeat(64 * 1024)));
        assert_eq!(
            status(c.search("hotels", vec![huge]).await),
            Status::BadPredicate
        );
    })
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_keys_and_objects() {
    let (server, client) = setup().await;
    // At the limits: accepted.
    let longest_key = "k".repeat(KEY_BYTES_MAX);
    client
        .put("hotels", longest_key.as_str(), [("stars", i(1))])
        .await
        .unwrap();
    assert!(client
        .get("hotels", longest_key.as_str())
        .await
        .unwrap()
        .is_some());
    client.del("hotels", longest_key.as_str()).await.unwrap();

    unchanged(&server, &client, async {
        let c = &client;
        let key = "k".repeat(KEY_BYTES_MAX + 1);
        assert_eq!(
            status(c.put("hotels", key.as_str(), [("stars", i(1))]).await),
            Status::TooLarge
        );
        assert_eq!(
            status(c.get("hotels", key.as_str()).await),
            Status::TooLarge
        );
        assert_eq!(
            status(c.del("hotels", key.as_str()).await),
            Status::TooLarge
        );

        // An object over the limit, by one long string: refused, the old object stays.
        let long = "x".repeat(OBJECT_BYTES_MAX + 1);
        assert_eq!(
            status(c.put("hotels", "h1", [("address", long.as_str())]).await),
            Status::TooLarge
        );
        assert_eq!(
            status(c.put("hotels", "fresh", [("address", long.as_str())]).await),
            Status::TooLarge
        );
        // Or by an update that makes it grow past the limit.
        let half = "y".repeat(OBJECT_BYTES_MAX / 2 + 16);
        let grow = vec![
            Funcall::set("address", half.as_str()),
            Funcall::set("city", half.as_str()),
        ];
        assert_eq!(
            status(c.atomic("hotels", "h2", grow).await),
            Status::TooLarge
        );
        assert_eq!(
            status(
                c.atomic(
                    "hotels",
                    "h3",
                    vec![Funcall::new(
                        "address",
                        FuncallOp::StringAppend,
                        long.as_str()
                    )]
                )
                .await
            ),
            Status::TooLarge
        );
    })
    .await;

    // A description over its limit.
    let description = format!(
        "space big key k attributes int n # {}",
        "x".repeat(DESCRIPTION_BYTES_MAX)
    );
    assert_eq!(
        status(client.add_space(&description).await),
        Status::TooLarge
    );
    assert!(client
        .list_spaces()
        .await
        .unwrap()
        .iter()
        .all(|s| s.name != "big"));
    assert_serving(server.addr()).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_descriptions_and_duplicate_spaces() {
    let (server, client) = setup().await;
    unchanged(&server, &client, async {
        let c = &client;
        let bad = [
            "space broken\nkey k\nattributes int a\nsubspace b\n", // unknown dimension
            "space broken\nkey k\nattributes int a,\n",            // dangling comma
            "space broken key k attributes wat(int) a",            // unknown type
            "space broken\n  key k\n  attributes int a, int a\n",  // duplicate attribute
            "space broken key k attributes int a create 0 partitions",
            "",
        ];
        for description in bad {
            let (status, message) = error(c.add_space(description).await);
            assert_eq!(status, Status::BadDescription, "{description:?}");
            let parsed = tessera_types::parse_space(description).unwrap_err();
            assert!(
                message.contains(&format!("{}:{}", parsed.line, parsed.column)),
                "the message {message:?} names the line and column of {description:?}"
            );
        }
        let (_, message) = error(
            c.add_space("space broken\nkey k\nattributes int a\nsubspace b\n")
                .await,
        );
        assert!(message.contains("4:10"), "{message}");
        // A space of an existing name, even with another schema.
        assert_eq!(status(c.add_space(HOTELS).await), Status::SpaceExists);
        assert_eq!(
            status(
                c.add_space("space cube key k attributes string other")
                    .await
            ),
            Status::SpaceExists
        );
    })
    .await;
    server.shutdown().await;
}

// ---- raw sockets -------------------------------------------------------------------------

type Raw = Framed<TcpStream, LengthDelimitedCodec>;

async fn raw(server: &TestServer) -> Raw {
    Framed::new(TcpStream::connect(server.addr()).await.unwrap(), codec())
}

async fn send(conn: &mut Raw, id: u64, epoch: Epoch, request: Request) {
    let bytes = encode_request(&RequestFrame { id, epoch, request }).unwrap();
    conn.send(bytes).await.unwrap();
}

async fn receive(conn: &mut Raw) -> ResponseFrame {
    let body = tokio::time::timeout(Duration::from_secs(10), conn.next())
        .await
        .expect("an answer in time")
        .expect("an answer before the connection closed")
        .expect("a well-formed frame");
    decode_response(&body).expect("a decodable response")
}

fn expect_error(frame: &ResponseFrame, id: u64, status: Status) {
    match &frame.response {
        Response::Error(e) => assert_eq!((frame.id, e.status), (id, status), "{e}"),
        other => panic!(
            "expected {status:?} for request {id}, got {other:?} (id {})",
            frame.id
        ),
    }
}

/// The server closes the connection: end of stream (or a reset) with nothing more to read.
async fn expect_closed(conn: &mut Raw) {
    match tokio::time::timeout(Duration::from_secs(10), conn.next())
        .await
        .expect("closed in time")
    {
        None | Some(Err(_)) => {}
        Some(Ok(body)) => panic!(
            "expected the connection closed, got {:?}",
            decode_response(&body)
        ),
    }
}

/// A valid request on a raw connection works.
async fn expect_working(conn: &mut Raw, id: u64) {
    send(
        conn,
        id,
        Epoch(0),
        Request::Get {
            space: "hotels".into(),
            key: s("h1"),
        },
    )
    .await;
    let frame = receive(conn).await;
    assert_eq!(frame.id, id);
    assert!(
        matches!(frame.response, Response::Object(Some(_))),
        "{:?}",
        frame.response
    );
}

fn body(bytes: &[u8]) -> Bytes {
    Bytes::copy_from_slice(bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_in_a_whole_frame_is_malformed_and_the_connection_goes_on() {
    let (server, client) = setup().await;
    unchanged(&server, &client, async {
        let mut conn = raw(&server).await;
        // A readable header (version, id 42, epoch 0), then a request variant that does not exist.
        let v = tessera_protocol::PROTOCOL_VERSION;
        conn.send(body(&[v, 42, 0, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3]))
            .await
            .unwrap();
        expect_error(&receive(&mut conn).await, 42, Status::Malformed);
        expect_working(&mut conn, 43).await;
        // A valid request cut short inside its body.
        let put = encode_request(&RequestFrame {
            id: 44,
            epoch: Epoch(0),
            request: Request::Put {
                space: "hotels".into(),
                key: s("h1"),
                mode: WriteMode::Upsert,
                conditions: vec![],
                funcalls: vec![Funcall::set("stars", 4i64), Funcall::set("city", "Cut")],
            },
        })
        .unwrap();
        conn.send(put.slice(..put.len() - 6)).await.unwrap();
        expect_error(&receive(&mut conn).await, 44, Status::Malformed);
        expect_working(&mut conn, 45).await;
        // Trailing bytes after a whole request: refused as malformed, or (postcard stops
        // at the end of the value) answered as the request; never anything else.
        let get = encode_request(&RequestFrame {
            id: 47,
            epoch: Epoch(0),
            request: Request::Get {
                space: "hotels".into(),
                key: s("h1"),
            },
        })
        .unwrap();
        let mut long = BytesMut::from(&get[..]);
        long.put_slice(&[0xff, 0, 7]);
        conn.send(long.freeze()).await.unwrap();
        let frame = receive(&mut conn).await;
        assert_eq!(frame.id, 47);
        assert!(
            matches!(&frame.response, Response::Object(Some(_)))
                || matches!(&frame.response, Response::Error(e) if e.status == Status::Malformed),
            "{:?}",
            frame.response
        );
        // Bytes whose id cannot be read: answered with id 0.
        conn.send(body(&[
            v, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        ]))
        .await
        .unwrap();
        expect_error(&receive(&mut conn).await, 0, Status::Malformed);
        // An empty frame.
        conn.send(Bytes::new()).await.unwrap();
        expect_error(&receive(&mut conn).await, 0, Status::Malformed);
        expect_working(&mut conn, 46).await;
    })
    .await;
    let h1 = client.get("hotels", "h1").await.unwrap().unwrap();
    assert_eq!(
        h1.attributes["city"],
        s("Oslo"),
        "the cut put changed nothing"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_protocol_version_is_refused_and_the_connection_closed() {
    let (server, client) = setup().await;
    unchanged(&server, &client, async {
        let mut conn = raw(&server).await;
        expect_working(&mut conn, 1).await;
        let mut frame = BytesMut::from(
            &encode_request(&RequestFrame {
                id: 2,
                epoch: Epoch(0),
                request: Request::Del {
                    space: "hotels".into(),
                    key: s("h1"),
                    conditions: vec![],
                },
            })
            .unwrap()[..],
        );
        frame[0] = tessera_protocol::PROTOCOL_VERSION + 1;
        conn.send(frame.freeze()).await.unwrap();
        expect_error(&receive(&mut conn).await, 0, Status::UnsupportedProtocol);
        expect_closed(&mut conn).await;
    })
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_length_prefix_is_refused_and_the_connection_closed() {
    let (server, client) = setup().await;
    unchanged(&server, &client, async {
        let mut stream = TcpStream::connect(server.addr()).await.unwrap();
        stream
            .write_all(&((FRAME_BYTES_MAX + 1) as u32).to_be_bytes())
            .await
            .unwrap();
        stream.flush().await.unwrap();
        let mut conn = Framed::new(stream, codec());
        expect_error(&receive(&mut conn).await, 0, Status::TooLarge);
        expect_closed(&mut conn).await;

        // The largest prefix there is, on a fresh connection.
        let mut stream = TcpStream::connect(server.addr()).await.unwrap();
        stream.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
        let mut conn = Framed::new(stream, codec());
        expect_error(&receive(&mut conn).await, 0, Status::TooLarge);
        expect_closed(&mut conn).await;
    })
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_frame_then_a_close_changes_nothing() {
    let (server, client) = setup().await;
    unchanged(&server, &client, async {
        let put = encode_request(&RequestFrame {
            id: 1,
            epoch: Epoch(0),
            request: Request::Put {
                space: "hotels".into(),
                key: s("h1"),
                mode: WriteMode::Upsert,
                conditions: vec![],
                funcalls: vec![
                    Funcall::set("stars", 4i64),
                    Funcall::set("address", "x".repeat(80)),
                ],
            },
        })
        .unwrap();
        assert!(put.len() >= 100);
        let mut stream = TcpStream::connect(server.addr()).await.unwrap();
        stream.write_all(&100u32.to_be_bytes()).await.unwrap();
        stream.write_all(&put[..10]).await.unwrap();
        stream.flush().await.unwrap();
        drop(stream);
        // A prefix alone, then a half close: the server still owes nothing and keeps serving.
        let mut stream = TcpStream::connect(server.addr()).await.unwrap();
        stream.write_all(&[0, 0]).await.unwrap();
        stream.shutdown().await.unwrap();
        let mut conn = Framed::new(stream, codec());
        expect_closed(&mut conn).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    })
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_disconnect_mid_request_leave_whole_objects_or_none() {
    let (server, client) = setup().await;
    let before = state(&client).await;
    let value = "v".repeat(4000);
    let mut tasks = Vec::new();
    for n in 0..40u64 {
        let addr = server.addr();
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = Framed::new(TcpStream::connect(addr).await.unwrap(), codec());
            let request = Request::Put {
                space: "hotels".into(),
                key: s(&format!("gone{n}")),
                mode: WriteMode::Upsert,
                conditions: vec![],
                funcalls: vec![
                    Funcall::set("city", "Gone"),
                    Funcall::set("stars", n as i64),
                    Funcall::set("address", value.as_str()),
                    Funcall::set("tags", string_set(["a", "b"])),
                ],
            };
            let bytes = encode_request(&RequestFrame {
                id: n + 1,
                epoch: Epoch(0),
                request,
            })
            .unwrap();
            if n % 2 == 0 {
                conn.send(bytes).await.unwrap();
            } else {
                // Part of the frame only.
                let stream = conn.get_mut();
                stream
                    .write_all(&(bytes.len() as u32).to_be_bytes())
                    .await
                    .unwrap();
                stream
                    .write_all(&bytes[..(n as usize * 97) % bytes.len()])
                    .await
                    .unwrap();
            }
            drop(conn); // without reading the answer
        }));
    }
    // And a search whose results nobody reads.
    let config = client.refresh().await.unwrap();
    let mut search = raw(&server).await;
    send(
        &mut search,
        7,
        Epoch(0),
        search_everything(&config, "hotels", SearchAnswer::Matches),
    )
    .await;
    drop(search);
    for t in tasks {
        t.await.unwrap();
    }
    assert_serving(server.addr()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut written = 0;
    for n in 0..40i64 {
        match client.get("hotels", format!("gone{n}")).await.unwrap() {
            None => {} // a put sent whole may or may not have been applied
            Some(r) => {
                assert_eq!(n % 2, 0, "gone{n} was never sent whole");
                assert_eq!(r.attributes["city"], s("Gone"));
                assert_eq!(r.attributes["stars"], i(n));
                assert_eq!(r.attributes["address"], s(&value));
                assert_eq!(r.attributes["tags"], string_set(["a", "b"]));
                written += 1;
            }
        }
    }
    // Nothing else changed.
    let after = state(&client).await;
    assert_eq!(after.spaces, before.spaces);
    assert_eq!(after.cube, before.cube);
    let hotels: Vec<_> = after
        .hotels
        .into_iter()
        .filter(|r| r.attributes["city"] != s("Gone"))
        .collect();
    assert_eq!(hotels, before.hotels);
    assert_eq!(
        client
            .count("hotels", vec![Predicate::equals("city", "Gone")])
            .await
            .unwrap(),
        written
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epoch_from_the_future_is_stale() {
    let (server, client) = setup().await;
    let config = client.refresh().await.unwrap();
    let current = config.epoch;
    unchanged(&server, &client, async {
        let mut conn = raw(&server).await;
        for (id, request) in [
            (
                10,
                Request::Del {
                    space: "hotels".into(),
                    key: s("h1"),
                    conditions: vec![],
                },
            ),
            (
                11,
                Request::Get {
                    space: "hotels".into(),
                    key: s("h1"),
                },
            ),
            (
                12,
                search_everything(&config, "hotels", SearchAnswer::Count),
            ),
            (
                13,
                Request::RmSpace {
                    name: "hotels".into(),
                },
            ),
        ] {
            send(&mut conn, id, Epoch(current.0 + 1), request.clone()).await;
            let frame = receive(&mut conn).await;
            expect_error(&frame, id, Status::StaleEpoch);
            assert_eq!(frame.epoch, current);
            send(&mut conn, id + 100, Epoch(u64::MAX), request).await;
            expect_error(&receive(&mut conn).await, id + 100, Status::StaleEpoch);
        }
        // The connection is fine for requests on the current epoch, or an older one.
        expect_working(&mut conn, 20).await;
        send(
            &mut conn,
            21,
            current,
            Request::Get {
                space: "hotels".into(),
                key: s("h1"),
            },
        )
        .await;
        assert!(matches!(
            receive(&mut conn).await.response,
            Response::Object(Some(_))
        ));
    })
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_error_does_not_disturb_its_other_requests() {
    // Bad requests pipelined among good ones on one connection each get their own answer.
    let (server, client) = setup().await;
    let results = futures::future::join_all((0..200i64).map(|n| {
        let client = client.clone();
        async move {
            match n % 4 {
                0 => {
                    client
                        .put("hotels", format!("ok{n}"), [("stars", i(n))])
                        .await
                }
                1 => {
                    client
                        .put("hotels", format!("bad{n}"), [("stars", s("x"))])
                        .await
                }
                2 => {
                    client
                        .put("nope", format!("bad{n}"), [("stars", i(n))])
                        .await
                }
                _ => client
                    .search(
                        "hotels",
                        vec![Predicate::new("city", PredicateOp::Regex("(".into()))],
                    )
                    .await
                    .map(|_| ()),
            }
        }
    }))
    .await;
    for (n, r) in results.into_iter().enumerate() {
        let expected = [
            None,
            Some(Status::WrongType),
            Some(Status::UnknownSpace),
            Some(Status::BadPredicate),
        ][n % 4];
        match r {
            Ok(()) => assert_eq!(expected, None, "request {n}"),
            Err(ClientError::Server { status, .. }) => {
                assert_eq!(Some(status), expected, "request {n}")
            }
            Err(e) => panic!("request {n}: {e}"),
        }
    }
    assert_eq!(
        client
            .count(
                "hotels",
                vec![Predicate::new("id", PredicateOp::Regex("^ok".into()))]
            )
            .await
            .unwrap(),
        50
    );
    assert_eq!(
        client
            .count(
                "hotels",
                vec![Predicate::new("id", PredicateOp::Regex("^bad".into()))]
            )
            .await
            .unwrap(),
        0
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_held_back_not_buffered() {
    // A client pipelining requests without reading a single answer must be stopped by the
    // connection's in-flight limit (the server stops reading its socket), not buffered without
    // bound, and must not slow anybody else down.
    let (server, client) = setup().await;
    // Answers of a kilobyte, so that they fill the socket buffers quickly.
    client
        .put("hotels", "big", [("address", "a".repeat(1024))])
        .await
        .unwrap();
    let big = client.get("hotels", "big").await.unwrap().unwrap().version;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.set_send_buffer_size(4096).unwrap();
    let mut stream = socket.connect(server.addr()).await.unwrap();
    let mut frames = BytesMut::new();
    let mut codec = codec();
    const REQUESTS: u64 = 200_000;
    for id in 1..=REQUESTS {
        let request = Request::Get {
            space: "hotels".into(),
            key: s("big"),
        };
        let bytes = encode_request(&RequestFrame {
            id,
            epoch: Epoch(0),
            request,
        })
        .unwrap();
        tokio_util::codec::Encoder::encode(&mut codec, bytes, &mut frames).unwrap();
    }
    let total = frames.len();
    let mut sent = 0usize;
    let writing = async {
        while sent < total {
            let n = tokio::io::AsyncWriteExt::write(
                &mut stream,
                &frames[sent..(sent + 64 * 1024).min(total)],
            )
            .await
            .unwrap();
            sent += n;
        }
    };
    let finished = tokio::time::timeout(Duration::from_secs(2), writing)
        .await
        .is_ok();
    // Bounded: about IN_FLIGHT_MAX requests in progress, as many answers queued, and what the
    // socket buffers hold (some 8000 requests here); never the 200 MB of answers to them all.
    assert!(
        !finished && sent < total / 8,
        "the server read {sent} of the {total} bytes of requests of a client that reads nothing: unbounded buffering"
    );
    // Everyone else is served meanwhile, and the stuck connection's requests changed nothing.
    assert_serving(server.addr()).await;
    assert_eq!(
        client.get("hotels", "big").await.unwrap().unwrap().version,
        big
    );
    drop(stream);
    assert_serving(server.addr()).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_searches_does_not_starve_others() {
    // Each search holds a blocking-pool thread while it waits for its client to read. A client
    // pipelining a thousand searches of many result frames, reading none, used to take every
    // such thread, and nobody else's search or count ran again.
    let (server, client) = setup().await;
    client.add_space(PROBE).await.unwrap();
    let puts = (0..1300i64).map(|n| client.put("probe", format!("k{n:05}"), [("n", n)]));
    for r in futures::future::join_all(puts).await {
        r.unwrap();
    }
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut conn = Framed::new(socket.connect(server.addr()).await.unwrap(), codec());
    let config = client.refresh().await.unwrap();
    for id in 1..=1000u64 {
        let sorted = SearchAnswer::Sorted {
            sort_by: "n".into(),
            limit: 2000, // six frames of results each
            order: SortOrder::Ascending,
        };
        let request = search_everything(&config, "probe", sorted);
        conn.feed(
            encode_request(&RequestFrame {
                id,
                epoch: Epoch(0),
                request,
            })
            .unwrap(),
        )
        .await
        .unwrap();
    }
    SinkExt::<Bytes>::flush(&mut conn).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let in_time = Duration::from_secs(10);
    let count = tokio::time::timeout(
        in_time,
        client.count("probe", vec![Predicate::equals("n", 5i64)]),
    )
    .await;
    assert_eq!(count.expect("another client's count runs").unwrap(), 1);
    let first = tokio::time::timeout(
        in_time,
        client.sorted_search("probe", vec![], "n", 2, SortOrder::Descending),
    )
    .await;
    assert_eq!(
        first.expect("another client's search runs").unwrap().len(),
        2
    );
    assert_serving(server.addr()).await;
    drop(conn);
    assert_serving(server.addr()).await;
    server.shutdown().await;
}

/// A document nested deeper than decoding allows (200 000 levels of lists, in a frame well
/// under the size limit) is refused as malformed before anything recurses that deep: the
/// server neither overflows its stack nor stores anything, and the connection goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_nested_past_the_decoders_depth_is_malformed_and_the_connection_goes_on() {
    let (server, client) = setup().await;
    client
        .add_space("space papers dynamic key id")
        .await
        .unwrap();
    unchanged(&server, &client, async {
        let mut conn = raw(&server).await;
        let mut doc = tessera_client::Document::default();
        doc.properties
            .insert("x".into(), tessera_client::DocValue::Null);
        let put = encode_request(&RequestFrame {
            id: 50,
            epoch: Epoch(0),
            request: Request::Put {
                space: "papers".into(),
                key: s("deep"),
                mode: WriteMode::Upsert,
                conditions: vec![],
                funcalls: vec![Funcall::merge(doc)],
            },
        })
        .unwrap();
        assert_eq!(put.last(), Some(&0), "the document's null ends the frame");
        let mut bytes = put[..put.len() - 1].to_vec();
        for _ in 0..200_000 {
            // DocValue::List (variant 5) of one element.
            bytes.extend_from_slice(&[5, 1]);
        }
        bytes.push(0);
        conn.send(body(&bytes)).await.unwrap();
        expect_error(&receive(&mut conn).await, 50, Status::Malformed);
        expect_working(&mut conn, 51).await;
    })
    .await;
    assert_eq!(client.count("papers", vec![]).await.unwrap(), 0);
    server.shutdown().await;
}

/// A multi_get with a key of the wrong type or too long is refused whole; one of more keys
/// than a request may carry (sent raw: the client splits them) is refused `TOOLARGE`, and the
/// connection goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_multi_gets_are_refused_whole() {
    let (server, client) = setup().await;
    unchanged(&server, &client, async {
        let c = &client;
        assert_eq!(
            status(c.multi_get("hotels", vec![s("h1"), i(3)]).await),
            Status::WrongType
        );
        assert_eq!(
            status(c.multi_get("cube", vec![i(1), s("one")]).await),
            Status::WrongType
        );
        let long = "k".repeat(tessera_types::constants::KEY_BYTES_MAX + 1);
        assert_eq!(
            status(c.multi_get("hotels", vec![s("h1"), s(&long)]).await),
            Status::TooLarge
        );
        let mut conn = raw(&server).await;
        let keys = (0..=tessera_protocol::constants::KEYS_PER_REQUEST_MAX)
            .map(|n| s(&format!("h{n}")))
            .collect();
        send(
            &mut conn,
            7,
            Epoch(0),
            Request::GetMany {
                space: "hotels".into(),
                keys,
            },
        )
        .await;
        expect_error(&receive(&mut conn).await, 7, Status::TooLarge);
        expect_working(&mut conn, 8).await;
    })
    .await;
    server.shutdown().await;
}

/// A `WriteKeys` with too many keys, a key of the wrong type, conditions or funcalls a `Put`
/// would refuse, is refused whole: nothing written, the connection goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_write_keys_are_refused_whole() {
    let (server, client) = setup().await;
    unchanged(&server, &client, async {
        let mut conn = raw(&server).await;
        let write_keys = |keys: Vec<Value>, conditions, change| Request::WriteKeys {
            space: "hotels".into(),
            keys,
            conditions,
            change,
        };
        let add = |attr: &str, v| {
            KeysChange::Update(vec![Funcall::new(
                attr,
                FuncallOp::Num(tessera_types::NumOp::Add),
                v,
            )])
        };
        let too_many = (0..=tessera_protocol::constants::KEYS_PER_REQUEST_MAX)
            .map(|n| s(&format!("h{n}")))
            .collect();
        let cases = [
            (
                write_keys(too_many, vec![], KeysChange::Delete),
                Status::TooLarge,
            ),
            (
                write_keys(vec![s("h1"), i(3)], vec![], KeysChange::Delete),
                Status::WrongType,
            ),
            (
                write_keys(
                    vec![s("h1")],
                    vec![Predicate::equals("nope", 1i64)],
                    KeysChange::Delete,
                ),
                Status::UnknownAttribute,
            ),
            (
                write_keys(vec![s("h1"), s("h2")], vec![], add("nope", i(1))),
                Status::UnknownAttribute,
            ),
            (
                // As a single put of it is refused: the operation cannot apply.
                write_keys(vec![s("h1"), s("h2")], vec![], add("city", i(1))),
                Status::CmpFail,
            ),
        ];
        for (n, (request, expected)) in cases.into_iter().enumerate() {
            let id = 20 + n as u64;
            send(&mut conn, id, Epoch(0), request).await;
            expect_error(&receive(&mut conn).await, id, expected);
        }
        expect_working(&mut conn, 40).await;
    })
    .await;
    server.shutdown().await;
}

/// A `WriteKeys` answers each key as a single write would: written, absent, or its condition
/// not holding, in the request's order; only the written keys change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_keys_answers_each_key_as_a_single_write() {
    let (server, client) = setup().await;
    let mut conn = raw(&server).await;
    // h1 and h3 are in Oslo, h2 in Ithaca, h99 does not exist.
    let request = Request::WriteKeys {
        space: "hotels".into(),
        keys: vec![s("h1"), s("h2"), s("h99"), s("h3")],
        conditions: vec![Predicate::equals("city", "Oslo")],
        change: KeysChange::Update(vec![Funcall::new(
            "stars",
            FuncallOp::Num(tessera_types::NumOp::Add),
            i(10),
        )]),
    };
    send(&mut conn, 1, Epoch(0), request).await;
    let frame = receive(&mut conn).await;
    let Response::Outcomes(outcomes) = &frame.response else {
        panic!("{:?}", frame.response)
    };
    let statuses: Vec<Option<Status>> = outcomes
        .iter()
        .map(|o| o.as_ref().err().map(|e| e.status))
        .collect();
    assert_eq!(
        statuses,
        vec![None, Some(Status::CmpFail), Some(Status::NotFound), None]
    );
    let stars = |key: &str| {
        let client = &client;
        let key = key.to_owned();
        async move { client.get("hotels", key).await.unwrap().unwrap().attributes["stars"].clone() }
    };
    // Hotel n has n % 5 stars.
    assert_eq!(
        (stars("h1").await, stars("h2").await, stars("h3").await),
        (i(11), i(2), i(13))
    );
    let request = Request::WriteKeys {
        space: "hotels".into(),
        keys: vec![s("h1"), s("h99")],
        conditions: vec![],
        change: KeysChange::Delete,
    };
    send(&mut conn, 2, Epoch(0), request).await;
    let frame = receive(&mut conn).await;
    let Response::Outcomes(outcomes) = &frame.response else {
        panic!("{:?}", frame.response)
    };
    assert!(outcomes[0].is_ok(), "{outcomes:?}");
    assert_eq!(outcomes[1].as_ref().unwrap_err().status, Status::NotFound);
    assert_eq!(client.get("hotels", "h1").await.unwrap(), None);
    server.shutdown().await;
}
