//! The Tessera server: the I/O shell around storage and the replication state machine.
//!
//! One write path, whether the server runs standalone (`tessera dev`: one server, every
//! region's replica set `[this server]`) or as a member of a cluster: the chain loop
//! (`chain`) steps [`tessera_replication::Replica`] with every input that queued, commits the
//! storage writes the steps produced as one group commit, then sends their envelopes, then
//! answers their clients. A standalone server is the one-server cluster: its chains are its
//! own hops, its add-space and rm-space are configurations it makes itself and installs as a
//! cluster server installs the coordinators', and its reads are a cluster server's: the client
//! plans each search and sends it every region of the plan (`SearchRegions`, answered with the
//! matches, their count or the first of them in an order), explains searches itself, and runs
//! a group delete or update as a search then one conditional write per match (`WriteKeys`,
//! many keys to a request, each key's write its own). Every guarantee
//! tested on one covers the other.
//!
//! Modules, each importing only those above it:
//! * `errors`: why a server stops ([`ServerError`]); storage errors as clients see them.
//! * `outbox`: a connection's responses, and the right to answer one request.
//! * `view`: a configuration and the spaces derived from it, swapped as a whole.
//! * `statistics`: each space's statistics as this server last read them, kept until a
//!   tenth of the objects may have changed.
//! * `queue`: the chain loop's inputs and the handle that queues them.
//! * `state`: what every task shares (the store, the view, the chain loop's handle, whether
//!   storage failed) and the configuration persisted in the data directory.
//! * `reads`: get, a search's `Scan` (planned once, whatever it answers with), from committed
//!   state.
//! * `peers`: outgoing links to peers; checking and queueing what a peer sends.
//! * `coordination`: registration with the coordinators and following their configuration.
//! * `transfers`: reporting completed state transfers to the coordinators, off the chain
//!   loop's thread.
//! * `shapes`: registering the shapes of a dynamic space's documents with the coordinators,
//!   off the chain loop's thread.
//! * `chain`: the chain loop, the only write path; fail-stop when storage fails.
//! * `validate`: a request checked against the view into a typed job, or an error. Pure.
//! * `search`: a search from its job to its frames: its scan, where it runs, how its matches
//!   travel.
//! * `connection`: accepting, framing, routing each job to what runs it.

#![forbid(unsafe_code)]

mod chain;
mod connection;
mod coordination;
mod errors;
pub mod lease;
mod observe;
mod outbox;
mod peers;
mod queue;
mod reads;
mod search;
mod shapes;
mod state;
mod statistics;
mod trace;
mod transfers;
mod validate;
mod view;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tessera_protocol::data_format::DataKind;
use tessera_protocol::handshake::Dialer;
pub use tessera_protocol::tls::MemberTls;
pub use tessera_protocol::Gate;
use tessera_storage::{FsyncPolicy, Store, StoreOptions};
use tokio::net::TcpListener;

pub use connection::ConnectionLimits;
pub use coordination::ClusterOptions;
pub use errors::ServerError;
use view::Mode;

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
    /// Bytes per second this server reads and sends of the state transfers it is the source
    /// of (re-replication, joins, decommission, balance), all of them together. Faster means
    /// fewer seconds a replica short and more of the live traffic's CPU and disk taken.
    pub transfer_bytes_per_second: u64,
    /// What one client connection may hold of the server.
    pub limits: ConnectionLimits,
    /// Who may send what: client tokens and the cluster secret (open by default). Shared with
    /// whoever reloads the token file.
    pub gate: Arc<Gate>,
    /// TLS on the listener and on connections to peers and coordinators; `None`: plain TCP.
    pub tls: Option<MemberTls>,
}

/// The default of [`ServerOptions::transfer_bytes_per_second`]: 8 MB/s. On the 2-core test
/// machine, with five servers on it, it kept 52-74 % of the live throughput while regions were
/// copied, against 3-11 % unpaced (`make bench-transfers`, docs/benchmarks.md).
pub const TRANSFER_BYTES_PER_SECOND_DEFAULT: u64 = 8_000_000;

