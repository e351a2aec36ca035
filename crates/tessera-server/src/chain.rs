//! The chain loop: the server's only write path, standalone or in a cluster.
//!
//! One thread runs [`tessera_replication::Replica`], the state machine of this server's part
//! in every chain. A standalone server is the one-server case: every region's replica set is
//! `[this server]`, so each chain is this server's hops only and a write completes within
//! the step that takes it. The loop:
//! - takes every input that has queued (client writes, alone or a `WriteKeys`' many, envelopes
//!   from peers, a new configuration, clock ticks; at most [`BATCH_MAX`]) and steps the state
//!   machine with each;
//! - sends the updates those steps pass down their chains (`Outputs::forwards`: they vouch for
//!   nothing on this server's disk, so the next hop's fsync overlaps this one's);
//! - writes the storage writes those steps produced as one atomic batch (readable at once)
//!   and tells the state machine so ([`Replica::advance`]);
//! - if any of them must be durable before anything vouches for it (`Outputs::must_sync`:
//!   log records of updates passing down their chains, tail commits, transfer chunks), asks
//!   the fsync thread for an fsync and goes on with the next inputs meanwhile: the disk's
//!   latency overlaps the next round's work, and one fsync covers every batch written while
//!   the previous one ran (group commit). When more inputs wait already, it asks after the
//!   next round instead (at most [`ROUNDS_PER_SYNC_MAX`] rounds per fsync), so that the next
//!   batch shares the fsync; it never waits for inputs with an fsync unasked. A round whose
//!   writes only commit updates the log holds already (acknowledgements on their way back
//!   up) needs none;
//! - sends the round's acknowledgements to the peers and answers its clients once every batch
//!   up to its own is durable as required ([`Deferred`], in round order): nothing that
//!   vouches for a write leaves before it is on disk.
//!
//! If the commit fails, nothing of that round is sent or answered as a success: the state
//! machine is told ([`Replica::fail`]) and stops (fail-stop). A write already sent down its
//! chain gets `TIMEOUT` (it may yet apply), every other client it owed an answer and every later
//! write `READONLY`; nothing is ever sent to a peer again, and
//! [`Shared::storage_failed`] tells the rest of the server, so the coordinators can take it out
//! of every chain.
//!
//! A configuration is installed between two group commits, in one order, whether it came
//! from the coordinators or from a standalone server's own add-space or rm-space: commit what
//! is pending, create the storage of new spaces, hand the configuration to the state machine
//! (and commit what it produced: regions this server lost are cleared), persist the
//! configuration and swap the connections' view, and only then drop the storage of removed
//! spaces. So the server switches epochs all at once, and no request sees a space its chain
//! cannot serve. A storage failure on that path fail-stops the server as a failed commit does.
//!
//! A state transfer into this server that the state machine says is complete (its last
//! chunk's writes are durable) is handed to the task that reports it to the coordinators
//! (`transfers`), never reported from here: this thread never waits on the network.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tessera_protocol::constants::CONFIGURATION_BYTES_MAX;
use tessera_protocol::{
    BackfillRef, Configuration, ErrorReply, ModelConstants, Response, SpaceChange, SpaceConfig,
    Status,
};
use tessera_replication::replica::RegionChunk;
use tessera_replication::{
    ClientId, CommittedReader, EntryWrite, Input, KeyWrite, LogId, Outputs, Replica, StoreWrite,
    UnknownShape,
};
use tessera_storage::{ObjectWrite, Store, StoredObject};
use tessera_types::{Epoch, Object, Shape, SpaceSchema, SubspaceId, Value, Version};
use tokio::sync::mpsc;

use crate::errors::{read_only, storage_error};
use crate::outbox::Replier;
use crate::peers::Peers;
use crate::queue::{LocalChange, LoopInput};
use crate::shapes::ShapeRegistrar;
use crate::state::Shared;
use crate::transfers::{Report, TransferReports};
use crate::view::{Mode, ServedSpace, View};

/// Most inputs stepped before one group commit. Bounds the latency an input can add to the
/// others of its batch.
const BATCH_MAX: usize = 1024;
/// Most rounds whose fsync is held back while more inputs wait (see [`ChainLoop::ask_sync`]).
/// Bounds the latency this adds to a round: a few rounds' work, far below one fsync.
const ROUNDS_PER_SYNC_MAX: u64 = 4;
/// How often the state machine's clock ticks (it retransmits every 5 ticks).
const TICK: Duration = Duration::from_millis(50);

/// How long a stopping cluster server's loop goes on for the writes clients wait for: in a
/// chain their acknowledgements come back from the peers, normally within milliseconds. Under
/// the connections' drain (`connection::DRAIN_MAX`), so the answers still go out.
const STOP_DRAIN_MAX: Duration = Duration::from_secs(3);
/// How long a drained stopping loop goes on as a hop of its peers' chains, at most, waiting
/// to be released (`Shared::release`): the planned stop's announcement takes a Raft commit and
/// the other servers' next heartbeats (`Server::stop`).
const STOP_MAX: Duration = Duration::from_secs(10);

