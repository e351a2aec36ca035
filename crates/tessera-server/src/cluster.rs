//! Cluster mode: the I/O shell around the replication state machine.
//!
//! A cluster server registers with the coordinators under a token kept in its data directory
//! (so a restart comes back as the same server), follows the configuration by long-polling
//! them, and runs [`tessera_replication::Replica`] on one thread, the chain loop:
//! - it takes every input that has queued (client writes, envelopes from peers, a new
//!   configuration, clock ticks), steps the state machine with each,
//! - makes the writes it produced durable as one group commit,
//! - then sends its envelopes to the peers, then answers the clients (the state machine's
//!   output order: an acknowledgement never leaves before what it acknowledges is on disk).
//!
//! A new configuration is installed by the chain loop between two batches: it commits what is
//! pending, creates the storage of new spaces, hands the configuration to the state machine,
//! then swaps the connections' view, and only then drops the storage of removed spaces. So
//! the server switches epochs all at once, and no request sees a space its chain cannot serve.
//!
//! Envelopes to a peer go through one outgoing connection per peer (a task that reconnects
//! when it breaks; the state machine retransmits what was not acknowledged on its ticks).
//! Envelopes from a peer arrive on a connection that began with `PeerHello`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tessera_protocol::frame::{decode, encode};
use tessera_protocol::{
    codec, decode_response, encode_request, Configuration, ErrorReply, Request, RequestFrame, Response, Status,
};
use tessera_replication::{ClientId, CommittedReader, Envelope, Input, KeyWrite, Replica, StoreWrite};
use tessera_storage::{ObjectWrite, StoredObject, Store};
use tessera_types::{Epoch, Object, ServerId, SubspaceId, Value, Version};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::codec::{Framed, FramedRead};

use crate::connection::Replier;
use crate::state::{ServerError, Shared};
use crate::writer::storage_error;

/// Inputs queued for the chain loop before senders wait.
const QUEUE_MAX: usize = 8192;
/// Most inputs stepped before one group commit.
const BATCH_MAX: usize = 1024;
/// How often the state machine's clock ticks (retransmission is 5 ticks).
const TICK: Duration = Duration::from_millis(50);
/// How long one configuration long-poll waits at a coordinator.
const WAIT_CONFIG_MS: u32 = 20_000;
const TOKEN_FILE: &str = "server-token";

/// How a server joins a cluster.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Coordinator addresses (`host:port`); any one that answers will do.
    pub coordinators: Vec<String>,
    /// The address other servers and clients reach this server at; defaults to the bound
    /// listen address (which must then not be 0.0.0.0).
    pub advertise: Option<String>,
}

pub enum LoopInput {
    Write { space: String, write: KeyWrite, reply: Replier },
    Peer(Envelope),
    Config(Arc<Configuration>),
    Tick,
    Stop,
}

/// The connections' handle on the chain loop.
#[derive(Clone)]
pub struct ChainSender(mpsc::Sender<LoopInput>);

impl ChainSender {
    /// Queues an input; waits while the queue is full. Gives it back if the loop has stopped.
    pub async fn send(&self, input: LoopInput) -> Result<(), LoopInput> {
        self.0.send(input).await.map_err(|e| e.0)
    }

    pub fn close(&self) {
        let _ = self.0.try_send(LoopInput::Stop);
    }
}

pub fn channel() -> (ChainSender, mpsc::Receiver<LoopInput>) {
    let (tx, rx) = mpsc::channel(QUEUE_MAX);
    (ChainSender(tx), rx)
}

