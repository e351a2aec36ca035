//! A small raw-protocol client and an in-process coordinator cluster on loopback ports.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tessera_coordinator::{Coordinator, CoordinatorOptions, LeaseTuning, RaftTuning};
use tessera_protocol::{
    codec, decode_response, encode_request, Configuration, CoordinatorStatus, Request,
    RequestFrame, Response, ResponseFrame, Status,
};
use tessera_types::{Epoch, ServerId};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

pub struct Client {
    framed: Framed<TcpStream, LengthDelimitedCodec>,
    next_id: u64,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).unwrap();
        Client {
            framed: Framed::new(stream, codec()),
            next_id: 1,
        }
    }

    pub async fn send(&mut self, request: Request) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let bytes = encode_request(&RequestFrame {
            id,
            epoch: Epoch(0),
            request,
        })
        .unwrap();
        self.framed.send(bytes).await.expect("send");
        id
    }

    pub async fn recv(&mut self) -> ResponseFrame {
        let frame = tokio::time::timeout(Duration::from_secs(20), self.framed.next())
            .await
            .expect("a response within 20 s")
            .expect("connection open")
            .expect("a frame");
        decode_response(&frame).expect("decodable response")
    }

    pub async fn call(&mut self, request: Request) -> ResponseFrame {
        let id = self.send(request).await;
        let r = self.recv().await;
        assert_eq!(r.id, id);
        r
    }
}

/// One request on a fresh connection.
pub async fn call(addr: SocketAddr, request: Request) -> ResponseFrame {
    Client::connect(addr).await.call(request).await
}

/// A write, retried while the answer is `Unavailable` (an election going on), for up to 20 s.
pub async fn write(addr: SocketAddr, request: Request) -> ResponseFrame {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = call(addr, request.clone()).await;
        match &r.response {
            Response::Error(e) if e.status == Status::Unavailable && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => return r,
        }
    }
}

pub async fn register(addr: SocketAddr, token: u128, address: &str) -> (ServerId, Epoch) {
    register_incarnation(addr, token, address, 1).await
}

pub async fn register_incarnation(
    addr: SocketAddr,
    token: u128,
    address: &str,
    incarnation: u64,
) -> (ServerId, Epoch) {
    let r = write(
        addr,
        Request::RegisterServer {
            token,
            address: address.into(),
            incarnation,
        },
    )
    .await;
    match r.response {
        Response::Registered(id) => (id, r.epoch),
        other => panic!("register: {other:?}"),
    }
}

pub async fn get_config(addr: SocketAddr) -> Configuration {
    match call(addr, Request::GetConfig).await.response {
        Response::Config(c) => *c,
        other => panic!("get config: {other:?}"),
    }
}

/// The configuration once its epoch reaches `epoch`, following it with `WaitConfig`.
pub async fn config_at_least(addr: SocketAddr, epoch: Epoch) -> Configuration {
    let mut client = Client::connect(addr).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = client
            .call(Request::WaitConfig {
                after: Epoch(epoch.0.saturating_sub(1)),
                timeout_ms: 2000,
            })
            .await;
        let Response::Config(c) = r.response else {
            panic!("wait config: {:?}", r.response)
        };
        assert_eq!(r.epoch, c.epoch, "the frame carries the applied epoch");
        if c.epoch >= epoch {
            return *c;
        }
        assert!(
            Instant::now() < deadline,
            "{addr} stuck at epoch {:?}, waiting for {epoch:?}",
            c.epoch
        );
    }
}

pub async fn status(addr: SocketAddr) -> CoordinatorStatus {
    match call(addr, Request::CoordinatorStatus).await.response {
        Response::CoordinatorStatus(s) => s,
        other => panic!("status: {other:?}"),
    }
}

pub fn error_of(r: &ResponseFrame) -> (Status, String) {
    match &r.response {
        Response::Error(e) => (e.status, e.message.clone()),
        other => panic!("expected an error, got {other:?}"),
    }
}

pub fn fast_tuning() -> RaftTuning {
    RaftTuning {
        heartbeat_ms: 100,
        election_timeout_ms: (500, 1000),
        ..RaftTuning::default()
    }
}

