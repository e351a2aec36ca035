//! The configuration this server acts on, and the state every task shares.
//!
//! The configuration is persisted in `<data_dir>/configuration` (postcard, replaced
//! atomically: write a temporary file, fsync, rename, fsync the directory). It is the source
//! of truth for which spaces exist: on start, storage spaces it does not list (an add-space
//! that crashed before it was acknowledged) are dropped, and spaces it lists that storage lacks
//! are created.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use tessera_geometry::Tessellation;
use tessera_protocol::{Configuration, ErrorReply, ServerInfo, ServerState, SpaceConfig, Status};
use tessera_storage::{StorageError, Store};
use tessera_types::{Epoch, ServerId};

use crate::cluster::ChainSender;
use crate::writer::WriteSender;

/// The id of a single server. The cluster work gives servers ids from the coordinator.
pub const SINGLE_SERVER_ID: ServerId = ServerId(1);

const CONFIG_FILE: &str = "configuration";

/// Why a server could not start or had to stop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("storage: {0}")]
    Storage(#[from] StorageError),
    #[error("configuration file {path} is corrupt: {reason}")]
    CorruptConfig { path: PathBuf, reason: String },
    /// Joining the cluster failed (no coordinator answered, a bad advertised address, ...).
    #[error("cluster: {0}")]
    Cluster(String),
}

/// A space as the server serves it: its configuration and its precomputed tessellations.
#[derive(Debug)]
pub struct ServedSpace {
    pub config: SpaceConfig,
    pub tessellations: Vec<Tessellation>,
    /// This server, to tell which regions of the space it owns.
    pub me: ServerId,
}

impl ServedSpace {
    /// Whether this server holds `region` of `subspace`.
    pub fn owns(&self, subspace: tessera_types::SubspaceId, region: tessera_geometry::RegionIndex) -> bool {
        self.config.replicas_of(subspace, region).contains(&self.me)
    }

    /// The point leader of `key`: the head of its key region's replica set.
    pub fn point_leader(&self, key: &tessera_types::Value) -> ServerId {
        let region = tessera_geometry::key_region(&self.tessellations[0], key);
        self.config.replicas_of(tessera_types::SubspaceId::KEY, region)[0]
    }
}

/// One consistent view: a configuration and the spaces derived from it, swapped as a whole.
#[derive(Debug)]
pub struct View {
    pub config: Arc<Configuration>,
    pub spaces: HashMap<String, Arc<ServedSpace>>,
}

impl View {
    pub fn new(config: Configuration, me: ServerId) -> View {
        let spaces = config
            .spaces
            .iter()
            .map(|s| {
                let served = ServedSpace { tessellations: s.tessellations(), config: s.clone(), me };
                (s.schema.name.clone(), Arc::new(served))
            })
            .collect();
        View { config: Arc::new(config), spaces }
    }

    pub fn epoch(&self) -> Epoch {
        self.config.epoch
    }

    pub fn space(&self, name: &str) -> Result<Arc<ServedSpace>, ErrorReply> {
        self.spaces
            .get(name)
            .cloned()
            .ok_or_else(|| ErrorReply::new(Status::UnknownSpace, format!("no space named {name:?}")))
    }
}

/// Where writes go: the standalone write loop, or the chain loop of a cluster server.
#[derive(Clone)]
pub enum Writes {
    Standalone(WriteSender),
    Cluster(ChainSender),
}

pub struct Shared {
    pub data_dir: PathBuf,
    pub store: Arc<Store>,
    pub me: ServerId,
    view: RwLock<Arc<View>>,
    pub writes: Writes,
    shutting_down: AtomicBool,
}

impl Shared {
    pub fn new(data_dir: PathBuf, store: Arc<Store>, me: ServerId, config: Configuration, writes: Writes) -> Shared {
        Shared {
            data_dir,
            store,
            me,
            view: RwLock::new(Arc::new(View::new(config, me))),
            writes,
            shutting_down: AtomicBool::new(false),
        }
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self.writes, Writes::Cluster(_))
    }

    /// The current view. Cheap: one lock and one reference count.
    pub fn view(&self) -> Arc<View> {
        self.view.read().expect("view lock poisoned").clone()
    }

    /// Persists `config` and then makes it current. Only the write loop calls this, so
    /// configurations change in one order.
    pub fn install(&self, config: Configuration) -> Result<(), ServerError> {
        assert!(config.epoch > self.view().epoch(), "epochs strictly increase");
        save_config(&self.data_dir, &config)?;
        *self.view.write().expect("view lock poisoned") = Arc::new(View::new(config, self.me));
        Ok(())
    }

    pub fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        match &self.writes {
            Writes::Standalone(w) => w.close(),
            Writes::Cluster(c) => c.close(),
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
}

pub fn save_config(dir: &Path, config: &Configuration) -> Result<(), ServerError> {
    let bytes = postcard::to_allocvec(config).expect("a configuration always encodes");
    let tmp = dir.join(format!("{CONFIG_FILE}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, dir.join(CONFIG_FILE))?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

pub fn load_config(dir: &Path) -> Result<Option<Configuration>, ServerError> {
    let path = dir.join(CONFIG_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => postcard::from_bytes(&bytes)
            .map(Some)
            .map_err(|e| ServerError::CorruptConfig { path, reason: e.to_string() }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A cluster server's start: makes storage match the coordinators' `config` (dropping the
/// spaces it no longer lists, or lists under another id: dropped and created again while
/// this server was down) and persists it.
pub fn reconcile(dir: &Path, store: &Store, config: &Configuration) -> Result<(), ServerError> {
    let saved = load_config(dir)?;
    for stored in store.spaces() {
        let now = config.space(&stored.name);
        let before = saved.as_ref().and_then(|c| c.space(&stored.name));
        let same = match (now, before) {
            (Some(n), Some(b)) => n.id == b.id,
            (Some(n), None) => n.schema == stored,
            (None, _) => false,
        };
        if !same {
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
    save_config(dir, config)
}

/// Loads the persisted configuration (or makes the first one), reconciles storage with it,
/// and records this server's address. Returns the configuration to serve.
pub fn recover(dir: &Path, store: &Store, address: SocketAddr) -> Result<Configuration, ServerError> {
    let mut config = load_config(dir)?.unwrap_or(Configuration {
        epoch: Epoch(0),
        servers: vec![],
        spaces: vec![],
    });
    for stored in store.spaces() {
        if config.space(&stored.name).is_none_or(|s| s.schema != stored) {
            tracing::warn!(space = %stored.name, "dropping a space the configuration does not list (an unacknowledged add-space)");
            store.drop_space(&stored.name)?;
        }
    }
    let stored: Vec<String> = store.spaces().into_iter().map(|s| s.name).collect();
    for space in &config.spaces {
        if !stored.contains(&space.schema.name) {
            store.create_space(&space.schema)?;
        }
    }
    let me = ServerInfo { id: SINGLE_SERVER_ID, address: address.to_string(), state: ServerState::Available };
    if config.servers != [me.clone()] {
        config.servers = vec![me];
        config.epoch = Epoch(config.epoch.0 + 1);
        save_config(dir, &config)?;
    }
    Ok(config)
}