impl ServerOptions {
    pub fn new(data_dir: impl Into<PathBuf>, listen: SocketAddr) -> ServerOptions {
        ServerOptions {
            data_dir: data_dir.into(),
            listen,
            fsync: FsyncPolicy::Always,
            cache_bytes: StoreOptions::default().cache_bytes,
            cluster: None,
            transfer_bytes_per_second: TRANSFER_BYTES_PER_SECOND_DEFAULT,
            limits: ConnectionLimits::default(),
            gate: Arc::new(Gate::default()),
            tls: None,
        }
    }
}

/// How a server leaves when it stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Departure {
    /// A planned restart: a cluster server tells the coordinators it rests
    /// (`Request::RestServer`), so its chains go on without it and its regions wait for it
    /// rather than being copied elsewhere; it stops once the other servers act on that.
    Rest,
    /// The whole cluster stops (`tessera dev --servers N`): nothing to tell anyone.
    Quiet,
}

/// How long a stopping server waits for the coordinators to take it out of the chains.
const REST_ANNOUNCE_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// A cluster server's coordinators and who it is to them, to announce its rest.
struct Announcer {
    coordinators: coordination::Coordinators,
    member: Member,
}

/// A bound, running server. Dropping it does not stop it: call [`Server::shutdown`].
pub struct Server {
    local_addr: SocketAddr,
    /// A cluster server's way to announce a planned stop.
    announcer: Option<Announcer>,
    shared: Arc<state::Shared>,
    accept: tokio::task::JoinHandle<()>,
    chain: Option<std::thread::JoinHandle<()>>,
    /// The state machine's clock and, in a cluster, the configuration follower.
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// In a cluster, the heartbeats that keep the lease, on a thread of their own.
    lease_keeper: Option<lease::LeaseKeeper>,
}

