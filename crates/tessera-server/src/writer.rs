//! The write loop: point leader and group commit.
//!
//! One thread owns every write. It takes whatever requests have queued up (at most
//! [`BATCH_JOBS_MAX`]), evaluates each against the key's latest value — the committed value,
//! or the value an earlier request of the same batch left — and commits all their storage
//! writes as one atomic batch, fsynced under the default policy. Only then are the requests
//! answered, so an acknowledged write is on disk, and no reply (a failed condition included)
//! describes a state that a crash could still erase (DESIGN §5.6). While one batch is on disk
//! the next one queues: the fsync cost is shared by every write that arrives meanwhile.
//!
//! Because one thread orders every write, each key's updates are linearized in the order the
//! loop takes them; versions increase by one per update of a key.

use std::collections::BTreeMap;
use std::sync::Arc;

use tessera_protocol::{Configuration, ErrorReply, Response, SpaceConfig, Status, WriteMode};
use tessera_storage::{ObjectWrite, StorageError, StoredObject};
use tessera_types::constants::OBJECT_BYTES_MAX;
use tessera_replication::{evaluate, KeyWrite};
use tessera_types::funcall::apply_all;
use tessera_types::{CheckedFuncall, CheckedPredicate, Epoch, SpaceSchema, Value, Version};
use tokio::sync::mpsc;

use crate::connection::Replier;
use crate::reads;
use crate::state::{ServedSpace, Shared};

/// Most requests taken into one group commit. Bounds the latency a request can add to the
/// others of its batch.
pub const BATCH_JOBS_MAX: usize = 1024;

/// Requests queued for the write loop before connections wait (backpressure).
pub const QUEUE_JOBS_MAX: usize = 8192;

/// Writes per commit in a group delete or update.
const GROUP_CHUNK: usize = 1024;

/// A write, validated against the schema by the connection that received it.
pub enum WriteJob {
    Put {
        space: Arc<ServedSpace>,
        key: Value,
        mode: WriteMode,
        conditions: Vec<CheckedPredicate>,
        funcalls: Vec<CheckedFuncall>,
    },
    Del { space: Arc<ServedSpace>, key: Value, conditions: Vec<CheckedPredicate> },
    GroupDel { space: Arc<ServedSpace>, predicates: Vec<CheckedPredicate> },
    GroupUpdate { space: Arc<ServedSpace>, predicates: Vec<CheckedPredicate>, funcalls: Vec<CheckedFuncall> },
    AddSpace { schema: SpaceSchema },
    RmSpace { name: String },
}

pub struct WriteRequest {
    pub job: WriteJob,
    pub reply: Replier,
}

enum Message {
    Write(WriteRequest),
    Stop,
}

/// The connections' handle on the write loop.
#[derive(Clone)]
pub struct WriteSender(mpsc::Sender<Message>);

impl WriteSender {
    /// Queues a write; waits while the queue is full. Fails only when the loop has stopped.
    pub async fn send(&self, request: WriteRequest) -> Result<(), WriteRequest> {
        self.0.send(Message::Write(request)).await.map_err(|e| match e.0 {
            Message::Write(r) => r,
            Message::Stop => unreachable!(),
        })
    }

    /// Asks the loop to stop after the batch it is working on.
    pub fn close(&self) {
        let _ = self.0.try_send(Message::Stop);
    }
}

pub struct WriteReceiver(mpsc::Receiver<Message>);

pub fn channel() -> (WriteSender, WriteReceiver) {
    let (tx, rx) = mpsc::channel(QUEUE_JOBS_MAX);
    (WriteSender(tx), WriteReceiver(rx))
}

pub fn spawn(shared: Arc<Shared>, rx: WriteReceiver) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("tessera-writer".into())
        .spawn(move || WriteLoop { shared, batch: Batch::default() }.run(rx.0))
        .expect("spawning the write loop")
}

#[derive(Default)]
struct Batch {
    /// For every key this batch touched (by space id), its latest write: an index into
    /// `writes`. Indexing, not copying, keeps the common batch (each key once) free of clones.
    overlay: BTreeMap<(u64, Value), usize>,
    writes: Vec<ObjectWrite>,
    replies: Vec<(Replier, Response)>,
}

struct WriteLoop {
    shared: Arc<Shared>,
    batch: Batch,
}

