//! Shared setup for the server's integration tests: an in-process server on a free port with
//! its own temporary data directory, clients, and small helpers.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use tempfile::TempDir;
use tessera_client::{Client, ClientError, Record, Status, Value};
use tessera_protocol::{Configuration, RegionsOf, Request, SearchAnswer};
use tessera_server::{Server, ServerOptions};
use tessera_types::SubspaceId;

/// The hotels space of docs/design.md §3, with a few more attribute types so every atomic family
/// has an attribute to work on.
pub const HOTELS: &str = "
space hotels
key id
attributes string city, int stars, int price, string address, float rating,
           list(string) notes, set(string) tags, set(int) floors,
           map(string, int) rooms, map(string, string) labels
subspace city, price
subspace stars
create 64 partitions
";

/// Where [`assert_serving`] writes: a space of its own, so probing never changes the data a
/// test compares before and after a bad request.
pub const PROBE: &str = "space probe key id attributes int n subspace n";

/// A running server and the directory it owns (removed when dropped).
pub struct TestServer {
    pub server: Option<Server>,
    pub dir: TempDir,
}

impl TestServer {
    pub async fn start() -> TestServer {
        TestServer::start_with(|_| {}).await
    }

    /// A server whose options `adjust` changes.
    pub async fn start_with(adjust: impl Fn(&mut ServerOptions)) -> TestServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut options = ServerOptions::new(dir.path(), "127.0.0.1:0".parse().unwrap());
        adjust(&mut options);
        let server = Server::start(options).await.expect("starting the server");
        TestServer {
            server: Some(server),
            dir,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.as_ref().expect("running").local_addr()
    }

    pub fn addr_string(&self) -> String {
        self.addr().to_string()
    }

    pub async fn client(&self) -> Client {
        Client::connect(&self.addr_string())
            .await
            .expect("connecting to the test server")
    }

    /// Shuts the server down and starts a new one on the same data directory.
    pub async fn restart(&mut self) {
        self.server.take().expect("running").shutdown().await;
        self.server = Some(start_in(&self.dir).await);
    }

    pub async fn shutdown(mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().await;
        }
    }
}

pub async fn start_in(dir: &TempDir) -> Server {
    Server::start(ServerOptions::new(
        dir.path(),
        "127.0.0.1:0".parse().unwrap(),
    ))
    .await
    .expect("starting the server")
}

/// The server's status of a failed request (panics on a success or a non-server error).
pub fn status<T: std::fmt::Debug>(result: Result<T, ClientError>) -> Status {
    match result {
        Err(ClientError::Server { status, .. }) => status,
        other => panic!("expected a server error, got {other:?}"),
    }
}

/// The status and the message of a failed request.
pub fn error<T: std::fmt::Debug>(result: Result<T, ClientError>) -> (Status, String) {
    match result {
        Err(ClientError::Server { status, message }) => (status, message),
        other => panic!("expected a server error, got {other:?}"),
    }
}

/// Checks, with a fresh and independent client, that the server still serves writes and reads.
pub async fn assert_serving(addr: SocketAddr) {
    static PROBES: AtomicU64 = AtomicU64::new(0);
    let client = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        Client::connect(&addr.to_string()),
    )
    .await
    .expect("connecting in time")
    .expect("the server accepts connections");
    match client.add_space(PROBE).await {
        Ok(()) => {}
        Err(e) if e.status() == Some(Status::SpaceExists) => {}
        Err(e) => panic!("creating the probe space: {e}"),
    }
    let n = PROBES.fetch_add(1, Ordering::Relaxed) as i64;
    let key = format!("probe-{n}");
    client
        .put("probe", key.as_str(), [("n", n)])
        .await
        .expect("the server still takes writes");
    let got = client
        .get("probe", key.as_str())
        .await
        .expect("the server still answers reads");
    assert_eq!(got.expect("just written").attributes["n"], Value::Int(n));
}

/// Every object of a space, ordered by key: compared before and after a request that must
/// change nothing.
pub async fn snapshot(client: &Client, space: &str) -> Vec<Record> {
    let mut all = client
        .search(space, vec![])
        .await
        .expect("search everything");
    all.sort_by(|a, b| a.key.cmp(&b.key));
    all
}

/// The parts a client sends a standalone server (which holds every region) for a search of
/// every object of `space` planned on the key subspace: each region of it, as many as
/// `config` has replica sets for.
pub fn every_key_region(config: &Configuration, space: &str) -> Vec<RegionsOf> {
    let space = config.space(space).expect("a space of the configuration");
    let regions = space.replicas[SubspaceId::KEY.get()].len() as u32;
    vec![RegionsOf {
        subspace: SubspaceId::KEY,
        regions: (0..regions).collect(),
    }]
}

/// The request a client sends a standalone server for every object of `space`, answered as
/// `answer` says (a typed space: no stubs to follow).
pub fn search_everything(config: &Configuration, space: &str, answer: SearchAnswer) -> Request {
    Request::SearchRegions {
        space: space.into(),
        predicates: vec![],
        parts: every_key_region(config, space),
        answer,
        follow_stubs: false,
    }
}

pub fn s(x: &str) -> Value {
    Value::from(x)
}

pub fn i(x: i64) -> Value {
    Value::Int(x)
}

pub fn string_set<'a>(items: impl IntoIterator<Item = &'a str>) -> Value {
    Value::Set(items.into_iter().map(Value::from).collect::<BTreeSet<_>>())
}

pub fn int_set(items: impl IntoIterator<Item = i64>) -> Value {
    Value::Set(items.into_iter().map(Value::Int).collect::<BTreeSet<_>>())
}

pub fn map<K: Into<Value>, V: Into<Value>>(entries: impl IntoIterator<Item = (K, V)>) -> Value {
    Value::Map(
        entries
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect::<BTreeMap<_, _>>(),
    )
}

pub fn list(items: impl IntoIterator<Item = Value>) -> Value {
    Value::List(items.into_iter().collect())
}

pub mod cluster;