/// Starts the chain loop on its own thread. `incarnation` grows with every start of the
/// process; `previous` is the configuration persisted before this start, if the server acted
/// on one (regions it kept then and does not keep now are cleared; one it rests in, or is
/// transferred into, keeps its data: `SpaceConfig::keeps`). Completed state transfers
/// go to `reports`, shapes of documents to register to `registrar` (a cluster server's); the transfers this server is the source of are paced to
/// `transfer_bytes_per_second`.
pub fn spawn(
    shared: Arc<Shared>,
    incarnation: u64,
    previous: Option<&Configuration>,
    rx: mpsc::Receiver<LoopInput>,
    (reports, registrar): (TransferReports, Option<ShapeRegistrar>),
    transfer_bytes_per_second: u64,
    runtime: tokio::runtime::Handle,
) -> std::thread::JoinHandle<()> {
    let view = shared.view();
    let mut replica = Replica::new(shared.me, incarnation, view.config.clone(), previous);
    let per_tick = transfer_bytes_per_second.saturating_mul(TICK.as_millis() as u64) / 1000;
    replica.set_transfer_rate(usize::try_from(per_tick).unwrap_or(usize::MAX).max(1));
    let peers = Peers::new(shared.clone(), runtime);
    let fsync = shared.store.syncs_commits().then(|| {
        FsyncThread::spawn(
            shared.store.clone(),
            shared.chain.clone(),
            shared.trace.work.clone(),
        )
    });
    let chain = ChainLoop {
        shared,
        view,
        replica,
        peers,
        waiting: HashMap::new(),
        batches: HashMap::new(),
        next_batch: 0,
        next_client: 0,
        failure: None,
        reports,
        backfilled: Vec::new(),
        unknown_shapes: Vec::new(),
        registrar,
        held: Vec::new(),
        registering: BTreeSet::new(),
        registered: BTreeSet::new(),
        fsync,
        syncs_wanted: 0,
        syncs_asked: 0,
        synced: 0,
        deferred: VecDeque::new(),
        stopping: None,
    };
    std::thread::Builder::new()
        .name("tessera-chain".into())
        .spawn(move || chain.run(rx))
        .expect("spawning the chain loop")
}

/// The state machine's clock.
pub async fn tick(shared: Arc<Shared>) {
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Until the loop itself stops: a stopping loop waits on its clock too (for its peers'
    // acknowledgements, and to be released).
    loop {
        interval.tick().await;
        if !shared.chain.tick() {
            return;
        }
    }
}

/// A round's outputs that vouch for its writes (acknowledgements, replies, reports), held
/// until the fsync that covers them.
struct Deferred {
    /// The fsync that must complete first: the last one asked for when the round was written.
    sync: u64,
    out: Outputs,
}

/// The thread that fsyncs the store when the loop asks, so that the loop never waits on the
/// disk: it takes every request that queued during the previous fsync, makes them all durable
/// with one, and tells the loop (`LoopInput::Synced`).
struct FsyncThread {
    requests: std::sync::mpsc::Sender<u64>,
}

impl FsyncThread {
    fn spawn(
        store: Arc<tessera_storage::Store>,
        chain: crate::queue::ChainSender,
        work: Arc<crate::trace::WorkCounters>,
    ) -> FsyncThread {
        let (requests, rx) = std::sync::mpsc::channel::<u64>();
        std::thread::Builder::new()
            .name("tessera-fsync".into())
            .spawn(move || {
                while let Ok(mut upto) = rx.recv() {
                    while let Ok(more) = rx.try_recv() {
                        upto = upto.max(more);
                    }
                    let started = std::time::Instant::now();
                    let result = store.sync().map_err(|e| e.to_string());
                    work.fsync(started.elapsed());
                    if chain
                        .blocking_send(LoopInput::Synced { upto, result })
                        .is_err()
                    {
                        return; // the loop is gone
                    }
                }
            })
            .expect("spawning the fsync thread");
        FsyncThread { requests }
    }
}

/// Who waits for the answer to a write the state machine took.
enum Waiter {
    Client(Replier),
    /// The write at this index of a batch.
    Batch(u64, usize),
}

/// The writes of one `Request::WriteKeys`, answered together once each of them is.
struct Batch {
    outcomes: Vec<Option<Result<(), ErrorReply>>>,
    outstanding: usize,
    reply: Replier,
}

struct ChainLoop {
    shared: Arc<Shared>,
    /// The view this loop acts on: the connections' view, which only this loop changes.
    view: Arc<View>,
    replica: Replica,
    peers: Peers,
    /// Who waits for the answer to each write the state machine took.
    waiting: HashMap<u64, Waiter>,
    /// The writes of each `Request::WriteKeys` still unanswered, by id.
    batches: HashMap<u64, Batch>,
    next_batch: u64,
    next_client: u64,
    /// Set when storage failed: the server takes no more writes.
    failure: Option<ErrorReply>,
    /// Where completed state transfers go, to be reported to the coordinators.
    reports: TransferReports,
    /// A standalone server's backfilled key regions, recorded after the batch's commit.
    backfilled: Vec<BackfillRef>,
    /// Writes held for their document's shape, registered after the batch's commit.
    unknown_shapes: Vec<UnknownShape>,
    /// A cluster server's way to register shapes with the coordinators (`crate::shapes`).
    registrar: Option<ShapeRegistrar>,
    /// A cluster server's writes held until their shapes are registered and ready here.
    held: Vec<UnknownShape>,
    /// Shapes asked of the coordinators, not answered yet.
    registering: BTreeSet<(String, Shape)>,
    /// Shapes the coordinators registered and made ready for this server's writes, until
    /// its configuration has them ready too.
    registered: BTreeSet<(String, Shape)>,
    /// `None` when the store fsyncs on its own schedule (`FsyncPolicy` other than `Always`).
    fsync: Option<FsyncThread>,
    /// Rounds that needed an fsync, the last of them the fsync thread was asked for, and the
    /// last one done (every batch written before it is durable).
    syncs_wanted: u64,
    syncs_asked: u64,
    synced: u64,
    /// Rounds waiting for their fsync, in order.
    deferred: VecDeque<Deferred>,
    /// Since when the server stops ([`ChainLoop::finished_stopping`]).
    stopping: Option<std::time::Instant>,
}

struct StoreReader<'a>(&'a Store);

