//! Starting and stopping a coordinator.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::error::{InitializeError, RaftError};
use openraft::{BasicNode, Config, SnapshotPolicy};
use tessera_protocol::data_format::DataKind;
use tessera_protocol::handshake::Dialer;
use tessera_protocol::listener::{descriptor_limit, ConnectionLimits};
use tessera_protocol::tls::MemberTls;
use tessera_protocol::{Configuration, Gate};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use crate::detector::LeaseTuning;
use crate::detector::{self, Detector};
use crate::fsutil::{read_checked, write_atomic};
use crate::log_store::LogStore;
use crate::peer::PeerNetworkFactory;
use crate::raft_types::{NodeId, Raft};
use crate::service::{self, Shared};
use crate::sm_store::StateMachineStore;

/// How a coordinator runs Raft. The defaults suit a LAN and loopback tests alike.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaftTuning {
    /// How often the leader sends heartbeats, in milliseconds.
    pub heartbeat_ms: u64,
    /// A follower that hears no leader for a random time in `election_timeout_ms` (min..max)
    /// starts an election.
    pub election_timeout_ms: (u64, u64),
    /// A snapshot is built once this many entries have been applied since the last one; the
    /// log up to the snapshot is then purged, keeping `logs_kept_after_snapshot` entries for
    /// followers that lag a little.
    pub snapshot_every: u64,
    pub logs_kept_after_snapshot: u64,
}

impl Default for RaftTuning {
    fn default() -> Self {
        RaftTuning {
            heartbeat_ms: 100,
            election_timeout_ms: (400, 800),
            snapshot_every: 1000,
            logs_kept_after_snapshot: 100,
        }
    }
}

/// Everything a coordinator needs to start.
#[derive(Clone, Debug)]
pub struct CoordinatorOptions {
    /// This coordinator's Raft node id: one of `peers`. Must stay the same across restarts of
    /// the same data directory.
    pub id: u64,
    /// Where the Raft log, vote and snapshot live (`<data_dir>/raft/`).
    pub data_dir: PathBuf,
    /// Where to listen for clients, servers and the other coordinators.
    pub listen: SocketAddr,
    /// Every member of the coordinator group, this one included: Raft node id and `host:port`.
    pub peers: Vec<(u64, String)>,
    pub raft: RaftTuning,
    /// Failures a new space tolerates when its description does not say (`tolerate N
    /// failures`); `None` keeps the language's default.
    pub default_tolerate: Option<u32>,
    /// Server leases and failure detection.
    pub lease: LeaseTuning,
    /// Whether the configuration's commands plan state transfers (re-replication, joins,
    /// decommission, balance): [`crate::state::PLAN_TRANSFERS`] (on) by default, turned off by
    /// tests of what happens without it. Every coordinator of a group must be given the same
    /// value: it is a rule of their replicated state machine.
    pub plan_transfers: bool,
    /// Who may send what: client tokens and the cluster secret (open by default). Shared with
    /// whoever reloads the token file.
    pub gate: Arc<Gate>,
    /// TLS on the listener and on connections to the other coordinators; `None`: plain TCP.
    pub tls: Option<MemberTls>,
    /// The listener's connection cap and timeouts (the cap is lowered to fit the process's
    /// file-descriptor limit).
    pub limits: ConnectionLimits,
}

impl CoordinatorOptions {
    /// Options with the default [`RaftTuning`].
    pub fn new(
        id: u64,
        data_dir: impl Into<PathBuf>,
        listen: SocketAddr,
        peers: Vec<(u64, String)>,
    ) -> Self {
        CoordinatorOptions {
            id,
            data_dir: data_dir.into(),
            listen,
            peers,
            raft: RaftTuning::default(),
            default_tolerate: None,
            lease: LeaseTuning::default(),
            plan_transfers: crate::state::PLAN_TRANSFERS,
            gate: Arc::new(Gate::default()),
            tls: None,
            limits: ConnectionLimits::default(),
        }
    }
}