/// This server's identity: a random token made on its first start and kept in its data
/// directory.
pub fn load_or_make_token(dir: &Path) -> Result<u128, ServerError> {
    let path = dir.join(TOKEN_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse().map_err(|_| ServerError::CorruptConfig {
            path,
            reason: "the server token is not a number".into(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let token: u128 = rand::random::<u128>().max(1);
            let tmp = dir.join(format!("{TOKEN_FILE}.tmp"));
            std::fs::write(&tmp, token.to_string())?;
            std::fs::File::open(&tmp)?.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            std::fs::File::open(dir)?.sync_all()?;
            Ok(token)
        }
        Err(e) => Err(e.into()),
    }
}

/// One request to the first coordinator that answers it (trying each in turn).
pub async fn ask_coordinators(coordinators: &[String], request: Request) -> Result<Response, String> {
    let mut last = String::from("no coordinator address given");
    for address in coordinators {
        match ask(address, request.clone()).await {
            Ok(Response::Error(e)) if e.status.is_retryable() => last = format!("{address}: {e}"),
            Ok(response) => return Ok(response),
            Err(e) => last = format!("{address}: {e}"),
        }
    }
    Err(last)
}

async fn ask(address: &str, request: Request) -> Result<Response, std::io::Error> {
    let stream = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(address))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
    let _ = stream.set_nodelay(true);
    let mut framed = Framed::new(stream, codec());
    let frame = RequestFrame { id: 1, epoch: Epoch(0), request };
    let body = encode_request(&frame).map_err(std::io::Error::other)?;
    framed.send(body).await?;
    let reply = tokio::time::timeout(Duration::from_millis(WAIT_CONFIG_MS as u64 + 5_000), framed.next())
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer"))?
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed"))??;
    decode_response(&reply).map(|f| f.response).map_err(std::io::Error::other)
}

/// Registers (or re-registers) this server; retries for about a minute while no coordinator
/// answers, so servers and coordinators can start in any order.
pub async fn register(coordinators: &[String], token: u128, address: String, incarnation: u64) -> Result<ServerId, ServerError> {
    let mut last = String::new();
    for _ in 0..300 {
        match ask_coordinators(coordinators, Request::RegisterServer { token, address: address.clone(), incarnation }).await {
            Ok(Response::Registered(id)) => return Ok(id),
            Ok(other) => last = format!("unexpected answer {other:?}"),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(ServerError::Cluster(format!("could not register with the coordinators: {last}")))
}

/// The first configuration that lists this server.
pub async fn first_configuration(coordinators: &[String], me: ServerId) -> Result<Configuration, ServerError> {
    for _ in 0..300 {
        if let Ok(Response::Config(c)) = ask_coordinators(coordinators, Request::GetConfig).await {
            if c.server(me).is_some() {
                return Ok(*c);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(ServerError::Cluster("no coordinator gave a configuration listing this server".into()))
}

/// Follows the coordinators' configuration and hands every newer one to the chain loop.
pub async fn follow_configuration(coordinators: Vec<String>, shared: Arc<Shared>, chain: ChainSender) {
    let mut known = shared.view().epoch();
    while !shared.is_shutting_down() {
        let request = Request::WaitConfig { after: known, timeout_ms: WAIT_CONFIG_MS };
        match ask_coordinators(&coordinators, request).await {
            Ok(Response::Config(c)) if c.epoch > known => {
                known = c.epoch;
                if chain.send(LoopInput::Config(Arc::new(*c))).await.is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "no coordinator answered; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

pub async fn tick(shared: Arc<Shared>, chain: ChainSender) {
    let mut interval = tokio::time::interval(TICK);
    while !shared.is_shutting_down() {
        interval.tick().await;
        if chain.0.try_send(LoopInput::Tick).is_err() && chain.0.is_closed() {
            return;
        }
    }
}

/// Reads the envelopes a peer sends after its `PeerHello`.
pub async fn serve_peer(
    mut frames: FramedRead<tokio::net::tcp::OwnedReadHalf, tokio_util::codec::LengthDelimitedCodec>,
    chain: ChainSender,
) {
    while let Some(Ok(body)) = frames.next().await {
        match decode::<Envelope>(&body) {
            Ok(envelope) => {
                if chain.send(LoopInput::Peer(envelope)).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "undecodable envelope from a peer; closing its connection");
                return;
            }
        }
    }
}

/// Outgoing connections to peers, one task each.
struct Peers {
    me: ServerId,
    shared: Arc<Shared>,
    runtime: tokio::runtime::Handle,
    links: Mutex<HashMap<ServerId, mpsc::UnboundedSender<Bytes>>>,
}

impl Peers {
    fn send(&self, to: ServerId, envelope: &Envelope) {
        let Ok(frame) = encode(envelope) else {
            tracing::error!("an envelope did not encode");
            return;
        };
        let mut links = self.links.lock().expect("peer map");
        let tx = links.entry(to).or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            self.runtime.spawn(peer_link(self.me, to, self.shared.clone(), rx));
            tx
        });
        let _ = tx.send(frame);
    }
}

/// Keeps a connection to `to` and writes what is queued for it. Frames queued while it is
/// down are dropped: the state machine sends again what was not acknowledged.
async fn peer_link(me: ServerId, to: ServerId, shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<Bytes>) {
    while !shared.is_shutting_down() {
        let address = shared.view().config.server(to).map(|s| s.address.clone());
        let Some(address) = address else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            while rx.try_recv().is_ok() {}
            continue;
        };
        let connected = async {
            let stream = TcpStream::connect(&address).await?;
            let _ = stream.set_nodelay(true);
            let mut framed = Framed::new(stream, codec());
            let hello = RequestFrame { id: 0, epoch: Epoch(0), request: Request::PeerHello { from: me } };
            framed.send(encode_request(&hello).map_err(std::io::Error::other)?).await?;
            match framed.next().await {
                Some(Ok(body)) => match decode_response(&body).map(|f| f.response) {
                    Ok(Response::Done) => Ok(framed),
                    other => Err(std::io::Error::other(format!("peer refused: {other:?}"))),
                },
                _ => Err(std::io::Error::other("peer closed during hello")),
            }
        }
        .await;
        let mut framed = match connected {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!(peer = %to, error = %e, "connecting to a peer");
                tokio::time::sleep(Duration::from_millis(100)).await;
                while rx.try_recv().is_ok() {}
                continue;
            }
        };
        loop {
            let Some(frame) = rx.recv().await else { return };
            if framed.feed(frame).await.is_err() {
                break;
            }
            while let Ok(frame) = rx.try_recv() {
                if framed.feed(frame).await.is_err() {
                    break;
                }
            }
            if SinkExt::<Bytes>::flush(&mut framed).await.is_err() {
                break;
            }
        }
    }
}

struct StoreReader<'a>(&'a Store);

impl CommittedReader for StoreReader<'_> {
    fn get(&self, space: &str, key: &Value) -> Result<Option<StoredObject>, ErrorReply> {
        self.0.get(space, key).map_err(storage_error)
    }

    fn entry_version(&self, space: &str, subspace: SubspaceId, object: &Object) -> Result<Option<Version>, ErrorReply> {
        self.0.entry_version(space, subspace, object).map_err(storage_error)
    }

    fn region_entry_version(
        &self,
        space: &str,
        subspace: SubspaceId,
        region: tessera_geometry::RegionIndex,
        key: &Value,
    ) -> Result<Option<Version>, ErrorReply> {
        self.0.region_entry_version(space, subspace, region, key).map_err(storage_error)
    }
}

pub fn spawn(
    shared: Arc<Shared>,
    me: ServerId,
    incarnation: u64,
    rx: mpsc::Receiver<LoopInput>,
    runtime: tokio::runtime::Handle,
) -> std::thread::JoinHandle<()> {
    let replica = Replica::new(me, incarnation, shared.view().config.clone(), None);
    let peers = Peers { me, shared: shared.clone(), runtime, links: Mutex::new(HashMap::new()) };
    std::thread::Builder::new()
        .name("tessera-chain".into())
        .spawn(move || ChainLoop { shared, replica, peers, clients: HashMap::new(), next_client: 0 }.run(rx))
        .expect("spawning the chain loop")
}

struct ChainLoop {
    shared: Arc<Shared>,
    replica: Replica,
    peers: Peers,
    clients: HashMap<u64, Replier>,
    next_client: u64,
}

impl ChainLoop {
    fn run(mut self, mut rx: mpsc::Receiver<LoopInput>) {
        let mut batch = Vec::with_capacity(BATCH_MAX);
        loop {
            let Some(first) = rx.blocking_recv() else { return };
            batch.push(first);
            while batch.len() < BATCH_MAX {
                match rx.try_recv() {
                    Ok(input) => batch.push(input),
                    Err(_) => break,
                }
            }
            let mut stop = false;
            let store = self.shared.store.clone();
            for input in batch.drain(..) {
                let input = match input {
                    LoopInput::Write { space, write, reply } => {
                        let id = self.next_client;
                        self.next_client += 1;
                        self.clients.insert(id, reply);
                        Input::Write { client: ClientId(id), space, write }
                    }
                    LoopInput::Peer(envelope) => Input::Peer(envelope),
                    LoopInput::Tick => Input::Tick,
                    LoopInput::Config(config) => {
                        self.install(config);
                        continue;
                    }
                    LoopInput::Stop => {
                        stop = true;
                        continue;
                    }
                };
                self.replica.step(input, &StoreReader(&store));
            }
            self.flush();
            if stop || self.shared.is_shutting_down() {
                return;
            }
        }
    }

    /// Switches to `config` between two group commits (see the module documentation).
    fn install(&mut self, config: Arc<Configuration>) {
        if config.epoch <= self.replica.epoch() {
            return;
        }
        self.flush();
        let old = self.shared.view().config.clone();
        let store = self.shared.store.clone();
        for space in &config.spaces {
            let before = old.space(&space.schema.name);
            if before.is_some_and(|b| b.id != space.id) {
                // Dropped and created again under the same name: the old data must go.
                if let Err(e) = store.drop_space(&space.schema.name) {
                    tracing::error!(error = %e, "dropping a replaced space");
                }
            }
            if before.is_none_or(|b| b.id != space.id) {
                if let Err(e) = store.create_space(&space.schema) {
                    tracing::error!(error = %e, space = %space.schema.name, "creating a space's storage");
                }
            }
        }
        self.replica.step(Input::Configuration(config.clone()), &StoreReader(&store));
        self.flush();
        if let Err(e) = self.shared.install((*config).clone()) {
            tracing::error!(error = %e, "persisting the configuration");
        }
        for space in &old.spaces {
            if config.space(&space.schema.name).is_none() {
                if let Err(e) = store.drop_space(&space.schema.name) {
                    tracing::error!(error = %e, "dropping a removed space");
                }
            }
        }
        tracing::info!(epoch = %config.epoch, "configuration installed");
    }

    /// Commits the writes of the batch, then sends its envelopes, then answers its clients.
    fn flush(&mut self) {
        let out = self.replica.take_outputs();
        if out.is_empty() {
            return;
        }
        let failure = if out.writes.is_empty() {
            None
        } else {
            let writes: Vec<ObjectWrite> = out.writes.iter().cloned().map(object_write).collect();
            self.shared.store.commit(&writes).err().map(|e| {
                tracing::error!(error = %e, "commit failed; refusing writes from now on");
                storage_error(e)
            })
        };
        let epoch = self.shared.view().epoch();
        if let Some(failure) = failure {
            // Nothing of this batch is known durable: acknowledge nothing, now or ever.
            self.replica.fail(out, failure);
            let out = self.replica.take_outputs();
            for (client, result) in out.replies {
                if let Some(replier) = self.clients.remove(&client.0) {
                    replier.send(epoch, result.map_or_else(Response::Error, |()| Response::Done));
                }
            }
            return;
        }
        for (to, envelope) in &out.messages {
            self.peers.send(*to, envelope);
        }
        for (client, result) in out.replies {
            if let Some(replier) = self.clients.remove(&client.0) {
                replier.send(epoch, result.map_or_else(Response::Error, |()| Response::Done));
            }
        }
        self.replica.advance();
    }
}

/// The state machine's storage write as the store takes it.
fn object_write(w: StoreWrite) -> ObjectWrite {
    match w {
        StoreWrite::Entry { space, subspace, remove, insert } => ObjectWrite::Entry { space, subspace, remove, insert },
        StoreWrite::ClearRegion { space, subspace, region } => ObjectWrite::ClearRegion { space, subspace, region },
    }
}

/// The address a server registers under.
pub fn advertised(options: &ClusterOptions, bound: SocketAddr) -> Result<String, ServerError> {
    match &options.advertise {
        Some(a) => Ok(a.clone()),
        None if bound.ip().is_unspecified() => Err(ServerError::Cluster(format!(
            "listening on {bound}: give --advertise, the address other servers and clients reach this one at"
        ))),
        None => Ok(bound.to_string()),
    }
}

/// `Status` for requests a cluster server leaves to others.
pub fn not_here(what: &str) -> ErrorReply {
    ErrorReply::new(Status::Malformed, format!("this server is part of a cluster: {what}"))
}