impl CommittedReader for StoreReader<'_> {
    fn get(&self, space: &str, key: &Value) -> Result<Option<StoredObject>, ErrorReply> {
        self.0.get(space, key).map_err(storage_error)
    }

    fn entry_version(
        &self,
        space: &str,
        subspace: SubspaceId,
        object: &Object,
    ) -> Result<Option<Version>, ErrorReply> {
        self.0
            .entry_version(space, subspace, object)
            .map_err(storage_error)
    }

    fn region_entry_version(
        &self,
        space: &str,
        subspace: SubspaceId,
        region: tessera_geometry::RegionIndex,
        key: &Value,
    ) -> Result<Option<Version>, ErrorReply> {
        self.0
            .region_entry_version(space, subspace, region, key)
            .map_err(storage_error)
    }

    fn region_entries(
        &self,
        space: &str,
        subspace: SubspaceId,
        region: tessera_geometry::RegionIndex,
        after: Option<&[u8]>,
        max_bytes: usize,
    ) -> Result<RegionChunk, ErrorReply> {
        let chunk = self
            .0
            .region_entries(space, subspace, region, after, max_bytes)
            .map_err(storage_error)?;
        Ok(RegionChunk {
            entries: chunk.entries,
            next: chunk.next,
        })
    }

    fn check_chunk(
        &self,
        space: &str,
        subspace: SubspaceId,
        region: tessera_geometry::RegionIndex,
        range: (Option<&[u8]>, Option<&[u8]>),
        entries: &[StoredObject],
    ) -> Result<(), ErrorReply> {
        self.0
            .check_transfer_chunk(space, subspace, region, range, entries)
            .map_err(storage_error)
    }
}