impl WriteLoop {
    fn run(mut self, mut rx: mpsc::Receiver<Message>) {
        let mut jobs = Vec::with_capacity(BATCH_JOBS_MAX);
        loop {
            let Some(first) = rx.blocking_recv() else { return };
            let mut stop = false;
            for message in std::iter::once(first).chain(std::iter::from_fn(|| rx.try_recv().ok())) {
                match message {
                    Message::Write(w) => jobs.push(w),
                    Message::Stop => stop = true,
                }
                if stop || jobs.len() == BATCH_JOBS_MAX {
                    break;
                }
            }
            for WriteRequest { job, reply } in jobs.drain(..) {
                self.on_job(job, reply);
            }
            self.flush();
            if stop || self.shared.is_shutting_down() {
                return;
            }
        }
    }

    fn epoch(&self) -> Epoch {
        self.shared.view().epoch()
    }

    fn on_job(&mut self, job: WriteJob, reply: Replier) {
        let response = match job {
            WriteJob::Put { space, key, mode, conditions, funcalls } => {
                self.on_put(&space, key, mode, &conditions, &funcalls)
            }
            WriteJob::Del { space, key, conditions } => self.on_del(&space, key, &conditions),
            WriteJob::GroupDel { space, predicates } => {
                self.flush();
                self.on_group_del(&space, &predicates)
            }
            WriteJob::GroupUpdate { space, predicates, funcalls } => {
                self.flush();
                self.on_group_update(&space, &predicates, &funcalls)
            }
            WriteJob::AddSpace { schema } => {
                self.flush();
                self.on_add_space(schema)
            }
            WriteJob::RmSpace { name } => {
                self.flush();
                self.on_rm_space(&name)
            }
        };
        match response {
            Ok(r) => self.batch.replies.push((reply, r)),
            Err(e) => self.batch.replies.push((reply, Response::Error(e))),
        }
    }

    /// The space is still the one the request was validated against (not dropped, not
    /// dropped and created again under the same name).
    fn check_current(&self, space: &ServedSpace) -> Result<(), ErrorReply> {
        let view = self.shared.view();
        match view.spaces.get(&space.config.schema.name) {
            Some(s) if s.config.id == space.config.id => Ok(()),
            _ => Err(ErrorReply::new(
                Status::UnknownSpace,
                format!("space {:?} was removed", space.config.schema.name),
            )),
        }
    }

    fn latest(&self, space: &ServedSpace, key: &Value) -> Result<Option<StoredObject>, ErrorReply> {
        if let Some(&at) = self.batch.overlay.get(&(space.config.id, key.clone())) {
            return Ok(match &self.batch.writes[at] {
                ObjectWrite::Put { new, .. } => Some(new.clone()),
                ObjectWrite::Delete { .. } => None,
                ObjectWrite::Entry { .. } | ObjectWrite::ClearRegion { .. } => {
                    unreachable!("the standalone writer writes whole objects")
                }
            });
        }
        self.shared.store.get(&space.config.schema.name, key).map_err(storage_error)
    }

    fn on_put(
        &mut self,
        space: &ServedSpace,
        key: Value,
        mode: WriteMode,
        conditions: &[CheckedPredicate],
        funcalls: &[CheckedFuncall],
    ) -> Result<Response, ErrorReply> {
        let write = KeyWrite::Put { key, mode, conditions: conditions.to_vec(), funcalls: funcalls.to_vec() };
        self.on_key_write(space, write)
    }

    fn on_del(
        &mut self,
        space: &ServedSpace,
        key: Value,
        conditions: &[CheckedPredicate],
    ) -> Result<Response, ErrorReply> {
        self.on_key_write(space, KeyWrite::Del { key, conditions: conditions.to_vec() })
    }

    /// The point leader's part of a write: evaluated against the key's latest object, the
    /// next version, into the batch.
    fn on_key_write(&mut self, space: &ServedSpace, write: KeyWrite) -> Result<Response, ErrorReply> {
        self.check_current(space)?;
        let schema = &space.config.schema;
        let current = self.latest(space, write.key())?;
        let new = evaluate(schema, current.as_ref().map(|c| &c.object), &write)?;
        let version = current.as_ref().map_or(Version::NONE, |c| c.version).next();
        let name = schema.name.clone();
        let key = write.key().clone();
        let object_write = match (current, new) {
            (old, Some(object)) => {
                ObjectWrite::Put { space: name, old: old.map(|c| c.object), new: StoredObject { version, object } }
            }
            (Some(old), None) => ObjectWrite::Delete { space: name, old: old.object },
            (None, None) => unreachable!("deleting nothing fails as NotFound"),
        };
        self.batch.overlay.insert((space.config.id, key), self.batch.writes.len());
        self.batch.writes.push(object_write);
        Ok(Response::Done)
    }