pub struct Cluster {
    pub dirs: Vec<tempfile::TempDir>,
    pub addrs: Vec<SocketAddr>,
    pub nodes: Vec<Option<Coordinator>>,
    pub tuning: RaftTuning,
    pub lease: LeaseTuning,
    /// `CoordinatorOptions::plan_transfers` of every node.
    pub plan_transfers: bool,
}

impl Cluster {
    pub async fn start(n: usize, tuning: RaftTuning) -> Cluster {
        Cluster::start_with_lease(n, tuning, LeaseTuning::default()).await
    }

    pub async fn start_with_lease(n: usize, tuning: RaftTuning, lease: LeaseTuning) -> Cluster {
        Cluster::start_planning(n, tuning, lease, tessera_coordinator::state::PLAN_TRANSFERS).await
    }

    /// A cluster whose coordinators plan state transfers or not, whatever the default: for
    /// the tests of the planner.
    pub async fn start_planning(
        n: usize,
        tuning: RaftTuning,
        lease: LeaseTuning,
        plan_transfers: bool,
    ) -> Cluster {
        init_tracing();
        let mut listeners = Vec::new();
        for _ in 0..n {
            listeners.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        let dirs: Vec<_> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
        let mut cluster = Cluster {
            dirs,
            addrs,
            nodes: Vec::new(),
            tuning,
            lease,
            plan_transfers,
        };
        for (i, listener) in listeners.into_iter().enumerate() {
            let c = Coordinator::start_with_listener(cluster.options(i), listener)
                .await
                .expect("start");
            assert_eq!(c.local_addr(), cluster.addrs[i]);
            cluster.nodes.push(Some(c));
        }
        cluster
    }

    pub fn options(&self, i: usize) -> CoordinatorOptions {
        let peers = self
            .addrs
            .iter()
            .enumerate()
            .map(|(j, a)| (j as u64 + 1, a.to_string()))
            .collect();
        let mut o =
            CoordinatorOptions::new(i as u64 + 1, self.dirs[i].path(), self.addrs[i], peers);
        o.raft = self.tuning.clone();
        o.lease = self.lease.clone();
        o.plan_transfers = self.plan_transfers;
        o
    }

    pub fn node_index(&self, id: u64) -> usize {
        id as usize - 1
    }

    pub async fn stop(&mut self, i: usize) {
        if let Some(c) = self.nodes[i].take() {
            c.shutdown().await;
        }
    }

    pub async fn stop_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.stop(i).await;
        }
    }

    /// Starts node `i` again on its old port and data directory.
    pub async fn restart(&mut self, i: usize) {
        assert!(self.nodes[i].is_none());
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match TcpListener::bind(self.addrs[i]).await {
                Ok(l) => break l,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("rebinding {}: {e}", self.addrs[i]);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("cannot rebind {}: {e}", self.addrs[i]),
            }
        };
        self.nodes[i] = Some(
            Coordinator::start_with_listener(self.options(i), listener)
                .await
                .expect("restart"),
        );
    }

    pub fn running(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_some())
            .collect()
    }

    /// Waits until every running node names the same running leader; returns its id.
    pub async fn leader(&self) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut seen = Vec::new();
            for i in self.running() {
                seen.push(status(self.addrs[i]).await.leader);
            }
            if let Some(Some(l)) = seen.first() {
                let l = *l;
                if seen.iter().all(|s| *s == Some(l)) && self.nodes[self.node_index(l)].is_some() {
                    return l;
                }
            }
            assert!(Instant::now() < deadline, "no agreed leader: {seen:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A one-member coordinator group on a fresh port, its options adjusted by `adjust`, once it
/// leads itself.
pub async fn one_coordinator(
    adjust: impl FnOnce(&mut CoordinatorOptions),
) -> (Coordinator, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let mut options = CoordinatorOptions::new(
        1,
        dir.path().join("c1"),
        address,
        vec![(1, address.to_string())],
    );
    adjust(&mut options);
    let c = Coordinator::start_with_listener(options, listener)
        .await
        .unwrap();
    for _ in 0..100 {
        if c.leader() == Some(1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(c.leader(), Some(1), "a one-member group elects itself");
    (c, dir)
}