/// Why a coordinator could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoordinatorError {
    #[error("bad options: {0}")]
    Options(String),
    #[error("data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("raft: {0}")]
    Raft(String),
    /// The data directory is of a format this build does not read (newer, or too old).
    #[error("{0}")]
    DataFormat(#[from] tessera_protocol::data_format::DataFormatError),
}

/// A running coordinator: Raft, the listener and every connection. Stop it with
/// [`Coordinator::shutdown`]; dropping it stops it too, without waiting.
pub struct Coordinator {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    stopped: bool,
}

const NODE_ID_FILE: &str = "node-id";

impl Coordinator {
    /// Starts a coordinator listening on `options.listen`.
    pub async fn start(options: CoordinatorOptions) -> Result<Coordinator, CoordinatorError> {
        let listener =
            TcpListener::bind(options.listen)
                .await
                .map_err(|source| CoordinatorError::Listen {
                    addr: options.listen,
                    source,
                })?;
        Coordinator::start_with_listener(options, listener).await
    }

    /// Starts a coordinator on a listener bound already (`options.listen` is then ignored):
    /// lets tests pick free ports before they know every peer's address.
    pub async fn start_with_listener(
        options: CoordinatorOptions,
        listener: TcpListener,
    ) -> Result<Coordinator, CoordinatorError> {
        let addresses = check_options(&options)?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| CoordinatorError::Listen {
                addr: options.listen,
                source,
            })?;
        let raft_dir = options.data_dir.join("raft");
        let data_err = |source| CoordinatorError::DataDir {
            path: raft_dir.clone(),
            source,
        };
        // Format 1 (the releases of protocol 4) is migrated: see `data_format::COORDINATOR_FORMATS`.
        let steps = [tessera_protocol::data_format::Step {
            from: 1,
            run: &crate::sm_store::migrate_1_to_2,
        }];
        tessera_protocol::data_format::open(&options.data_dir, DataKind::Coordinator, &steps)?;
        std::fs::create_dir_all(&raft_dir).map_err(data_err)?;
        check_node_id(&raft_dir, options.id).map_err(data_err)?;
        let log_store = LogStore::open(&raft_dir).map_err(data_err)?;
        let (state_machine, config, state) =
            StateMachineStore::open(&raft_dir, options.plan_transfers).map_err(data_err)?;

        let t = &options.raft;
        let raft_config = Config {
            cluster_name: "tessera-coordinators".into(),
            heartbeat_interval: t.heartbeat_ms,
            election_timeout_min: t.election_timeout_ms.0,
            election_timeout_max: t.election_timeout_ms.1,
            install_snapshot_timeout: 2000,
            max_payload_entries: 64,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(t.snapshot_every),
            max_in_snapshot_log_to_keep: t.logs_kept_after_snapshot,
            snapshot_max_chunk_size: 1024 * 1024,
            ..Config::default()
        }
        .validate()
        .map_err(|e| CoordinatorError::Options(e.to_string()))?;

        let addresses = Arc::new(addresses);
        let dialer = Dialer::member(
            options.gate.policy().secret.clone(),
            options.tls.as_ref().map(|tls| tls.dial.clone()),
        );
        let network = PeerNetworkFactory {
            me: options.id,
            addresses: addresses.clone(),
            dialer: dialer.clone(),
        };
        let raft = Raft::new(
            options.id,
            Arc::new(raft_config),
            network,
            log_store,
            state_machine,
        )
        .await
        .map_err(|e| CoordinatorError::Raft(e.to_string()))?;

