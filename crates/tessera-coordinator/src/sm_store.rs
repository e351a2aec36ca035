//! The Raft state machine around [`ClusterState`], and its snapshots.
//!
//! The state lives in memory; what makes it durable is the log plus the last snapshot. A
//! snapshot (`<data>/raft/snapshot`: checksum, then postcard of its metadata and the
//! `ClusterState` in postcard, tagged with the data format, [`encode_state`]) is written and fsynced when openraft builds one or installs one sent by
//! the leader. On start, the state is the snapshot's, and openraft replays the log entries after
//! it up to the last known commit index.
//!
//! Every apply that changes the epoch publishes the new [`Configuration`] on a watch channel,
//! which is what `GetConfig` and `WaitConfig` read, and the whole [`ClusterState`] on another
//! (heartbeats check tokens and incarnations against it; the failure detector follows it).

use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::RaftStateMachine;
use openraft::{AnyError, EntryPayload, RaftSnapshotBuilder, StorageIOError};
use serde::{Deserialize, Serialize};
use tessera_protocol::data_format::{self, DataKind, Tagged};
use tessera_protocol::Configuration;
use tokio::sync::watch;

use crate::format1;
use crate::fsutil::{blocking, invalid, read_checked, write_atomic};
use crate::raft_types::{
    ApplyResult, Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};
use crate::state::ClusterState;

const SNAPSHOT: &str = "snapshot";

#[derive(Clone, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta,
    /// The [`ClusterState`], by [`encode_state`]. Followers get these bytes as they are.
    data: Vec<u8>,
}

/// A cluster state as snapshots hold it: postcard, tagged with this build's data format.
fn encode_state(state: &ClusterState) -> Result<Vec<u8>, postcard::Error> {
    let body = postcard::to_allocvec(state)?;
    Ok(data_format::tag(
        Tagged::ClusterState,
        DataKind::Coordinator.current(),
        &body,
    ))
}

/// A snapshot's cluster state (from this directory, or from the leader), which must be at this
/// build's data format.
fn decode_state(data: &[u8]) -> io::Result<ClusterState> {
    let current = DataKind::Coordinator.current();
    match data_format::untag(Tagged::ClusterState, data) {
        Some((format, body)) if format == current => postcard::from_bytes(body).map_err(invalid),
        Some((format, _)) => Err(invalid(format!(
            "a cluster state of data format {format}; this build reads {current}"
        ))),
        None => Err(invalid(format!(
            "an untagged cluster state (data format 1); this build reads {current}"
        ))),
    }
}

/// The migration of a coordinator's data directory from format 1 to 2: the snapshot's cluster
/// state gains its tag and its spaces their (empty) resting places. Log entries and the vote
/// are unchanged. Safe to run again after a crash: a tagged state is done already.
pub(crate) fn migrate_1_to_2(data_dir: &Path) -> io::Result<()> {
    let dir = data_dir.join("raft");
    let Some(bytes) = read_checked(&dir.join(SNAPSHOT))? else {
        return Ok(());
    };
    let mut snapshot: StoredSnapshot = postcard::from_bytes(&bytes).map_err(invalid)?;
    if data_format::untag(Tagged::ClusterState, &snapshot.data).is_some() {
        return Ok(());
    }
    let old: format1::ClusterState1 = postcard::from_bytes(&snapshot.data).map_err(invalid)?;
    snapshot.data = encode_state(&ClusterState::from(old)).map_err(invalid)?;
    let body = postcard::to_allocvec(&snapshot).map_err(invalid)?;
    write_atomic(&dir, SNAPSHOT, &body, true)
}

/// A snapshot file holding `state` as format 1 wrote it, for the migration's tests.
#[cfg(test)]
pub(crate) fn write_format_1_snapshot(
    data_dir: &Path,
    state: &format1::ClusterState1,
) -> io::Result<()> {
    let dir = data_dir.join("raft");
    std::fs::create_dir_all(&dir)?;
    let snapshot = StoredSnapshot {
        meta: SnapshotMeta::default(),
        data: postcard::to_allocvec(state).map_err(invalid)?,
    };
    let body = postcard::to_allocvec(&snapshot).map_err(invalid)?;
    write_atomic(&dir, SNAPSHOT, &body, true)
}

/// The cluster state of the snapshot in `data_dir`, for the migration's tests.
#[cfg(test)]
pub(crate) fn snapshot_state(data_dir: &Path) -> io::Result<ClusterState> {
    let bytes = read_checked(&data_dir.join("raft").join(SNAPSHOT))?
        .ok_or_else(|| invalid("no snapshot"))?;
    let snapshot: StoredSnapshot = postcard::from_bytes(&bytes).map_err(invalid)?;
    decode_state(&snapshot.data)
}

struct Applied {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    state: ClusterState,
}

struct Shared {
    dir: PathBuf,
    /// [`ClusterState::plan_transfers`] for every state this store holds: a rule of this
    /// coordinator, which snapshots do not carry.
    plan_transfers: bool,
    applied: Mutex<Applied>,
    current: Mutex<Option<StoredSnapshot>>,
    published: watch::Sender<Arc<Configuration>>,
    published_state: watch::Sender<Arc<ClusterState>>,
    /// Serializes snapshot file writes (builds and installs).
    writing: tokio::sync::Mutex<()>,
    builds: AtomicU64,
}