impl ChainLoop {
    fn run(mut self, mut rx: mpsc::Receiver<LoopInput>) {
        // What the state machine produced on creation (regions lost while the server was down
        // are cleared) is durable before anything reads storage, and before the configuration
        // that lost them is persisted: a crash in between would start again from that
        // configuration, which no longer names them, and leave them uncleared.
        self.flush_durable();
        if self.failure.is_none() {
            if let Err(e) = crate::state::save_config(&self.shared.data_dir, &self.view.config) {
                self.fail_stop(format!("persisting the configuration: {e}"));
            }
        }
        let mut batch = Vec::with_capacity(BATCH_MAX);
        loop {
            let Some(first) = rx.blocking_recv() else {
                return;
            };
            batch.push(first);
            while batch.len() < BATCH_MAX {
                match rx.try_recv() {
                    Ok(input) => batch.push(input),
                    Err(_) => break,
                }
            }
            let mut stop = false;
            for input in batch.drain(..) {
                match input {
                    // Ordered only under a lease: one that lapsed while the write queued may
                    // mean another server leads the key by now.
                    LoopInput::Write { reply, .. } | LoopInput::Writes { reply, .. }
                        if !self.shared.lease.is_valid() =>
                    {
                        reply.fail(self.view.epoch(), crate::lease::lapsed_error());
                    }
                    LoopInput::Write {
                        space,
                        write,
                        reply,
                    } => {
                        let client = self.wait(Waiter::Client(reply));
                        self.on_write(client, &space, write);
                    }
                    LoopInput::Writes {
                        space,
                        writes,
                        reply,
                    } => self.on_writes(&space, writes, reply),
                    // Answered once the configuration is installed (persisted, in the view).
                    LoopInput::Change { change, reply } => {
                        let result = match change {
                            LocalChange::AddSpace(schema) => self.on_add_space(schema),
                            LocalChange::RmSpace(name) => self.on_rm_space(&name),
                            LocalChange::AlterSpace { name, change } => {
                                self.on_alter_space(&name, &change)
                            }
                            LocalChange::SetModel(constants) => self.on_set_model(constants),
                        };
                        reply.send(
                            self.view.epoch(),
                            result.map_or_else(Response::Error, |()| Response::Done),
                        );
                    }
                    LoopInput::Peer(envelope) => self.step(Input::Peer(envelope)),
                    LoopInput::Tick => self.step(Input::Tick),
                    LoopInput::Synced { upto, result } => self.on_synced(upto, result),
                    LoopInput::Config(config) => {
                        self.on_configuration(config);
                        self.release_held();
                    }
                    LoopInput::ShapeRegistered {
                        space,
                        shape,
                        result,
                    } => self.on_shape_registered(space, shape, result),
                    LoopInput::Stop => stop = true,
                }
            }
            self.flush();
            if !self.backfilled.is_empty() {
                let done = std::mem::take(&mut self.backfilled);
                self.on_backfills_done(&done);
            }
            while !self.unknown_shapes.is_empty() {
                let held = std::mem::take(&mut self.unknown_shapes);
                self.on_unknown_shapes(held);
                self.flush();
            }
            if stop || self.shared.is_shutting_down() {
                self.stopping.get_or_insert_with(std::time::Instant::now);
            }
            if self.finished_stopping() {
                self.flush_durable();
                return;
            }
            self.ask_sync(rx.is_empty());
        }
    }

    /// Whether a stopping loop may return: the writes clients wait for are answered (a
    /// standalone server answers them all in its last fsync; a cluster server waits for its
    /// peers' acknowledgements, the ticks waking it meanwhile), or it has waited
    /// [`STOP_DRAIN_MAX`]; and the server released it (`Shared::release`: until then it goes
    /// on as a hop of its peers' chains), or it has waited [`STOP_MAX`]. Connections then
    /// close with what is still unanswered.
    fn finished_stopping(&self) -> bool {
        let Some(since) = self.stopping else {
            return false;
        };
        let answered =
            self.view.mode == Mode::Standalone || (self.waiting.is_empty() && self.held.is_empty());
        if answered {
            self.shared.mark_drained();
        }
        let released = self.shared.is_released();
        let waited = since.elapsed();
        (released && (answered || waited >= STOP_DRAIN_MAX)) || waited >= STOP_MAX
    }

    /// Asks the fsync thread for the fsync the rounds written so far need, unless more inputs
    /// already wait (`idle` false) and few rounds wait for it: the next round's batch then
    /// shares the fsync. When the servers of a cluster share a core, each server's rounds are
    /// small and an fsync asked at once covered about one insert; the loop never blocks with
    /// a round's fsync unasked.
    fn ask_sync(&mut self, idle: bool) {
        if self.syncs_wanted == self.syncs_asked
            || (!idle && self.syncs_wanted - self.syncs_asked < ROUNDS_PER_SYNC_MAX)
        {
            return;
        }
        self.syncs_asked = self.syncs_wanted;
        if let Some(fsync) = &self.fsync {
            // The thread outlives the loop's use of it; if it is gone, the rounds waiting for
            // it never complete and the server stops answering, as on a hung disk.
            let _ = fsync.requests.send(self.syncs_asked);
        }
    }

    fn step(&mut self, input: Input) {
        self.replica.step(input, &StoreReader(&self.shared.store));
    }

    /// Registers who waits for a write's answer.
    fn wait(&mut self, waiter: Waiter) -> ClientId {
        let id = self.next_client;
        self.next_client += 1;
        self.waiting.insert(id, waiter);
        ClientId(id)
    }

    fn answer(&mut self, client: ClientId, result: Result<(), ErrorReply>) {
        match self.waiting.remove(&client.0) {
            Some(Waiter::Client(replier)) => {
                replier.send(
                    self.view.epoch(),
                    result.map_or_else(Response::Error, |()| Response::Done),
                );
            }
            Some(Waiter::Batch(id, at)) => self.answer_in_batch(id, at, result),
            None => tracing::error!(client = client.0, "an answer for a write nobody waits for"),
        }
    }