        let tracker = TaskTracker::new();
        let detector = Detector::new(
            options.id,
            options.lease.clone(),
            raft.clone(),
            state,
            tracker.clone(),
        );
        let shared = Arc::new(Shared {
            id: options.id,
            raft: raft.clone(),
            config,
            addresses: addresses.clone(),
            default_tolerate: options.default_tolerate,
            detector: Arc::new(detector),
            cancel: CancellationToken::new(),
            tracker,
            gate: options.gate.clone(),
            dialer,
            tls: options.tls.as_ref().map(|tls| tls.serve.clone()),
            limits: options.limits.fit_to_descriptors(descriptor_limit()),
        });
        shared
            .tracker
            .spawn(service::accept_loop(shared.clone(), listener));
        shared.tracker.spawn(detector::run(
            shared.detector.clone(),
            shared.cancel.clone(),
        ));
        tracing::info!(id = options.id, addr = %local_addr, members = addresses.len(), "coordinator started");

        let pristine = !raft
            .is_initialized()
            .await
            .map_err(|e| CoordinatorError::Raft(e.to_string()))?;
        let smallest = addresses.keys().next().copied() == Some(options.id);
        if pristine && smallest {
            let members: BTreeMap<NodeId, BasicNode> = addresses
                .iter()
                .map(|(id, addr)| (*id, BasicNode { addr: addr.clone() }))
                .collect();
            tracing::info!(?members, "initializing the coordinator group");
            match raft.initialize(members).await {
                Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(e) => {
                    let _ = raft.shutdown().await;
                    shared.cancel.cancel();
                    return Err(CoordinatorError::Raft(e.to_string()));
                }
            }
        }
        Ok(Coordinator {
            shared,
            local_addr,
            stopped: false,
        })
    }

    /// The address clients, servers and peers reach this coordinator at.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// The configuration this coordinator has applied (followers may lag the leader a little).
    pub fn configuration(&self) -> Arc<Configuration> {
        self.shared.config.borrow().clone()
    }

    /// Follows the applied configuration.
    pub fn watch_configuration(&self) -> watch::Receiver<Arc<Configuration>> {
        self.shared.config.clone()
    }

    /// The leader this coordinator knows of, if any.
    pub fn leader(&self) -> Option<u64> {
        self.shared.raft.metrics().borrow().current_leader
    }

    /// Whether this coordinator is the leader, as a function that outlives this handle's
    /// borrow (for tasks that should act on the leader only, like the adaptation driver).
    pub fn leads(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let term = self.leader_term();
        move || term().is_some()
    }

    /// The Raft term in which this coordinator leads, if it does, as a function like
    /// [`Coordinator::leads`]: what the adaptation driver fences its changes with.
    pub fn leader_term(&self) -> impl Fn() -> Option<u64> + Send + Sync + 'static {
        let metrics = self.shared.raft.metrics();
        let id = self.shared.id;
        move || {
            let m = metrics.borrow();
            (m.current_leader == Some(id)).then_some(m.current_term)
        }
    }

    /// This coordinator's view of the group, as `CoordinatorStatus` answers it.
    pub fn status(&self) -> tessera_protocol::CoordinatorStatus {
        service::status(&self.shared)
    }

    /// Sets this coordinator's gauges for a scrape of the metrics: Raft's term, last log index
    /// and last applied index, whether it leads, the configuration's epoch, the servers by
    /// state, and (on the leader) how long since it heard each server.
    pub fn metrics_publisher(&self) -> impl Fn() + Send + Sync + 'static {
        let shared = self.shared.clone();
        move || publish_metrics(&shared)
    }

    /// Index of the last log entry purged from this coordinator's log (after a snapshot), if
    /// any. For tests and diagnostics.
    pub fn log_purged_upto(&self) -> Option<u64> {
        self.shared.raft.metrics().borrow().purged.map(|l| l.index)
    }

    /// Index of the last log entry in this coordinator's current snapshot, if any.
    pub fn snapshot_upto(&self) -> Option<u64> {
        self.shared
            .raft
            .metrics()
            .borrow()
            .snapshot
            .map(|l| l.index)
    }

    /// Stops accepting, closes every connection, stops Raft, and waits for every task.
    /// Takes no server offline from now on, however long it is silent: for a stop of the
    /// whole cluster (`tessera dev`), whose servers stop before their coordinators, so that
    /// their silence in between moves no region. Leases are still granted.
    pub fn stop_failure_detection(&self) {
        self.shared.detector.stop_deciding();
    }

    pub async fn shutdown(mut self) {
        self.stopped = true;
        tracing::info!(id = self.shared.id, "coordinator shutting down");
        self.shared.cancel.cancel();
        self.shared.tracker.close();
        if let Err(e) = self.shared.raft.shutdown().await {
            tracing::warn!(error = %e, "raft did not stop cleanly");
        }
        self.shared.tracker.wait().await;
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        self.shared.cancel.cancel();
        self.shared.tracker.close();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let raft = self.shared.raft.clone();
            handle.spawn(async move {
                let _ = raft.shutdown().await;
            });
        }
    }
}

