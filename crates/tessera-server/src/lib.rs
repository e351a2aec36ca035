//! The Tessera server: the I/O shell around storage and the point leader.
//!
//! Shape (HyperDex's daemon, one manager per concern):
//! * [`connection`]: one task per TCP connection reads frames, answers reads itself, and hands
//!   writes to the write loop; a second task per connection writes responses, batching them
//!   into one flush whenever several are ready.
//! * [`writer`]: the write loop, on its own thread. It is the point leader of every key: it
//!   orders each key's updates, evaluates conditions and atomic operations against the key's
//!   latest value, and commits everything that arrived while the previous commit was on disk
//!   as one atomic, fsynced batch (group commit) before any of those requests is answered.
//! * [`reads`]: get, search, count, sorted search and explain, from committed state.
//! * [`state`]: the configuration this server acts on, persisted in its data directory.
//!
//! Today one server owns every region of every space: a cluster whose replica sets have one
//! member. The multi-server work replaces the write loop's single-member chain with the
//! replication state machine and the local configuration with the coordinator's.

pub mod cluster;
pub mod connection;
pub mod lease;
pub mod reads;
pub mod state;
pub mod writer;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tessera_storage::{FsyncPolicy, Store, StoreOptions};
use tokio::net::TcpListener;

pub use cluster::ClusterOptions;
pub use state::ServerError;

/// How to run a server.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Where the store and the configuration live. Created if absent.
    pub data_dir: PathBuf,
    /// Address to listen on, e.g. `127.0.0.1:1982`. Port 0 picks a free port.
    pub listen: SocketAddr,
    /// When writes reach the disk. The default, `Always`, fsyncs every group commit before
    /// acknowledging any write in it.
    pub fsync: FsyncPolicy,
    /// Storage block cache, in bytes.
    pub cache_bytes: u64,
    /// `None`: standalone, one server owning every region (`tessera dev`). `Some`: a member
    /// of a cluster run by coordinators.
    pub cluster: Option<ClusterOptions>,
}

impl ServerOptions {
    pub fn new(data_dir: impl Into<PathBuf>, listen: SocketAddr) -> ServerOptions {
        ServerOptions {
            data_dir: data_dir.into(),
            listen,
            fsync: FsyncPolicy::Always,
            cache_bytes: StoreOptions::default().cache_bytes,
            cluster: None,
        }
    }
}

/// A bound, running server. Dropping it does not stop it: call [`Server::shutdown`].
pub struct Server {
    local_addr: SocketAddr,
    shared: Arc<state::Shared>,
    accept: tokio::task::JoinHandle<()>,
    writer: Option<std::thread::JoinHandle<()>>,
    /// Cluster mode: the configuration follower and the clock.
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Server {
    /// Opens (or recovers) the data directory, binds the listener and starts serving.
    pub async fn start(options: ServerOptions) -> Result<Server, ServerError> {
        std::fs::create_dir_all(&options.data_dir).map_err(ServerError::Io)?;
        let listener = TcpListener::bind(options.listen).await.map_err(ServerError::Io)?;
        let local_addr = listener.local_addr().map_err(ServerError::Io)?;
        let store = Store::open(
            &options.data_dir.join("store"),
            StoreOptions { fsync: options.fsync, cache_bytes: options.cache_bytes },
        )?;
        let mut tasks = Vec::new();
        let (shared, writer) = match &options.cluster {
            None => {
                let config = state::recover(&options.data_dir, &store, local_addr)?;
                let (write_tx, write_rx) = writer::channel();
                let shared = Arc::new(state::Shared::new(
                    options.data_dir.clone(),
                    Arc::new(store),
                    state::SINGLE_SERVER_ID,
                    config,
                    state::Writes::Standalone(write_tx),
                ));
                let writer = writer::spawn(shared.clone(), write_rx);
                (shared, writer)
            }
            Some(c) => {
                let address = cluster::advertised(c, local_addr)?;
                let token = cluster::load_or_make_token(&options.data_dir)?;
                // Grows with each start of this process: peers and coordinators tell a restart by it.
                let incarnation = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_micros() as u64).max(1);
                let me = cluster::register(&c.coordinators, token, address, incarnation).await?;
                let config = cluster::first_configuration(&c.coordinators, me).await?;
                state::reconcile(&options.data_dir, &store, &config)?;
                let (chain_tx, chain_rx) = cluster::channel();
                let shared = Arc::new(state::Shared::new(
                    options.data_dir.clone(),
                    Arc::new(store),
                    me,
                    config,
                    state::Writes::Cluster(chain_tx.clone()),
                ));
                let writer = cluster::spawn(shared.clone(), me, incarnation, chain_rx, tokio::runtime::Handle::current());
                tasks.push(tokio::spawn(cluster::follow_configuration(
                    c.coordinators.clone(),
                    shared.clone(),
                    chain_tx.clone(),
                )));
                tasks.push(tokio::spawn(cluster::tick(shared.clone(), chain_tx)));
                tracing::info!(server = %me, "joined the cluster");
                (shared, writer)
            }
        };
        let accept = tokio::spawn(connection::accept_loop(listener, shared.clone()));
        tracing::info!(%local_addr, data_dir = %options.data_dir.display(), "serving");
        Ok(Server { local_addr, shared, accept, writer: Some(writer), tasks })
    }

    /// This server's id (1 for a standalone server; the coordinator's choice in a cluster).
    pub fn id(&self) -> tessera_types::ServerId {
        self.shared.me
    }

    /// The epoch of the configuration this server acts on.
    pub fn epoch(&self) -> tessera_types::Epoch {
        self.shared.view().epoch()
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting connections and closes the open ones, lets the write loop finish what
    /// it has, and waits until the store is closed (so the data directory can be opened again).
    pub async fn shutdown(mut self) {
        self.accept.abort();
        for t in &self.tasks {
            t.abort();
        }
        self.shared.shutdown();
        if let Some(w) = self.writer.take() {
            let _ = tokio::task::spawn_blocking(move || w.join()).await;
        }
        let _ = (&mut self.accept).await;
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        let store = Arc::downgrade(&self.shared.store);
        drop(self.shared);
        // Connections end as they are cancelled; a search on the blocking pool ends at its next
        // batch. Bounded: a stuck one only delays the restart of the same directory.
        for _ in 0..500 {
            if store.upgrade().is_none() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        tracing::warn!("the store is still in use 5 s after shutdown");
    }
}