    fn on_group_del(
        &mut self,
        space: &ServedSpace,
        predicates: &[CheckedPredicate],
    ) -> Result<Response, ErrorReply> {
        let name = &space.config.schema.name;
        self.rewrite_matches(space, predicates, |o| Some(ObjectWrite::Delete { space: name.clone(), old: o.object }))
    }

    fn on_group_update(
        &mut self,
        space: &ServedSpace,
        predicates: &[CheckedPredicate],
        funcalls: &[CheckedFuncall],
    ) -> Result<Response, ErrorReply> {
        let name = &space.config.schema.name;
        self.rewrite_matches(space, predicates, |o| {
            let object = apply_all(funcalls, &o.object).ok()?;
            if tessera_replication::write::encoded_len(&object) > OBJECT_BYTES_MAX {
                return None;
            }
            let new = StoredObject { version: o.version.next(), object };
            Some(ObjectWrite::Put { space: name.clone(), old: Some(o.object), new })
        })
    }

    /// The group operations: every committed object matching `predicates` becomes the write
    /// `rewrite` makes of it (or stays as it is on `None`); answers how many were written.
    /// The matches are collected before any is written, so an object that a write moves within
    /// the subspace being searched is never met twice.
    fn rewrite_matches(
        &mut self,
        space: &ServedSpace,
        predicates: &[CheckedPredicate],
        mut rewrite: impl FnMut(StoredObject) -> Option<ObjectWrite>,
    ) -> Result<Response, ErrorReply> {
        self.check_current(space)?;
        debug_assert!(self.batch.writes.is_empty(), "flushed before a group operation");
        let mut writes = Vec::new();
        reads::for_each_match(&self.shared.store, space, predicates, |o| {
            writes.extend(rewrite(o));
            std::ops::ControlFlow::Continue(())
        })?;
        for chunk in writes.chunks(GROUP_CHUNK) {
            self.shared.store.commit(chunk).map_err(storage_error)?;
        }
        Ok(Response::Count(writes.len() as u64))
    }

    fn on_add_space(&mut self, schema: SpaceSchema) -> Result<Response, ErrorReply> {
        let view = self.shared.view();
        if view.config.space(&schema.name).is_some() {
            return Err(ErrorReply::new(
                Status::SpaceExists,
                format!("a space named {:?} exists", schema.name),
            ));
        }
        self.shared.store.create_space(&schema).map_err(storage_error)?;
        let epoch = Epoch(view.epoch().0 + 1);
        let mut config = Configuration::clone(&view.config);
        config.epoch = epoch;
        config.spaces.push(SpaceConfig::owned_by(epoch.0, schema, &[self.shared.me]));
        self.shared
            .install(config)
            .map_err(|e| ErrorReply::new(Status::Internal, format!("saving the configuration: {e}")))?;
        Ok(Response::Done)
    }

    fn on_rm_space(&mut self, name: &str) -> Result<Response, ErrorReply> {
        let view = self.shared.view();
        if view.config.space(name).is_none() {
            return Err(ErrorReply::new(Status::UnknownSpace, format!("no space named {name:?}")));
        }
        let mut config = Configuration::clone(&view.config);
        config.epoch = Epoch(view.epoch().0 + 1);
        config.spaces.retain(|s| s.schema.name != name);
        // The configuration first: if the drop below fails or the server dies, the next start
        // drops the leftover data, because the configuration no longer lists the space.
        self.shared
            .install(config)
            .map_err(|e| ErrorReply::new(Status::Internal, format!("saving the configuration: {e}")))?;
        self.shared.store.drop_space(name).map_err(storage_error)?;
        Ok(Response::Done)
    }

    /// Commits the batch's writes, then answers its requests.
    fn flush(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        let mut replies = batch.replies;
        if !batch.writes.is_empty() {
            if let Err(e) = self.shared.store.commit(&batch.writes) {
                tracing::error!(error = %e, "commit failed; refusing writes from now on");
                // Nothing of this batch is known to be durable, and every reply in it may
                // depend on a write of it: none may claim an outcome.
                let failure = storage_error(e);
                for (_, r) in replies.iter_mut() {
                    *r = Response::Error(failure.clone());
                }
            }
        }
        let epoch = self.epoch();
        for (replier, response) in replies {
            replier.send(epoch, response);
        }
    }
}

pub fn storage_error(e: StorageError) -> ErrorReply {
    match e {
        StorageError::Poisoned => ErrorReply::new(
            Status::ReadOnly,
            "the server stopped accepting writes after a storage failure; check its disk and restart it",
        ),
        StorageError::UnknownSpace(s) => ErrorReply::new(Status::UnknownSpace, format!("no space named {s:?}")),
        other => ErrorReply::new(Status::Internal, format!("storage: {other}")),
    }
}