    /// Records the outcome of write `at` of batch `id`; answers the batch once it has all.
    fn answer_in_batch(&mut self, id: u64, at: usize, result: Result<(), ErrorReply>) {
        let Some(batch) = self.batches.get_mut(&id) else {
            return tracing::error!(batch = id, "an answer for a batch nobody waits for");
        };
        batch.outcomes[at] = Some(result);
        batch.outstanding -= 1;
        if batch.outstanding > 0 {
            return;
        }
        let batch = self.batches.remove(&id).expect("found above");
        let outcomes = batch.outcomes.into_iter().flatten().collect();
        batch
            .reply
            .send(self.view.epoch(), Response::Outcomes(outcomes));
    }

    /// The writes of a `Request::WriteKeys`, each taken as its own write is.
    fn on_writes(&mut self, space: &ServedSpace, writes: Vec<KeyWrite>, reply: Replier) {
        if writes.is_empty() {
            return reply.send(self.view.epoch(), Response::Outcomes(vec![]));
        }
        let id = self.next_batch;
        self.next_batch += 1;
        let batch = Batch {
            outcomes: vec![None; writes.len()],
            outstanding: writes.len(),
            reply,
        };
        self.batches.insert(id, batch);
        for (at, write) in writes.into_iter().enumerate() {
            let client = self.wait(Waiter::Batch(id, at));
            self.on_write(client, space, write);
        }
    }

    /// A write validated against `space`, which must still be the view's space of that name.
    fn on_write(&mut self, client: ClientId, space: &ServedSpace, write: KeyWrite) {
        if !self.view.is_current(space) {
            let error = ErrorReply::new(
                Status::UnknownSpace,
                format!("space {:?} was removed", space.name()),
            );
            return self.answer(client, Err(error));
        }
        self.step(Input::Write {
            client,
            space: space.name().to_owned(),
            write,
        });
    }

    /// A standalone server's add-space: a configuration change it makes itself.
    fn on_add_space(&mut self, schema: SpaceSchema) -> Result<(), ErrorReply> {
        if self.view.config.space(&schema.name).is_some() {
            return Err(ErrorReply::new(
                Status::SpaceExists,
                format!("a space named {:?} exists", schema.name),
            ));
        }
        let epoch = Epoch(self.view.epoch().0 + 1);
        let mut config = Configuration::clone(&self.view.config);
        config.epoch = epoch;
        config
            .spaces
            .push(SpaceConfig::owned_by(epoch.0, schema, &[self.shared.me]));
        self.install(Arc::new(config))
    }

    fn on_rm_space(&mut self, name: &str) -> Result<(), ErrorReply> {
        if self.view.config.space(name).is_none() {
            return Err(ErrorReply::new(
                Status::UnknownSpace,
                format!("no space named {name:?}"),
            ));
        }
        let mut config = Configuration::clone(&self.view.config);
        config.epoch = Epoch(self.view.epoch().0 + 1);
        config.spaces.retain(|s| s.schema.name != name);
        self.install(Arc::new(config))
    }

    /// A standalone server's alter-space: a configuration change it makes itself. An added
    /// subspace is built by this server's own backfill (see `tessera_protocol::Build`), which
    /// it records itself when done ([`ChainLoop::on_backfills_done`]).
    fn on_alter_space(&mut self, name: &str, change: &SpaceChange) -> Result<(), ErrorReply> {
        let epoch = Epoch(self.view.epoch().0 + 1);
        let mut config = Configuration::clone(&self.view.config);
        config.epoch = epoch;
        let me = self.shared.me;
        let space = config
            .spaces
            .iter_mut()
            .find(|s| s.schema.name == name)
            .ok_or_else(|| {
                ErrorReply::new(Status::UnknownSpace, format!("no space named {name:?}"))
            })?;
        let bad =
            |e: tessera_protocol::AlterError| ErrorReply::new(Status::BadAlteration, e.to_string());
        space
            .alter(epoch.0, change, |t| {
                vec![vec![me]; t.regions_count() as usize]
            })
            .map_err(bad)?;
        if let SpaceChange::AddFormula(spec) = change {
            // A standalone server is every server: the formula is ready at once.
            let ready = SpaceChange::FormulaReady(spec.id());
            space.alter(epoch.0, &ready, |_| vec![]).map_err(bad)?;
        }
        // Clients fetch the configuration in one frame, as from coordinators.
        let bytes = postcard::to_allocvec(&config).map_or(usize::MAX, |v| v.len());
        if bytes > CONFIGURATION_BYTES_MAX {
            return Err(ErrorReply::new(
                Status::TooLarge,
                format!(
                    "the configuration would be {bytes} bytes, over its {CONFIGURATION_BYTES_MAX}-byte limit"
                ),
            ));
        }
        self.install(Arc::new(config))
    }

    /// A standalone server's calibration: the model's constants kept in its configuration.
    fn on_set_model(&mut self, constants: ModelConstants) -> Result<(), ErrorReply> {
        if self.view.config.model == Some(constants) {
            return Ok(());
        }
        let mut config = Configuration::clone(&self.view.config);
        config.epoch = Epoch(config.epoch.0 + 1);
        config.model = Some(constants);
        self.install(Arc::new(config))
    }