fn check_options(
    options: &CoordinatorOptions,
) -> Result<BTreeMap<NodeId, String>, CoordinatorError> {
    let mut addresses = BTreeMap::new();
    for (id, addr) in &options.peers {
        if addr.is_empty() {
            return Err(CoordinatorError::Options(format!(
                "member {id} has an empty address"
            )));
        }
        if addresses.insert(*id, addr.clone()).is_some() {
            return Err(CoordinatorError::Options(format!(
                "member {id} is listed twice"
            )));
        }
    }
    if options.lease.lease_ms == 0 {
        return Err(CoordinatorError::Options(
            "the lease must be at least 1 ms".into(),
        ));
    }
    if !addresses.contains_key(&options.id) {
        return Err(CoordinatorError::Options(format!(
            "this coordinator's id {} is not among the members",
            options.id
        )));
    }
    Ok(addresses)
}

/// Refuses a data directory that belongs to another node id: its vote and log would be wrong.
fn check_node_id(dir: &Path, id: u64) -> std::io::Result<()> {
    match read_checked(&dir.join(NODE_ID_FILE))? {
        Some(bytes) => {
            let stored: u64 = postcard::from_bytes(&bytes).map_err(crate::fsutil::invalid)?;
            if stored != id {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("belongs to coordinator {stored}, not {id}"),
                ));
            }
            Ok(())
        }
        None => {
            let body = postcard::to_allocvec(&id).map_err(crate::fsutil::invalid)?;
            write_atomic(dir, NODE_ID_FILE, &body, true)
        }
    }
}

/// Sets a coordinator's gauges (see [`Coordinator::metrics_publisher`]).
fn publish_metrics(shared: &Shared) {
    use metrics::gauge;
    let id = shared.id.to_string();
    let (term, last_log) = {
        let raft = shared.raft.metrics();
        let m = raft.borrow();
        (m.current_term, m.last_log_index.unwrap_or(0))
    };
    let status = service::status(shared);
    gauge!("tessera_raft_term", "coordinator" => id.clone()).set(term as f64);
    gauge!("tessera_raft_last_log_index", "coordinator" => id.clone()).set(last_log as f64);
    gauge!("tessera_raft_last_applied", "coordinator" => id.clone())
        .set(status.last_applied as f64);
    let leads = status.leader == Some(shared.id);
    gauge!("tessera_raft_leader", "coordinator" => id.clone()).set(f64::from(u8::from(leads)));
    gauge!("tessera_coordinator_epoch", "coordinator" => id.clone()).set(status.epoch.0 as f64);
    let mut by_state = std::collections::BTreeMap::<String, u64>::new();
    for server in &shared.config.borrow().servers {
        *by_state
            .entry(format!("{:?}", server.state).to_lowercase())
            .or_default() += 1;
    }
    for (state, count) in by_state {
        gauge!("tessera_servers", "coordinator" => id.clone(), "state" => state).set(count as f64);
    }
    // The leader's failure detector: how long since it heard each server.
    for server in &status.servers {
        if let Some(ms) = server.heard_ms_ago {
            gauge!("tessera_server_heard_seconds", "coordinator" => id.clone(), "server" => server.id.0.to_string())
                .set(ms as f64 / 1000.0);
        }
    }
}
