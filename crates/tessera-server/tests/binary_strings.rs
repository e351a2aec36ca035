//! Strings are byte strings, as in HyperDex: keys and values that are not UTF-8 are stored and
//! given back byte for byte, found by equality (the subspace hashes the bytes), by a bytes
//! regex and by length, and grown by string atomic operations. The expectations are the bytes
//! the test wrote.

mod common;

use common::{i, TestServer};
use tessera_client::{Funcall, FuncallOp, Predicate, PredicateOp, Value};

const SPACE: &str = "space blobs key id attributes string data, int n, map(string, string) tags subspace data create 8 partitions";

fn bytes(b: &[u8]) -> Value {
    Value::from(b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_that_are_not_text_go_in_and_come_back_unchanged() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.add_space(SPACE).await.unwrap();
    // Every byte value, and invalid UTF-8 sequences of several kinds.
    let values: Vec<Vec<u8>> = vec![
        (0..=255u8).collect(),
        vec![0xff, 0xfe],
        vec![0xc3],             // a truncated two-byte sequence
        vec![b'a', 0x80, b'b'], // a lone continuation byte
        vec![0xed, 0xa0, 0x80], // an encoded surrogate
        b"plain text".to_vec(),
    ];
    for (n, value) in values.iter().enumerate() {
        let key = [&[0xffu8, 0x00][..], &(n as u32).to_be_bytes()].concat();
        let map = Value::Map([(bytes(&[0x80]), bytes(value))].into_iter().collect());
        client
            .put(
                "blobs",
                bytes(&key),
                [
                    ("data", bytes(value)),
                    ("n", i(n as i64)),
                    ("tags", map.clone()),
                ],
            )
            .await
            .unwrap();
        let got = client.get("blobs", bytes(&key)).await.unwrap().unwrap();
        assert_eq!(got.key, bytes(&key));
        assert_eq!(got.attributes["data"], bytes(value), "value {n}");
        assert_eq!(got.attributes["tags"], map, "value {n}");
        // Equality on the subspace dimension finds exactly it; so does its length.
        let found = client
            .search("blobs", vec![Predicate::equals("data", bytes(value))])
            .await
            .unwrap();
        assert_eq!(found.len(), 1, "value {n}");
        assert_eq!(found[0].key, bytes(&key));
        let same_length = client
            .count(
                "blobs",
                vec![
                    Predicate::new("data", PredicateOp::LengthEquals(value.len() as u64)),
                    Predicate::equals("n", n as i64),
                ],
            )
            .await
            .unwrap();
        assert_eq!(same_length, 1, "value {n}");
    }
    // A bytes regex: the values holding a 0xff byte are the first two.
    let regex = client
        .search(
            "blobs",
            vec![Predicate::new(
                "data",
                PredicateOp::Regex(r"(?-u)\xff".into()),
            )],
        )
        .await
        .unwrap();
    let mut ns: Vec<Value> = regex.iter().map(|r| r.attributes["n"].clone()).collect();
    ns.sort();
    assert_eq!(ns, [i(0), i(1)]);
    // String atomic operations join bytes.
    let key = bytes(&[0xff, 0x00, 0, 0, 0, 1]);
    client
        .atomic(
            "blobs",
            key.clone(),
            vec![
                Funcall::new("data", FuncallOp::StringAppend, bytes(&[0x00, 0x81])),
                Funcall::new("data", FuncallOp::StringPrepend, bytes(&[0xc0])),
            ],
        )
        .await
        .unwrap();
    let got = client.get("blobs", key).await.unwrap().unwrap();
    assert_eq!(
        got.attributes["data"],
        bytes(&[0xc0, 0xff, 0xfe, 0x00, 0x81])
    );
    // A restart reads the same bytes from disk.
    let mut server = server;
    server.restart().await;
    let client = server.client().await;
    let all = client.search("blobs", vec![]).await.unwrap();
    assert_eq!(all.len(), values.len());
    let first = client
        .get("blobs", bytes(&[0xff, 0x00, 0, 0, 0, 0]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.attributes["data"], bytes(&values[0]));
    server.shutdown().await;
}