    /// A standalone server finished backfilling key regions: it records them itself, as the
    /// coordinators would (`SpaceConfig::complete_backfills`), in a configuration of its own.
    fn on_backfills_done(&mut self, done: &[BackfillRef]) {
        let mut config = Configuration::clone(&self.view.config);
        let mut recorded = 0;
        for space in &mut config.spaces {
            recorded += space.complete_backfills(done);
        }
        if recorded == 0 {
            return;
        }
        config.epoch = Epoch(config.epoch.0 + 1);
        let epoch = config.epoch;
        match self.install(Arc::new(config)) {
            Ok(()) => tracing::info!(%epoch, regions = recorded, "backfilled key regions recorded"),
            Err(e) => {
                tracing::error!(%epoch, error = %e, "could not record backfilled key regions")
            }
        }
    }

    /// Writes whose documents take shapes their space has not registered (or not made ready):
    /// a standalone server registers each shape in a configuration of its own, as the
    /// coordinators would, then writes again; a cluster server asks the coordinators and
    /// holds the write (`crate::shapes`). A refused registration (the space has all the
    /// shapes it may keep) is the write's answer.
    fn on_unknown_shapes(&mut self, unknown: Vec<UnknownShape>) {
        for u in unknown {
            let Some(registrar) = &self.registrar else {
                self.register_here(u);
                continue;
            };
            let wanted = (u.space.clone(), u.shape.clone());
            if !self.registering.contains(&wanted) && !self.registered.contains(&wanted) {
                registrar.register(wanted.0.clone(), wanted.1.clone());
                self.registering.insert(wanted);
            }
            self.held.push(u);
        }
        self.release_held();
    }

    /// A standalone server's registration: the shape added, then made ready (this server is
    /// every server), then the write again.
    fn register_here(&mut self, u: UnknownShape) {
        let entry = self
            .view
            .config
            .space(&u.space)
            .and_then(|s| s.shape_entry(&u.shape));
        let mut registered = Ok(());
        if entry.is_none() {
            registered = self.on_alter_space(&u.space, &SpaceChange::AddShape(u.shape.clone()));
        }
        if registered.is_ok() && !entry.is_some_and(|e| e.ready) {
            registered = self.on_alter_space(&u.space, &SpaceChange::ShapeReady(u.shape));
        }
        let registered = registered.map_err(|e| ErrorReply::new(Status::TooLarge, e.message));
        match registered.and_then(|()| self.view.space(&u.space)) {
            Ok(served) => self.on_write(u.client, &served, u.write),
            Err(e) => self.answer(u.client, Err(e)),
        }
    }

    /// The coordinators' answer to a registration this server asked for.
    fn on_shape_registered(&mut self, space: String, shape: Shape, result: Result<(), ErrorReply>) {
        let key = (space, shape);
        self.registering.remove(&key);
        match result {
            Ok(()) => {
                self.registered.insert(key);
                self.release_held();
            }
            Err(e) => {
                let (refused, kept) = std::mem::take(&mut self.held)
                    .into_iter()
                    .partition(|u| (&u.space, &u.shape) == (&key.0, &key.1));
                self.held = kept;
                for u in refused {
                    self.answer(u.client, Err(e.clone()));
                }
            }
        }
    }