impl Server {
    /// Opens (or recovers) the data directory, binds the listener and starts serving.
    pub async fn start(options: ServerOptions) -> Result<Server, ServerError> {
        std::fs::create_dir_all(&options.data_dir).map_err(ServerError::Io)?;
        // Format 1 (the releases of protocol 4) is migrated: see `data_format::SERVER_FORMATS`.
        let steps = [tessera_protocol::data_format::Step {
            from: 1,
            run: &state::migrate_1_to_2,
        }];
        tessera_protocol::data_format::open(&options.data_dir, DataKind::Server, &steps)?;
        let listener =
            TcpListener::bind(options.listen)
                .await
                .map_err(|error| ServerError::Listen {
                    address: options.listen,
                    error,
                })?;
        let local_addr = listener.local_addr().map_err(ServerError::Io)?;
        // Grows with every start of the process: peers number their links to this one afresh.
        let incarnation = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_micros() as u64)
            .max(1);
        let store = Store::open(
            &options.data_dir.join("store"),
            StoreOptions {
                fsync: options.fsync,
                cache_bytes: options.cache_bytes,
            },
        )?;
        // A cluster member proves the cluster secret on every connection it opens.
        let dialer = Dialer::member(
            options.gate.policy().secret.clone(),
            options.tls.as_ref().map(|tls| tls.dial.clone()),
        );
        let coordinators = options
            .cluster
            .as_ref()
            .map(|c| coordination::Coordinators {
                addresses: c.coordinators.clone(),
                dialer: dialer.clone(),
            });
        let (me, mode, config, previous) = match (&options.cluster, &coordinators) {
            (Some(c), Some(coordinators)) => {
                let address = coordination::advertised(c, local_addr)?;
                let token = coordination::load_or_make_token(&options.data_dir)?;
                let me = coordination::register(coordinators, token, address.clone(), incarnation)
                    .await?;
                let config = coordination::first_configuration(coordinators, me).await?;
                // What this server acted on before it stopped: regions it kept then and does
                // not keep now (neither holds nor rests in) are cleared by the state machine.
                let previous = state::load_config(&options.data_dir)?;
                state::reconcile(&store, previous.as_ref(), &config)?;
                (me, Mode::Cluster, config, previous)
            }
            _ => {
                let config = state::recover(&options.data_dir, &store, local_addr)?;
                (state::SINGLE_SERVER_ID, Mode::Standalone, config, None)
            }
        };
        let (chain_tx, chain_rx) = queue::channel();
        let lease = Arc::new(match options.cluster {
            None => lease::Lease::always(),
            Some(_) => lease::Lease::new(),
        });
        let shared = Arc::new(state::Shared::new(
            options.data_dir.clone(),
            Arc::new(store),
            me,
            mode,
            config,
            chain_tx,
            (
                lease,
                options.gate.clone(),
                dialer,
                options.tls.as_ref().map(|tls| tls.serve.clone()),
            ),
        ));
        let runtime = tokio::runtime::Handle::current();
        let (reports, reported) = match options.cluster {
            None => (transfers::TransferReports::none(), None),
            Some(_) => {
                let (tx, rx) = transfers::TransferReports::channel();
                (tx, Some(rx))
            }
        };
        let registrar = coordinators
            .as_ref()
            .map(|c| shapes::ShapeRegistrar::new(c.clone(), runtime.clone(), shared.chain.clone()));
        let chain = chain::spawn(
            shared.clone(),
            incarnation,
            previous.as_ref(),
            chain_rx,
            (reports, registrar),
            options.transfer_bytes_per_second,
            runtime,
        );
        let mut tasks = vec![tokio::spawn(chain::tick(shared.clone()))];
        let (lease_keeper, announcer) = match (&options.cluster, &coordinators, reported) {
            (Some(c), Some(coordinators), Some(reported)) => {
                let member = Member {
                    me,
                    incarnation,
                    address: coordination::advertised(c, local_addr)?,
                    token: coordination::load_or_make_token(&options.data_dir)?,
                };
                let announcer = Announcer {
                    coordinators: coordinators.clone(),
                    member: member.clone(),
                };
                let keeper = follow_cluster(&shared, coordinators, member, reported, &mut tasks);
                (Some(keeper.await?), Some(announcer))
            }
            _ => (None, None),
        };
        let limits = options
            .limits
            .fit_to_descriptors(connection::descriptor_limit());
        let accept = tokio::spawn(connection::accept_loop(listener, shared.clone(), limits));
        tracing::info!(%local_addr, data_dir = %options.data_dir.display(), "serving");
        Ok(Server {
            local_addr,
            announcer,
            shared,
            accept,
            chain: Some(chain),
            tasks,
            lease_keeper,
        })
    }

    /// This server's id (1 for a standalone server; the coordinator's choice in a cluster).
    pub fn id(&self) -> tessera_types::ServerId {
        self.shared.me
    }

    /// What sets this server's gauges (regions and stored entries per space and subspace, the
    /// epoch) for a scrape of the metrics. It may outlive the server, and then sets nothing:
    /// it holds the server's state weakly, so that a publisher left with the metrics endpoint
    /// does not keep the store open after [`Server::shutdown`] (which waits for it to close).
    pub fn metrics_publisher(&self) -> impl Fn() + Send + Sync + 'static {
        let shared = Arc::downgrade(&self.shared);
        move || {
            if let Some(shared) = shared.upgrade() {
                let view = shared.view();
                shared.meter.publish(&view.config, &shared.store);
            }
        }
    }

    /// The epoch of the configuration this server acts on.
    pub fn epoch(&self) -> tessera_types::Epoch {
        self.shared.view().epoch()
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Whether a write to storage failed, after which the server refuses every write.
    pub fn storage_failed(&self) -> bool {
        self.shared.storage_failed()
    }

    /// Makes the store fail every later write, as after a failed write or fsync: for tests of
    /// the server's fail-stop.
    #[cfg(feature = "fault-injection")]
    #[doc(hidden)]
    pub fn inject_storage_failure(&self) {
        self.shared.store.inject_failure();
    }

    /// Stops for a planned restart: [`Server::stop`] with [`Departure::Rest`].
    pub async fn shutdown(self) {
        self.stop(Departure::Rest).await
    }

    /// Stops: refuses new requests and connections, lets the chain loop answer the writes it
    /// has (their group commit included); a cluster server leaving for a rest then tells the
    /// coordinators and goes on as a hop of its peers' chains until they act on a
    /// configuration without it (at most [`REST_ANNOUNCE_MAX`]). Then it waits until every
    /// connection has written out its answers in flight and closed (at most 5 s:
    /// `connection::DRAIN_MAX`), stops its tasks and waits until the store is closed (so the
    /// data directory can be opened again). An idle server stops within milliseconds; a
    /// cluster server announcing its rest within a heartbeat or two.
    pub async fn stop(mut self, departure: Departure) {
        let announcer = self
            .announcer
            .take()
            .filter(|_| departure == Departure::Rest);
        if announcer.is_some() {
            self.shared.rest_on_purpose();
        }
        self.shared.shutdown();
        if let Some(announcer) = announcer {
            self.announce_rest(announcer).await;
        }
        self.shared.release();
        if let Some(w) = self.chain.take() {
            let _ = tokio::task::spawn_blocking(move || w.join()).await;
        }
        // The accept loop ends once its connections have (`connection::accept_loop`).
        let _ = (&mut self.accept).await;
        for t in &self.tasks {
            t.abort();
        }
        if let Some(keeper) = self.lease_keeper.take() {
            let _ = tokio::task::spawn_blocking(move || keeper.stop()).await;
        }
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

impl Server {
    /// Once the chain loop has answered its clients' writes, tells the coordinators this
    /// server rests, and waits for their answer: given once the other servers act on the
    /// configuration without it. Bounded by [`REST_ANNOUNCE_MAX`]; a refusal or no answer
    /// leaves the rest to the failure detector (the lease lapses).
    async fn announce_rest(&self, a: Announcer) {
        let Announcer {
            coordinators,
            member,
        } = a;
        let started = tokio::time::Instant::now();
        while !self.shared.is_drained() && started.elapsed() < REST_ANNOUNCE_MAX {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let request = tessera_protocol::Request::RestServer {
            server: member.me,
            token: member.token,
            incarnation: member.incarnation,
        };
        let left = REST_ANNOUNCE_MAX.saturating_sub(started.elapsed());
        let asked = coordination::ask_coordinators(&coordinators, request);
        let me = member.me;
        match tokio::time::timeout(left, asked).await {
            Ok(Ok(tessera_protocol::Response::Done)) => {
                tracing::info!(server = %me, "resting: the coordinators keep its regions for it")
            }
            Ok(Ok(other)) => {
                tracing::warn!(server = %me, ?other, "the coordinators did not take the rest; stopping anyway")
            }
            Ok(Err(e)) => {
                tracing::warn!(server = %me, error = %e, "no coordinator took the rest; stopping anyway")
            }
            Err(_) => {
                tracing::warn!(server = %me, "no answer to the rest in time; stopping anyway")
            }
        }
    }
}

/// Who this server is to the coordinators.
#[derive(Clone)]
struct Member {
    me: tessera_types::ServerId,
    incarnation: u64,
    address: String,
    token: u128,
}

/// A cluster member's tasks: following the configuration, reporting completed transfers and
/// keeping the lease (serving once it is granted, normally within one heartbeat; until then
/// gets and writes are refused as retryable anyway).
async fn follow_cluster(
    shared: &Arc<state::Shared>,
    coordinators: &coordination::Coordinators,
    member: Member,
    reported: tokio::sync::mpsc::UnboundedReceiver<transfers::Report>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Result<lease::LeaseKeeper, ServerError> {
    let Member {
        me,
        incarnation,
        address,
        token,
    } = member;
    let stopping = shared.clone();
    tasks.push(tokio::spawn(coordination::follow_configuration(
        coordinators.clone(),
        shared.view().epoch(),
        shared.chain.clone(),
        move || stopping.is_shutting_down(),
    )));
    let (viewing, stopping) = (shared.clone(), shared.clone());
    tasks.push(tokio::spawn(transfers::report_transfers(
        coordinators.clone(),
        me,
        token,
        incarnation,
        reported,
        move |done| transfers::may_be_under_way(&viewing.view().config, me, done),
        move || stopping.is_shutting_down(),
    )));
    let (viewing, released, resting) = (shared.clone(), shared.clone(), shared.clone());
    // Heartbeats go on while a stopping server drains and announces its rest: until then it
    // serves as a hop of its peers' chains, and must not look failed.
    let keeping = lease::keep_lease(
        coordinators.clone(),
        me,
        token,
        incarnation,
        address,
        shared.lease.clone(),
        shared.storage_failed_flag(),
        move || viewing.view().epoch(),
        (
            move || released.is_released(),
            move || resting.rests_on_purpose(),
        ),
    );
    let keeper = lease::LeaseKeeper::start(keeping).map_err(ServerError::Io)?;
    for _ in 0..100 {
        if shared.lease.is_valid() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tracing::info!(server = %me, lease = shared.lease.is_valid(), "joined the cluster");
    Ok(keeper)
}
