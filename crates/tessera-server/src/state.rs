//! The state every task shares, and the configuration persisted in the data directory.
//!
//! The configuration is persisted in `<data_dir>/configuration` (postcard with the data
//! format's tag, `tessera_protocol::data_format::tag`; replaced atomically: write a temporary
//! file, fsync, rename, fsync the directory). It is the source of truth for which spaces exist:
//! on start, storage spaces it does not list (an add-space that crashed before it was
//! acknowledged) are dropped, and spaces it lists that storage lacks are created.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tessera_protocol::data_format::{self, DataKind, Tagged};
use tessera_protocol::format1;
use tessera_protocol::handshake::Dialer;
use tessera_protocol::tls::ServerTls;

use crate::observe::Meter;
use tessera_protocol::{Configuration, ErrorReply, Gate, ServerInfo, ServerState, Status};
use tessera_replication::ReadGates;
use tessera_storage::{StorageError, Store};
use tessera_types::{Epoch, ServerId, SpaceSchema, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::errors::ServerError;
use crate::lease::Lease;
use crate::queue::ChainSender;
use crate::statistics::KeptStatistics;
use crate::trace::Trace;
use crate::view::{Mode, View};

/// The id of a standalone server (a cluster server gets its id from the coordinators).
pub const SINGLE_SERVER_ID: ServerId = ServerId(1);

const CONFIG_FILE: &str = "configuration";

pub struct Shared {
    pub data_dir: PathBuf,
    pub store: Arc<Store>,
    pub me: ServerId,
    view: RwLock<Arc<View>>,
    /// Odd while the chain loop installs a configuration, which may clear regions this server
    /// loses before the new view is in place; bumped at the start and at the end of each. A
    /// read checked against one view answers only if no install began or ended while it read
    /// storage (a sequence lock): otherwise it may have read a region cleared under it.
    installs: AtomicU64,
    /// The chain loop: the only way to write.
    pub chain: ChainSender,
    /// Set by [`Shared::shutdown`]: read on every request (an atomic, where the token below
    /// takes a lock).
    shutting_down: AtomicBool,
    /// Cancelled by [`Shared::shutdown`]: what the accept loop and each connection's reader
    /// wait on, to stop taking requests and let the answers in flight go out.
    stopping: CancellationToken,
    /// The stages of a stop (see `Server::stop`): the chain loop answered what clients wait
    /// for; it may return (until then it goes on as a hop of its peers' chains); this server
    /// announced a planned stop, so the heartbeats do not register it again.
    drained: AtomicBool,
    released: AtomicBool,
    resting: AtomicBool,
    storage_failed: Arc<AtomicBool>,
    /// This server's lease with the coordinators: while it has lapsed, the server answers no
    /// get, search or write (another server may lead its keys by now). Always valid standalone.
    pub lease: Arc<Lease>,
    /// The shapes of the requests served, for `tessera trace`.
    pub trace: Trace,
    /// Each space's statistics as last read (`Request::Statistics`).
    pub statistics: KeptStatistics,
    /// Who may send what (`tessera_protocol::auth`).
    pub gate: Arc<Gate>,
    /// How this server connects to its peers (proving the cluster secret, if there is one).
    pub dialer: Dialer,
    /// Served on the listener when set.
    pub tls: Option<ServerTls>,
    /// This server's metrics.
    pub meter: Meter,
    /// The keys with updates pending at this server's key regions, and the reads by key
    /// waiting for them (`tessera_replication::read_gate`): the chain loop keeps it, gets
    /// consult it.
    read_gates: Mutex<ReadGates<oneshot::Sender<()>>>,
}

impl Shared {
    pub fn new(
        data_dir: PathBuf,
        store: Arc<Store>,
        me: ServerId,
        mode: Mode,
        config: Configuration,
        chain: ChainSender,
        (lease, gate, dialer, tls): (Arc<Lease>, Arc<Gate>, Dialer, Option<ServerTls>),
    ) -> Shared {
        Shared {
            data_dir,
            store,
            me,
            view: RwLock::new(Arc::new(View::new(Arc::new(config), me, mode))),
            installs: AtomicU64::new(0),
            chain,
            shutting_down: AtomicBool::new(false),
            stopping: CancellationToken::new(),
            drained: AtomicBool::new(false),
            released: AtomicBool::new(false),
            resting: AtomicBool::new(false),
            storage_failed: Arc::new(AtomicBool::new(false)),
            lease,
            trace: Trace::default(),
            statistics: KeptStatistics::default(),
            gate,
            dialer,
            tls,
            meter: Meter::new(me),
            read_gates: Mutex::new(ReadGates::new()),
        }
    }

    /// The read gates, for the chain loop to keep (see [`Shared::keys_readable`]).
    pub fn read_gates(&self) -> std::sync::MutexGuard<'_, ReadGates<oneshot::Sender<()>>> {
        self.read_gates.lock().expect("read gates poisoned")
    }

    /// Waits until reads of `keys` may answer from this server's storage: at once unless
    /// updates of a key are pending at its key region here, else once every version pending
    /// now has settled (see `tessera_replication::read_gate`). A read that waited checks the
    /// lease again: the wait may have been long.
    pub async fn keys_readable(&self, space: u64, keys: &[Value]) -> Result<(), ErrorReply> {
        let mut waited = false;
        for key in keys {
            let (tx, rx) = oneshot::channel();
            let admitted = self.read_gates().admit(space, key, tx);
            if admitted.is_some() {
                continue;
            }
            waited = true;
            rx.await.map_err(|_| {
                ErrorReply::new(
                    Status::Unavailable,
                    "this server left its chains while a read waited for an update of the key",
                )
            })?;
        }
        if waited && !self.lease.is_valid() {
            return Err(crate::lease::lapsed_error());
        }
        Ok(())
    }

    /// The current view. Cheap: one lock and one reference count.
    pub fn view(&self) -> Arc<View> {
        self.view.read().expect("view lock poisoned").clone()
    }

    pub fn mode(&self) -> Mode {
        self.view().mode
    }

    /// Taken before a read looks at the view; see [`Shared::read_still_valid`].
    pub fn read_stamp(&self) -> u64 {
        self.installs.load(Ordering::SeqCst)
    }

    /// Whether what a read that took `stamp` found in storage still answers for the view it
    /// was checked against: no configuration install overlapped it.
    pub fn read_still_valid(&self, stamp: u64) -> bool {
        stamp.is_multiple_of(2) && self.installs.load(Ordering::SeqCst) == stamp
    }

    /// The refusal of a read that overlapped an install: the client tries again, in the new
    /// configuration.
    pub fn read_overlapped_install(&self) -> ErrorReply {
        ErrorReply::new(
            Status::StaleEpoch,
            "this server changed configuration while it read; retry",
        )
    }

    /// The chain loop starts installing a configuration (see `installs`).
    pub fn begin_install(&self) {
        let before = self.installs.fetch_add(1, Ordering::SeqCst);
        assert!(before.is_multiple_of(2), "installs do not overlap");
    }

    /// The chain loop finished installing a configuration: its view is in place.
    pub fn end_install(&self) {
        let before = self.installs.fetch_add(1, Ordering::SeqCst);
        assert!(!before.is_multiple_of(2), "an install ends after it began");
    }

    /// Persists `config` and then makes it current. Only the chain loop calls this, so
    /// configurations change in one order.
    pub fn install(&self, config: Arc<Configuration>) -> Result<Arc<View>, ServerError> {
        save_config(&self.data_dir, &config)?;
        Ok(self.swap_view(config))
    }

    /// Makes `config` current without persisting it: for a server whose storage failed, which
    /// keeps the configuration it last acted on on disk but routes clients by the newest.
    pub fn swap_view(&self, config: Arc<Configuration>) -> Arc<View> {
        let mut view = self.view.write().expect("view lock poisoned");
        assert!(config.epoch > view.epoch(), "epochs strictly increase");
        *view = Arc::new(View::new(config, self.me, view.mode));
        Arc::clone(&view)
    }

    /// Starts the stop: requests are refused from now on (`Unavailable`, which clients retry
    /// elsewhere), the chain loop answers what it has and returns, and the connections close
    /// once quiet.
    pub fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.stopping.cancel();
        self.chain.close();
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Set by a stopping chain loop once the writes clients wait for are answered.
    pub fn mark_drained(&self) {
        self.drained.store(true, Ordering::SeqCst);
    }

    pub fn is_drained(&self) -> bool {
        self.drained.load(Ordering::SeqCst)
    }

    /// Lets a stopping chain loop return once drained: nothing is left for it to do as a hop
    /// of other servers' chains (they act on a configuration without this server, or the
    /// whole cluster stops).
    pub fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
    }

    pub fn is_released(&self) -> bool {
        self.released.load(Ordering::SeqCst)
    }

    /// This server announces a planned stop: heartbeats answered `Resting` are expected, and
    /// do not make it register again.
    pub fn rest_on_purpose(&self) {
        self.resting.store(true, Ordering::SeqCst);
    }

    pub fn rests_on_purpose(&self) -> bool {
        self.resting.load(Ordering::SeqCst)
    }

    /// Resolves once [`Shared::shutdown`] was called.
    pub async fn stopped(&self) {
        self.stopping.cancelled().await;
    }

    /// Whether a write to storage failed: the server then refuses every write (fail-stop), and
    /// its chains must go on without it.
    pub fn storage_failed(&self) -> bool {
        self.storage_failed.load(Ordering::SeqCst)
    }

    /// Set by the chain loop when it fail-stops: the lease ends at once, and the heartbeats
    /// tell the coordinators, who take this server out of every chain.
    pub fn set_storage_failed(&self) {
        self.storage_failed.store(true, Ordering::SeqCst);
        self.lease.end();
    }

    /// The flag the heartbeats report.
    pub fn storage_failed_flag(&self) -> Arc<AtomicBool> {
        self.storage_failed.clone()
    }
}