    /// Writes again the held writes whose shapes are registered and ready in this server's
    /// configuration (their documents are evaluated afresh: they may take another shape by
    /// now). A space removed meanwhile answers its writes.
    fn release_held(&mut self) {
        let ready = |view: &View, space: &str, shape: &Shape| {
            view.config
                .space(space)
                .and_then(|s| s.shape_entry(shape))
                .is_some_and(|e| e.ready)
        };
        let view = self.view.clone();
        self.registered.retain(|(space, shape)| {
            !ready(&view, space, shape) && view.config.space(space).is_some()
        });
        let (go, wait): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.held).into_iter().partition(|u| {
                ready(&view, &u.space, &u.shape) || view.config.space(&u.space).is_none()
            });
        self.held = wait;
        for u in go {
            match view.space(&u.space) {
                Ok(served) => self.on_write(u.client, &served, u.write),
                Err(e) => self.answer(u.client, Err(e)),
            }
        }
    }

    /// A configuration from the coordinators. A server whose storage failed acts on nothing
    /// any more, but routes its clients by the newest configuration (without persisting it:
    /// the one on disk is the last the state machine acted on).
    fn on_configuration(&mut self, config: Arc<Configuration>) {
        if let Err(e) = self.install(config.clone()) {
            tracing::error!(epoch = %config.epoch, error = %e, "could not install a configuration");
            if config.epoch > self.view.epoch() {
                self.view = self.shared.swap_view(config);
            }
        }
    }

    /// Switches to `config` between two group commits (see the module documentation).
    fn install(&mut self, config: Arc<Configuration>) -> Result<(), ErrorReply> {
        if config.epoch <= self.view.epoch() {
            return Ok(());
        }
        // Reads that overlap the install are refused (`Shared::read_still_valid`): it clears
        // regions this server loses before the view that says so is in place. An install that
        // fail-stops the server never ends, so reads stay refused; a server that failed before
        // begins none.
        self.check_alive()?;
        self.shared.begin_install();
        self.install_between_commits(config)?;
        self.shared.end_install();
        Ok(())
    }

    fn install_between_commits(&mut self, config: Arc<Configuration>) -> Result<(), ErrorReply> {
        self.flush_durable();
        self.check_alive()?;
        let old = self.view.config.clone();
        let store = self.shared.store.clone();
        for space in &config.spaces {
            let name = &space.schema.name;
            let before = old.space(name);
            if before.is_some_and(|b| b.id != space.id) {
                // Dropped and created again under the same name: the old data must go.
                if let Err(e) = store.drop_space(name) {
                    return Err(
                        self.fail_stop(format!("dropping the replaced space {name:?}: {e}"))
                    );
                }
            }
            if before.is_none_or(|b| b.id != space.id) {
                if let Err(e) = store.create_space(&space.schema) {
                    return Err(
                        self.fail_stop(format!("creating the storage of space {name:?}: {e}"))
                    );
                }
            } else if before.is_some_and(|b| b.schema != space.schema) {
                // Subspaces added (their storage must be there before the chains that write
                // them) or dropped (nothing writes them in this configuration).
                if let Err(e) = store.alter_space(&space.schema) {
                    return Err(
                        self.fail_stop(format!("altering the storage of space {name:?}: {e}"))
                    );
                }
            }
        }
        self.step(Input::Configuration(config.clone()));
        self.flush_durable();
        self.check_alive()?;
        match self.shared.install(config.clone()) {
            Ok(view) => self.view = view,
            Err(e) => {
                return Err(self.fail_stop(format!("persisting the configuration: {e}")));
            }
        }
        for space in &old.spaces {
            let name = &space.schema.name;
            if config.space(name).is_none() {
                if let Err(e) = store.drop_space(name) {
                    return Err(self.fail_stop(format!("dropping the removed space {name:?}: {e}")));
                }
            }
        }
        tracing::info!(epoch = %config.epoch, "configuration installed");
        Ok(())
    }

    fn check_alive(&self) -> Result<(), ErrorReply> {
        self.failure.clone().map_or(Ok(()), Err)
    }

    /// Writes what was stepped since the last flush (its forwards go first), tells the state
    /// machine, and asks for the fsync it needs; its acknowledgements and answers follow once
    /// that fsync (and every earlier one) is done. Fail-stops if the write fails.
    fn flush(&mut self) {
        let mut out = self.replica.take_outputs();
        for hops in std::mem::take(&mut out.chains_started) {
            self.shared.meter.chain(hops);
        }
        if out.is_empty() {
            return;
        }
        // Before anything leaves: no tail may commit an update a read here would not wait for.
        let fences = std::mem::take(&mut out.read_fences);
        if !fences.is_empty() {
            self.shared.read_gates().pend(&fences);
        }
        // Down the chains at once: the next hops' fsyncs overlap this one's.
        for (to, envelope) in &out.forwards {
            self.peers.send(*to, envelope);
        }
        if !out.writes.is_empty() {
            let sync = out.must_sync();
            let mut writes: Vec<ObjectWrite> = Vec::with_capacity(out.writes.len());
            for w in std::mem::take(&mut out.writes) {
                object_writes(w, &mut writes);
            }
            let started = std::time::Instant::now();
            if let Err(e) = self.shared.store.commit_buffered(&writes) {
                self.fail(out, format!("a commit failed: {e}"));
                return;
            }
            self.shared
                .meter
                .group_commit(writes.len(), started.elapsed());
            self.shared.trace.work.commit(writes.len());
            if self.fsync.is_some() && sync {
                self.syncs_wanted += 1;
            }
        }
        // Written: storage shows it, so the state machine may forget what it shows, and the
        // reads waiting for these commits may read.
        self.replica.advance();
        if !fences.is_empty() {
            let ready = self.shared.read_gates().settle(&fences);
            for read in ready {
                let _ = read.send(());
            }
        }
        self.unknown_shapes
            .extend(std::mem::take(&mut out.unknown_shapes));
        if self.syncs_wanted > self.synced {
            let sync = self.syncs_wanted;
            self.deferred.push_back(Deferred { sync, out });
        } else {
            self.release(out);
        }
    }

    /// The fsync thread finished the fsyncs up to `upto`: the rounds waiting for them go.
    fn on_synced(&mut self, upto: u64, result: Result<(), String>) {
        if self.failure.is_some() {
            return;
        }
        if let Err(e) = result {
            self.fail(Outputs::default(), format!("an fsync failed: {e}"));
            return;
        }
        self.synced = self.synced.max(upto);
        while self.deferred.front().is_some_and(|d| d.sync <= self.synced) {
            let d = self.deferred.pop_front().expect("checked above");
            self.release(d.out);
        }
    }

    /// [`ChainLoop::flush`], then waits until everything written is durable and released
    /// (before a configuration is installed, and before the loop stops).
    fn flush_durable(&mut self) {
        self.flush();
        if self.failure.is_some() || self.deferred.is_empty() {
            return;
        }
        let started = std::time::Instant::now();
        let result = self.shared.store.sync().map_err(|e| e.to_string());
        self.shared.trace.work.fsync(started.elapsed());
        self.syncs_asked = self.syncs_wanted;
        self.on_synced(self.syncs_wanted, result);
    }

    /// A round's outputs that vouch for its writes, once those are durable: acknowledgements
    /// and other messages to peers, answers to clients, completed backfills and transfers.
    fn release(&mut self, out: Outputs) {
        for (to, envelope) in &out.messages {
            self.peers.send(*to, envelope);
        }
        for (client, result) in out.replies {
            self.answer(client, result);
        }
        // Durable: the coordinators may count this server as a full member of those regions.
        for done in out.backfills_done {
            tracing::info!(
                space = done.space,
                subspace = done.subspace.0,
                region = done.region,
                "key region backfilled"
            );
            match self.view.mode {
                Mode::Standalone => self.backfilled.push(done),
                Mode::Cluster => self.reports.send(Report::Backfill(done)),
            }
        }
        for done in out.transfers_done {
            tracing::info!(
                space = done.space,
                subspace = done.subspace.0,
                region = done.region,
                id = done.id,
                "state transfer complete here"
            );
            self.reports.send(Report::Transfer(done));
        }
    }

    /// Storage failed outside a commit: fail-stops with what the state machine produced since
    /// the last flush as unpersisted.
    fn fail_stop(&mut self, cause: String) -> ErrorReply {
        let unpersisted = self.replica.take_outputs();
        self.fail(unpersisted, cause)
    }

    /// Storage failed: nothing of `unpersisted` (what the state machine produced since its
    /// writes were last known durable) may be sent or acknowledged, now or ever. The state
    /// machine stops; a write already sent down its chain gets `TIMEOUT`, every other client
    /// it owed an answer and every later write `READONLY`.
    fn fail(&mut self, mut unpersisted: Outputs, cause: String) -> ErrorReply {
        tracing::error!(%cause, "storage failed; this server takes no more writes and leaves its chains");
        let why = read_only(&cause);
        // Rounds still waiting for their fsync were never acknowledged nor answered.
        for d in std::mem::take(&mut self.deferred) {
            unpersisted.replies.extend(d.out.replies);
        }
        self.replica.fail(unpersisted, why.clone());
        self.failure = Some(why.clone());
        // Its chains go on without it: a waiting read would wait for ever (dropping the
        // senders refuses them).
        drop(self.shared.read_gates().release_all());
        self.shared.set_storage_failed();
        let out = self.replica.take_outputs();
        debug_assert!(
            out.writes.is_empty() && out.messages.is_empty() && out.forwards.is_empty(),
            "a failed replica only answers"
        );
        for (client, result) in out.replies {
            self.answer(client, result);
        }
        for u in std::mem::take(&mut self.held) {
            self.answer(u.client, Err(why.clone()));
        }
        why
    }
}