/// The state machine handed to openraft. Clones share everything.
#[derive(Clone)]
pub(crate) struct StateMachineStore {
    shared: Arc<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl StateMachineStore {
    /// Opens the state machine in `dir`, starting from the snapshot there if there is one.
    /// `plan_transfers`: whether its commands plan state transfers (`ClusterState::plan_transfers`).
    #[allow(clippy::type_complexity)]
    pub(crate) fn open(
        dir: &Path,
        plan_transfers: bool,
    ) -> io::Result<(
        StateMachineStore,
        watch::Receiver<Arc<Configuration>>,
        watch::Receiver<Arc<ClusterState>>,
    )> {
        std::fs::create_dir_all(dir)?;
        let current = read_checked(&dir.join(SNAPSHOT))?
            .map(|b| postcard::from_bytes::<StoredSnapshot>(&b).map_err(invalid))
            .transpose()?;
        let mut applied = match &current {
            Some(s) => Applied {
                last_applied: s.meta.last_log_id,
                membership: s.meta.last_membership.clone(),
                state: decode_state(&s.data)?,
            },
            None => Applied {
                last_applied: None,
                membership: StoredMembership::default(),
                state: ClusterState::default(),
            },
        };
        applied.state.plan_transfers = plan_transfers;
        tracing::debug!(last_applied = ?applied.last_applied, epoch = applied.state.epoch.0, "opened the state machine");
        let (published, rx) = watch::channel(Arc::new(applied.state.configuration()));
        let (published_state, state_rx) = watch::channel(Arc::new(applied.state.clone()));
        let shared = Shared {
            dir: dir.to_path_buf(),
            plan_transfers,
            applied: Mutex::new(applied),
            current: Mutex::new(current),
            published,
            published_state,
            writing: tokio::sync::Mutex::new(()),
            builds: AtomicU64::new(0),
        };
        Ok((
            StateMachineStore {
                shared: Arc::new(shared),
            },
            rx,
            state_rx,
        ))
    }

    /// Persists `snapshot` and makes it the current one, unless a newer one is current already.
    async fn store(&self, snapshot: StoredSnapshot) -> Result<(), StorageError> {
        let signature = snapshot.meta.signature();
        let _writing = self.shared.writing.lock().await;
        if lock(&self.shared.current)
            .as_ref()
            .is_some_and(|c| c.meta.last_log_id > snapshot.meta.last_log_id)
        {
            return Ok(());
        }
        let body = postcard::to_allocvec(&snapshot).map_err(|e| {
            StorageIOError::write_snapshot(Some(signature.clone()), AnyError::new(&e))
        })?;
        let dir = self.shared.dir.clone();
        blocking(move || write_atomic(&dir, SNAPSHOT, &body, true))
            .await
            .map_err(|e| StorageIOError::write_snapshot(Some(signature), AnyError::new(&e)))?;
        *lock(&self.shared.current) = Some(snapshot);
        Ok(())
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let (last_applied, membership, data) = {
            let applied = lock(&self.shared.applied);
            let data = encode_state(&applied.state)
                .map_err(|e| StorageIOError::read_state_machine(AnyError::new(&e)))?;
            (applied.last_applied, applied.membership.clone(), data)
        };
        let n = self.shared.builds.fetch_add(1, Ordering::Relaxed);
        let snapshot_id = match last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id, l.index, n),
            None => format!("none-{n}"),
        };
        let meta = SnapshotMeta {
            last_log_id: last_applied,
            last_membership: membership,
            snapshot_id,
        };
        tracing::info!(snapshot = %meta, bytes = data.len(), "built a snapshot");
        self.store(StoredSnapshot {
            meta: meta.clone(),
            data: data.clone(),
        })
        .await?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = StateMachineStore;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let applied = lock(&self.shared.applied);
        Ok((applied.last_applied, applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<ApplyResult>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut results = Vec::new();
        let mut applied = lock(&self.shared.applied);
        let epoch_before = applied.state.epoch;
        for entry in entries {
            applied.last_applied = Some(entry.log_id);
            let outcome = match entry.payload {
                EntryPayload::Blank => None,
                EntryPayload::Normal(command) => {
                    let term = entry.log_id.leader_id.term;
                    let result = applied.state.apply_in_term(command, term);
                    tracing::debug!(log_id = %entry.log_id, ?result, epoch = applied.state.epoch.0, "applied");
                    Some(result)
                }
                EntryPayload::Membership(m) => {
                    applied.membership = StoredMembership::new(Some(entry.log_id), m);
                    None
                }
            };
            results.push(ApplyResult {
                epoch: applied.state.epoch,
                outcome,
            });
        }
        if applied.state.epoch != epoch_before {
            self.shared
                .published_state
                .send_replace(Arc::new(applied.state.clone()));
            self.shared
                .published
                .send_replace(Arc::new(applied.state.configuration()));
        }
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let mut state = decode_state(&data).map_err(|e| {
            StorageIOError::read_snapshot(Some(meta.signature()), AnyError::new(&e))
        })?;
        state.plan_transfers = self.shared.plan_transfers;
        tracing::info!(snapshot = %meta, epoch = state.epoch.0, "installing a snapshot from the leader");
        self.store(StoredSnapshot {
            meta: meta.clone(),
            data,
        })
        .await?;
        let mut applied = lock(&self.shared.applied);
        applied.last_applied = meta.last_log_id;
        applied.membership = meta.last_membership.clone();
        applied.state = state;
        self.shared
            .published_state
            .send_replace(Arc::new(applied.state.clone()));
        self.shared
            .published
            .send_replace(Arc::new(applied.state.configuration()));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        Ok(lock(&self.shared.current).as_ref().map(|s| Snapshot {
            meta: s.meta.clone(),
            snapshot: Box::new(Cursor::new(s.data.clone())),
        }))
    }
}
