//! Cluster servers in one process, with a real coordinator, and raw connections to them.

use std::net::SocketAddr;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tessera_client::Client;
use tessera_coordinator::{Coordinator, CoordinatorOptions};
use tessera_protocol::{
    codec, decode_response, encode_request, Configuration, Request, RequestFrame, Response,
    ResponseFrame, SpaceMap,
};
use tessera_server::{ClusterOptions, Server, ServerOptions};
use tessera_types::{Epoch, ServerId, Value};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub coordinator: Coordinator,
    pub servers: Vec<Server>,
}

pub async fn server(dir: &std::path::Path, n: usize, coordinator: SocketAddr) -> Server {
    server_with(dir, n, coordinator, |_| {}).await
}

/// A cluster server whose options `adjust` changes.
pub async fn server_with(
    dir: &std::path::Path,
    n: usize,
    coordinator: SocketAddr,
    adjust: impl Fn(&mut ServerOptions),
) -> Server {
    let mut options = ServerOptions::new(dir.join(format!("s{n}")), "127.0.0.1:0".parse().unwrap());
    options.cluster = Some(ClusterOptions {
        coordinators: vec![coordinator.to_string()],
        advertise: None,
    });
    adjust(&mut options);
    Server::start(options)
        .await
        .expect("a cluster server starts")
}

impl Cluster {
    pub async fn start(servers: usize) -> Cluster {
        Cluster::start_planning(servers, tessera_coordinator::state::PLAN_TRANSFERS).await
    }

    /// A cluster whose coordinator plans state transfers or not, whatever the default.
    pub async fn start_planning(servers: usize, plan_transfers: bool) -> Cluster {
        Cluster::start_with(servers, plan_transfers, |_| {}).await
    }

    /// A cluster whose servers' options `adjust` changes.
    pub async fn start_with(
        servers: usize,
        plan_transfers: bool,
        adjust: impl Fn(&mut ServerOptions),
    ) -> Cluster {
        Cluster::start_guarded(servers, plan_transfers, Default::default(), adjust).await
    }

    /// A cluster whose coordinator and servers all guard with `gate` (tokens, cluster secret)
    /// and serve `tls`, if given.
    pub async fn start_guarded(
        servers: usize,
        plan_transfers: bool,
        (gate, tls): (
            std::sync::Arc<tessera_protocol::Gate>,
            Option<tessera_protocol::tls::MemberTls>,
        ),
        adjust: impl Fn(&mut ServerOptions),
    ) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut options = CoordinatorOptions::new(
            1,
            dir.path().join("c1"),
            address,
            vec![(1, address.to_string())],
        );
        options.plan_transfers = plan_transfers;
        options.gate = gate.clone();
        options.tls = tls.clone();
        let coordinator = Coordinator::start_with_listener(options, listener)
            .await
            .unwrap();
        let mut started = Vec::new();
        for n in 0..servers {
            let guarded = |o: &mut ServerOptions| {
                o.gate = gate.clone();
                o.tls = tls.clone();
                adjust(o);
            };
            started.push(server_with(dir.path(), n, address, guarded).await);
        }
        Cluster {
            dir,
            coordinator,
            servers: started,
        }
    }

    pub async fn client(&self) -> Client {
        Client::connect(&self.coordinator.local_addr().to_string())
            .await
            .expect("a cluster client")
    }

    pub fn server_of(&self, id: ServerId) -> &Server {
        self.servers
            .iter()
            .find(|s| s.id() == id)
            .expect("a server of the configuration")
    }

    /// Waits until every server has installed the configuration `config`.
    pub async fn settle(&self, config: &Configuration) {
        for _ in 0..200 {
            if self.servers.iter().all(|s| s.epoch() >= config.epoch) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("servers did not reach epoch {}", config.epoch);
    }

    /// Adds a space through the coordinator and waits until every server has it.
    pub async fn add_space(&self, client: &Client, description: &str) -> Configuration {
        client.add_space(description).await.unwrap();
        let config = (*client.configuration()).clone();
        self.settle(&config).await;
        config
    }
}

/// The point leader of `key` in `space` of `config`.
pub fn point_leader(config: &Configuration, space: &str, key: &Value) -> ServerId {
    let space = config.space(space).expect("the space exists");
    SpaceMap::new(space.clone())
        .point_leader(key)
        .expect("a checked configuration has a replica for every region")
}

pub type Raw = Framed<TcpStream, tokio_util::codec::LengthDelimitedCodec>;

/// One request on a fresh connection, and its answer.
pub async fn ask(addr: SocketAddr, epoch: Epoch, request: Request) -> Response {
    let mut conn: Raw = Framed::new(TcpStream::connect(addr).await.unwrap(), codec());
    conn.send(
        encode_request(&RequestFrame {
            id: 7,
            epoch,
            request,
        })
        .unwrap(),
    )
    .await
    .unwrap();
    let body = tokio::time::timeout(Duration::from_secs(10), conn.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let frame: ResponseFrame = decode_response(&body).unwrap();
    assert_eq!(frame.id, 7);
    frame.response
}

/// A connection that has said `PeerHello` as server `from` and been accepted.
pub async fn peer_connection(addr: SocketAddr, from: ServerId) -> Raw {
    let mut conn: Raw = Framed::new(TcpStream::connect(addr).await.unwrap(), codec());
    let hello = RequestFrame {
        id: 1,
        epoch: Epoch(0),
        request: Request::PeerHello { from },
    };
    conn.send(encode_request(&hello).unwrap()).await.unwrap();
    let body = conn.next().await.unwrap().unwrap();
    assert_eq!(decode_response(&body).unwrap().response, Response::Done);
    conn
}

/// Space `kv` (key `k`, int `n` with a subspace of its own, two replicas of every region) with
/// `count` objects `k0`, `k1`, ... whose `n` is their number.
#[allow(dead_code)]
pub async fn replicated_kv(client: &Client, count: i64) {
    client
        .add_space("space kv key k attributes int n subspace n tolerate 1 failures")
        .await
        .unwrap();
    for n in 0..count {
        client
            .put("kv", format!("k{n}").as_str(), [("n", Value::Int(n))])
            .await
            .unwrap();
    }
    assert_eq!(client.count("kv", vec![]).await.unwrap(), count as u64);
}