/// The state machine's storage write as the store takes it.
fn object_writes(w: StoreWrite, out: &mut Vec<ObjectWrite>) {
    match w {
        StoreWrite::Entry { entry, retires } => {
            let EntryWrite {
                space,
                subspace,
                remove,
                insert,
            } = entry;
            out.push(ObjectWrite::Entry {
                space,
                subspace,
                remove,
                insert,
            });
            if let Some(LogId(id)) = retires {
                out.push(ObjectWrite::Unlog { id });
            }
        }
        StoreWrite::Log { id, version, entry } => {
            let EntryWrite {
                space,
                subspace,
                remove,
                insert,
            } = entry;
            out.push(ObjectWrite::Log {
                id: id.0,
                version,
                space,
                subspace,
                remove,
                insert,
            });
        }
        StoreWrite::Unlog(LogId(id)) => out.push(ObjectWrite::Unlog { id }),
        StoreWrite::ClearRegion {
            space,
            subspace,
            region,
        } => out.push(ObjectWrite::ClearRegion {
            space,
            subspace,
            region,
        }),
        // A transfer chunk, in the batch of its round: it sees the writes before it.
        StoreWrite::ReplaceRange {
            space,
            subspace,
            region,
            after,
            through,
            entries,
            keep,
        } => out.push(ObjectWrite::ReplaceRange {
            space,
            subspace,
            region,
            after,
            through,
            entries,
            keep,
        }),
    }
}