/// Persists `config` durably (a temporary file, fsynced, renamed), tagged with this build's
/// data format (`tessera_protocol::data_format::tag`).
pub fn save_config(dir: &Path, config: &Configuration) -> Result<(), ServerError> {
    let body = postcard::to_allocvec(config).expect("a configuration always encodes");
    let bytes = data_format::tag(Tagged::Configuration, DataKind::Server.current(), &body);
    let tmp = dir.join(format!("{CONFIG_FILE}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, dir.join(CONFIG_FILE))?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// The configuration persisted in `dir`, if any. The data directory is at this build's format
/// (`data_format::open` migrated it), so the file is tagged with it.
pub fn load_config(dir: &Path) -> Result<Option<Configuration>, ServerError> {
    let path = dir.join(CONFIG_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let corrupt = |reason: String| ServerError::CorruptConfig {
        path: path.clone(),
        reason,
    };
    let current = DataKind::Server.current();
    match data_format::untag(Tagged::Configuration, &bytes) {
        Some((format, body)) if format == current => postcard::from_bytes(body)
            .map(Some)
            .map_err(|e| corrupt(e.to_string())),
        Some((format, _)) => Err(corrupt(format!(
            "tagged data format {format}, but the directory is at format {current}"
        ))),
        None => Err(corrupt(format!(
            "untagged (data format 1), but the directory is at format {current}"
        ))),
    }
}

/// The migration of a server's data directory from format 1 to 2: the configuration file
/// gains its tag and its spaces their (empty) resting places. The store is unchanged. Safe to
/// run again after a crash: a tagged file is done already.
pub fn migrate_1_to_2(dir: &Path) -> std::io::Result<()> {
    let path = dir.join(CONFIG_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if data_format::untag(Tagged::Configuration, &bytes).is_some() {
        return Ok(());
    }
    let old: format1::Configuration1 = postcard::from_bytes(&bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{}: not a configuration of data format 1: {e}",
                path.display()
            ),
        )
    })?;
    save_config(dir, &Configuration::from(old)).map_err(|e| match e {
        ServerError::Io(e) => e,
        other => std::io::Error::other(other.to_string()),
    })
}

/// A cluster server's start: makes storage match the coordinators' `config` (dropping the
/// spaces it no longer lists, or lists under another id: dropped and created again while
/// this server was down). `saved` is the configuration persisted before. Regions are the
/// state machine's: it clears those `saved` keeps this server in and `config` does not
/// (`SpaceConfig::keeps`: a region it rests in, or is being transferred back into, keeps its
/// data, and the transfer writes only what changed). It does not persist `config`: the chain
/// loop does, once those regions are durably cleared (a crash in between would otherwise
/// start again from `config` and never clear them).
pub fn reconcile(
    store: &Store,
    saved: Option<&Configuration>,
    config: &Configuration,
) -> Result<(), ServerError> {
    for stored in store.spaces() {
        let now = config.space(&stored.name);
        let before = saved.and_then(|c| c.space(&stored.name));
        let same = match (now, before) {
            (Some(n), Some(b)) => n.id == b.id,
            (Some(n), None) => n.schema == stored,
            (None, _) => false,
        };
        if same && !follow_schema(store, &stored, &now.expect("same space").schema)? {
            tracing::info!(space = %stored.name, "dropping storage the configuration's schema cannot be made from");
            store.drop_space(&stored.name)?;
        } else if !same {
            tracing::info!(space = %stored.name, "dropping storage of a space the configuration no longer has");
            store.drop_space(&stored.name)?;
        }
    }
    let stored: Vec<String> = store.spaces().into_iter().map(|s| s.name).collect();
    for space in &config.spaces {
        if !stored.contains(&space.schema.name) {
            store.create_space(&space.schema)?;
        }
    }
    Ok(())
}

/// Brings a space's storage, recorded with the schema `stored`, to the configuration's
/// `schema`: a stop between altering storage and persisting the configuration that altered it
/// leaves them apart (subspaces added or dropped, key regions split, while the server was
/// down or just before it stopped). True when storage now follows `schema`; false when it
/// cannot (the caller drops it).
fn follow_schema(
    store: &Store,
    stored: &SpaceSchema,
    schema: &SpaceSchema,
) -> Result<bool, ServerError> {
    if stored == schema {
        return Ok(true);
    }
    match store.alter_space(schema) {
        Ok(()) => {
            tracing::info!(space = %schema.name, "storage brought to the configuration's schema");
            Ok(true)
        }
        Err(StorageError::Invalid(_)) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// A standalone server's start: loads the persisted configuration (or makes the first one),
/// reconciles storage with it, and records this server's address. Returns the configuration
/// to serve.
pub fn recover(
    dir: &Path,
    store: &Store,
    address: SocketAddr,
) -> Result<Configuration, ServerError> {
    let mut config = load_config(dir)?.unwrap_or(Configuration {
        model: None,
        epoch: Epoch(0),
        servers: vec![],
        spaces: vec![],
    });
    for stored in store.spaces() {
        let kept = match config.space(&stored.name) {
            Some(space) => follow_schema(store, &stored, &space.schema)?,
            None => false,
        };
        if !kept {
            tracing::warn!(space = %stored.name, "dropping a space the configuration does not list (an unacknowledged add-space), or whose storage cannot follow its schema");
            store.drop_space(&stored.name)?;
        }
    }
    let stored: Vec<String> = store.spaces().into_iter().map(|s| s.name).collect();
    for space in &config.spaces {
        if !stored.contains(&space.schema.name) {
            store.create_space(&space.schema)?;
        }
    }
    // Every start is a new epoch, as a restarted server is in a cluster: a point leader's
    // versions start at its epoch (`Version::first_in`), so a key deleted before the restart
    // and written after it never gets a version it had before.
    let me = ServerInfo {
        id: SINGLE_SERVER_ID,
        address: address.to_string(),
        state: ServerState::Available,
    };
    config.servers = vec![me];
    config.epoch = Epoch(config.epoch.0 + 1);
    save_config(dir, &config)?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_protocol::SpaceConfig;
    use tessera_storage::{ObjectWrite, StoreOptions};
    use tessera_types::{parse_space, KeySplit, Object, StoredObject, Value, Version};

    /// A configuration file of data format 1 (untagged, spaces without resting places) is
    /// rewritten once, tagged, and loads as the same configuration; running the step again (a
    /// crash before FORMAT moved on) changes nothing.
    #[test]
    fn a_format_1_configuration_file_migrates_once() {
        let dir = tempfile::tempdir().unwrap();
        let schema = parse_space("space h key id attributes string city subspace city").unwrap();
        let space = SpaceConfig::owned_by(2, schema, &[ServerId(1), ServerId(2)]);
        let old = format1::Configuration1 {
            epoch: Epoch(9),
            servers: vec![],
            spaces: vec![format1::SpaceConfig1 {
                id: space.id,
                schema: space.schema.clone(),
                replicas: space.replicas.clone(),
                transfers: vec![],
                joined: vec![],
                build: None,
                adaptations: vec![],
                shapes: vec![],
                shape_entries: vec![],
                formula_entries: vec![],
            }],
            model: None,
        };
        let path = dir.path().join(CONFIG_FILE);
        std::fs::write(&path, postcard::to_allocvec(&old).unwrap()).unwrap();
        assert!(load_config(dir.path()).is_err(), "untagged at format 2");
        migrate_1_to_2(dir.path()).unwrap();
        let migrated = std::fs::read(&path).unwrap();
        migrate_1_to_2(dir.path()).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), migrated);
        let loaded = load_config(dir.path()).unwrap().unwrap();
        assert_eq!(loaded.epoch, Epoch(9));
        assert_eq!(loaded.spaces, vec![space]);
    }

    /// A standalone server stopped after storage took a split and before the configuration
    /// that split was persisted: at its start storage follows the persisted configuration
    /// back (keys moved back, nothing dropped), and a cluster server's storage follows a
    /// configuration that split while it was down.
    #[test]
    fn storage_follows_the_configuration_at_a_start() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("data"), StoreOptions::default()).unwrap();
        let ordered = parse_space(
            "space u key int id attributes int v create 2 partitions placement ordered",
        )
        .unwrap();
        let mut split = ordered.clone();
        split.key_splits.push(KeySplit {
            region: 1,
            at: Value::Int(50),
            epoch: 2,
        });
        store.create_space(&ordered).unwrap();
        let puts: Vec<ObjectWrite> = (0..100)
            .map(|k| ObjectWrite::Put {
                space: "u".into(),
                old: None,
                new: StoredObject {
                    version: Version(1),
                    object: Object {
                        values: vec![Value::Int(k), Value::Int(k * 10)],
                    },
                },
            })
            .collect();
        store.commit(&puts).unwrap();
        let all_there = |store: &Store| {
            (0..100).all(|k| {
                store
                    .get("u", &Value::Int(k))
                    .unwrap()
                    .map(|s| s.object.values[1].clone())
                    == Some(Value::Int(k * 10))
            })
        };
        let config = |schema: &SpaceSchema| Configuration {
            model: None,
            epoch: Epoch(1),
            servers: vec![],
            spaces: vec![SpaceConfig::owned_by(
                1,
                schema.clone(),
                &[SINGLE_SERVER_ID],
            )],
        };
        // Standalone: storage split, the persisted configuration did not.
        store.alter_space(&split).unwrap();
        save_config(dir.path(), &config(&ordered)).unwrap();
        recover(dir.path(), &store, "127.0.0.1:1".parse().unwrap()).unwrap();
        assert_eq!(store.spaces(), vec![ordered.clone()]);
        assert!(all_there(&store));
        // Cluster: the coordinators' configuration split while the server was down.
        let mut now = config(&split);
        now.spaces[0].replicas[0].push(vec![SINGLE_SERVER_ID]);
        reconcile(&store, Some(&config(&ordered)), &now).unwrap();
        assert_eq!(store.spaces(), vec![split]);
        assert!(all_there(&store));
    }
}
