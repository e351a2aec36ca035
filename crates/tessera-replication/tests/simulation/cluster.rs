//! The simulated cluster: server processes stepping their `Replica`, their disks and fsyncs,
//! and the seeded network between them that delays, reorders, duplicates and drops.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::Rng;
use rand::SeedableRng;
use tessera_protocol::{BackfillRef, Configuration, Status, TransferRef};
use tessera_replication::{
    EntryWrite, Envelope, Input, Outputs, ReadGates, Replica, StoreWrite, UnknownShape,
};
use tessera_types::{parse_space, Epoch, Object, ServerId, Shape, SubspaceId, Value, Version};

use crate::clients::Event;
use crate::coordinator::{first_configuration, ordered_wanted, transfers_wanted};
use crate::model::Outcome;
use crate::store::{apply, Geometry, ModelStore, Reader};
use crate::{DYNAMIC_SPACE, ORDERED_SPACE, ORDERED_STRING_SPACE, SPACE};

/// One server process and its disk.
pub(crate) struct Node {
    /// `None` while crashed.
    pub(crate) replica: Option<Replica>,
    /// What the server reads: every batch written, durable or not.
    pub(crate) store: ModelStore,
    /// What a crash leaves of `store`: as of the last fsync (the journal keeps batches in
    /// order, so an fsync makes every earlier batch durable too).
    pub(crate) durable: ModelStore,
    /// The last configuration it installed (kept across a crash: it is on its disk).
    pub(crate) config: Arc<Configuration>,
    /// That configuration's geometry, which places `store`'s entries.
    pub(crate) geometry: Arc<Geometry>,
    /// Inputs that arrived while it was paused, to run when it wakes up.
    pub(crate) paused: Option<Vec<Input>>,
    /// Its lease with the coordinator lapsed (it was paused past it): it refuses client writes
    /// until it has the configuration that took it out of its replica sets.
    pub(crate) lease_lapsed_until_epoch: Option<Epoch>,
    /// Messages to and from it are lost until this time.
    pub(crate) partitioned_until: u64,
    pub(crate) incarnation: u64,
    /// Fsyncs asked for and not done: each one's number and the store it will make durable.
    pub(crate) syncs: VecDeque<(u64, ModelStore)>,
    syncs_asked: u64,
    /// The last fsync done.
    synced: u64,
    /// Rounds written (their forwards sent) whose acknowledgements and replies wait for an
    /// fsync: the number of the fsync, and the rest of the round's outputs. A crash loses them.
    pub(crate) deferred: VecDeque<(u64, Outputs)>,
    /// The shell's read gates (`tessera_replication::read_gate`): gets waiting for versions
    /// pending here, each with its event in the history and this node's `installs` when it came.
    pub(crate) gates: ReadGates<(usize, u64)>,
    /// Configurations installed: a get that waited across an install is refused, as the
    /// server's read stamp refuses it.
    pub(crate) installs: u64,
}

impl Node {
    /// A crash: the fsyncs asked for die with the process, none is outstanding for the next
    /// one (whose rounds would otherwise wait for them for ever, when it needs none of its
    /// own: a restarted server that keeps every region it had writes nothing at first).
    pub(crate) fn forget_syncs(&mut self) {
        self.syncs.clear();
        self.synced = self.syncs_asked;
    }
}

/// Envelopes ordered by nothing but the queue's own keys.
#[derive(Debug)]
pub(crate) struct EnvelopeBox(pub(crate) Envelope);

impl PartialEq for EnvelopeBox {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for EnvelopeBox {}

impl PartialOrd for EnvelopeBox {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for EnvelopeBox {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

pub(crate) struct Sim {
    pub(crate) rng: StdRng,
    pub(crate) now: u64,
    /// The space's geometry in each configuration, by the number of key splits it has (the
    /// coordinator only adds splits, so their number names them): the first configuration's
    /// first, the current one's last.
    pub(crate) geometries: Vec<Arc<Geometry>>,
    pub(crate) nodes: BTreeMap<ServerId, Node>,
    /// (deliver at, tie-breaker, to, envelope).
    pub(crate) network: BinaryHeap<Reverse<(u64, u64, ServerId, EnvelopeBox)>>,
    pub(crate) sent: u64,
    /// Every configuration the coordinator made; the last is current.
    pub(crate) configs: Vec<Arc<Configuration>>,
    /// Configurations not yet delivered: (deliver at, server, config).
    pub(crate) config_deliveries: Vec<(u64, ServerId, Arc<Configuration>)>,
    /// Servers to take out of the replica sets at a time (their lease lapsed by then).
    pub(crate) removals: Vec<(u64, ServerId)>,
    /// Paused servers to wake up, and crashed ones to restart, at a time.
    pub(crate) wake_at: Vec<(u64, ServerId)>,
    pub(crate) restart_at: Vec<(u64, ServerId)>,
    /// Servers taken out (or to be), which count against the K - 1 failures tolerated.
    pub(crate) failed: BTreeSet<ServerId>,
    pub(crate) history: Vec<Event>,
    /// Every object some write produced: (key, version) -> object.
    pub(crate) produced: BTreeMap<(Value, Version), Object>,
    pub(crate) k: usize,
    pub(crate) trace: u64,
    pub(crate) tracing: bool,
    /// Faults injected: crashes, pauses, partitions, restarts; crashes with rounds waiting for
    /// their fsync (forwards gone, acknowledgements and replies held); and crashes that lost
    /// batches written but not fsynced.
    pub(crate) faults: [u64; 6],
    /// Gets answered by a replica that does not lead the key, and gets that waited for
    /// versions pending at their replica.
    pub(crate) reads: [u64; 2],
    /// Every server that ever failed (its unanswered writes may be lost with it).
    pub(crate) ever_failed: BTreeSet<ServerId>,
    /// Transfer reports on their way to the coordinator: (arrives at, from, transfer).
    pub(crate) reports: Vec<(u64, ServerId, TransferRef)>,
    /// Transfers started (re-replication, moves) and completed.
    pub(crate) transfers: [u64; 2],
    /// Servers taken out that rest (`SpaceConfig::resting`): the regions they left wait for
    /// them until this time, and they keep those regions' data.
    pub(crate) resting: BTreeMap<ServerId, u64>,
    /// Regions left to a resting server, and transfers that brought one back to such a
    /// region (a catch-up over the data it kept).
    pub(crate) catch_ups: [u64; 2],
    /// Backfill reports on their way to the coordinator: (arrives at, from, key region done).
    pub(crate) backfill_reports: Vec<(u64, ServerId, BackfillRef)>,
    /// Whether this run changes the space's subspaces (half the seeds).
    pub(crate) alters: bool,
    /// Subspaces added, built (serving) and dropped.
    pub(crate) alterations: [u64; 3],
    /// Whether the space is dynamic (a third of the seeds; see the module documentation).
    pub(crate) dynamic: bool,
    /// Writes a point leader held for their documents' shapes: (server, its incarnation then,
    /// the write), written again once the server's configuration has the shape ready.
    pub(crate) held: Vec<(ServerId, u64, UnknownShape)>,
    /// Shapes point leaders asked the coordinator to register.
    pub(crate) shape_requests: Vec<Shape>,
    /// Shapes registered, and writes held for one.
    pub(crate) shapes: [u64; 2],
    /// Whether the coordinator heals and moves regions by state transfer (see
    /// `transfers_wanted`). Without, it heals nothing: K - 1 failures in all.
    pub(crate) transfers_on: bool,
    /// Whether sources send one transfer chunk per tick (`Replica::set_transfer_rate`), so
    /// transfers last many ticks and interleave with the chain traffic; half the seeds.
    pub(crate) paced: bool,
    /// Whether the space is ordered and its key regions split (a third of the typed seeds).
    pub(crate) ordered: bool,
    /// Key regions split, and key-subspace entries the servers' stores moved for them.
    pub(crate) splits: [u64; 2],
}

/// A replica as the server starts one; `paced`, it sends at most one transfer chunk a tick
/// (the model store's chunks are up to three entries whatever the budget).
pub(crate) fn start_replica(
    id: ServerId,
    incarnation: u64,
    config: Arc<Configuration>,
    previous: Option<&Configuration>,
    paced: bool,
) -> Replica {
    let mut replica = Replica::new(id, incarnation, config, previous);
    if paced {
        replica.set_transfer_rate(1);
    }
    replica
}

impl Sim {
    pub(crate) fn new(seed: u64) -> Sim {
        let mut rng = StdRng::seed_from_u64(seed);
        let servers = rng.random_range(2..=5usize);
        let k = rng.random_range(1..=servers.min(3));
        let transfers_on = transfers_wanted(&mut rng);
        let spare = usize::from(transfers_on && servers > k && rng.random_bool(0.3));
        let paced = rng.random_bool(0.5);
        let dynamic = rng.random_bool(1.0 / 3.0);
        let alters = !dynamic && rng.random_bool(0.5);
        let ordered = !dynamic && ordered_wanted(seed);
        let space = match (dynamic, ordered) {
            (true, _) => DYNAMIC_SPACE,
            (false, true) if (seed / 3) % 2 == 1 => ORDERED_STRING_SPACE,
            (false, true) => ORDERED_SPACE,
            (false, false) => SPACE,
        };
        let schema = parse_space(space).expect("valid space");
        let config = Arc::new(first_configuration(servers, spare, k, &schema));
        let full = config.spaces[0].schema.clone();
        let geometry = Arc::new(Geometry::new(&full, &[]));
        let nodes = config
            .servers
            .iter()
            .map(|s| {
                let incarnation = 1 + rng.random_range(0..1000);
                let node = Node {
                    replica: Some(start_replica(
                        s.id,
                        incarnation,
                        config.clone(),
                        None,
                        paced,
                    )),
                    store: ModelStore::default(),
                    durable: ModelStore::default(),
                    config: config.clone(),
                    geometry: geometry.clone(),
                    paused: None,
                    lease_lapsed_until_epoch: None,
                    partitioned_until: 0,
                    incarnation,
                    syncs: VecDeque::new(),
                    syncs_asked: 0,
                    synced: 0,
                    deferred: VecDeque::new(),
                    gates: ReadGates::new(),
                    installs: 0,
                };
                (s.id, node)
            })
            .collect();
        Sim {
            rng,
            now: 0,
            geometries: vec![geometry],
            nodes,
            network: BinaryHeap::new(),
            sent: 0,
            configs: vec![config],
            config_deliveries: Vec::new(),
            removals: Vec::new(),
            wake_at: Vec::new(),
            restart_at: Vec::new(),
            failed: BTreeSet::new(),
            history: Vec::new(),
            produced: BTreeMap::new(),
            k,
            faults: [0; 6],
            reads: [0; 2],
            ever_failed: BTreeSet::new(),
            reports: Vec::new(),
            transfers: [0; 2],
            resting: BTreeMap::new(),
            catch_ups: [0; 2],
            backfill_reports: Vec::new(),
            alters,
            alterations: [0; 3],
            dynamic,
            held: Vec::new(),
            shape_requests: Vec::new(),
            shapes: [0; 2],
            transfers_on,
            paced,
            ordered,
            splits: [0; 2],
            trace: 0,
            tracing: std::env::var_os("TESSERA_SIM_TRACE").is_some(),
        }
    }

    pub(crate) fn config(&self) -> &Arc<Configuration> {
        self.configs.last().expect("at least one")
    }

    /// Gives every geometry the subspaces `config` has that they lack (an added or re-cut one),
    /// before any server sees `config`.
    pub(crate) fn extend_geometries(&mut self, config: &Configuration) {
        let schema = &config.spaces[0].schema;
        for g in &mut self.geometries {
            if g.schema.subspaces.len() < schema.subspaces.len() {
                let mut full = g.schema.clone();
                full.subspaces
                    .extend_from_slice(&schema.subspaces[full.subspaces.len()..]);
                *g = Arc::new(Geometry::new(&full, &g.schema.key_splits));
            }
        }
    }

    /// The space's geometry in the coordinator's current configuration.
    pub(crate) fn geometry(&self) -> &Arc<Geometry> {
        self.geometries.last().expect("at least one")
    }

    /// The space's geometry in `config`.
    pub(crate) fn geometry_of(&self, config: &Configuration) -> &Arc<Geometry> {
        let splits = &config.spaces[0].schema.key_splits;
        let geometry = &self.geometries[splits.len()];
        debug_assert_eq!(&geometry.schema.key_splits, splits);
        geometry
    }

    pub(crate) fn leader(&self, config: &Configuration, key: &Value) -> ServerId {
        let region = self.geometry_of(config).key_region(key);
        config.spaces[0].replicas_of(SubspaceId::KEY, region)[0]
    }

    /// Runs one input on `server` and carries out its outputs: writes, then messages, then
    /// replies. Sometimes several inputs share one round of outputs, as a group commit does.
    pub(crate) fn step(&mut self, server: ServerId, input: Input) {
        let node = self.nodes.get_mut(&server).expect("known server");
        if node.replica.is_none() {
            return; // crashed: lost
        }
        if let Some(queue) = &mut node.paused {
            queue.push(input);
            return;
        }
        if self.tracing {
            match &input {
                Input::Configuration(c) => {
                    eprintln!("t={} {server:?} <- configuration {}", self.now, c.epoch)
                }
                other => eprintln!("t={} {server:?} <- {other:?}", self.now),
            }
        }
        if let Input::Configuration(c) = &input {
            if node.lease_lapsed_until_epoch.is_some_and(|e| c.epoch >= e) {
                node.lease_lapsed_until_epoch = None;
            }
        }
        if let (Input::Write { client, .. }, Some(_)) = (&input, node.lease_lapsed_until_epoch) {
            // The shell refuses writes while its lease is lapsed: no effect.
            let event = &mut self.history[client.0 as usize];
            event.ret = Some(self.now);
            event.outcome = Some(Outcome::Failed(Status::Unavailable));
            return;
        }
        let installs = matches!(input, Input::Configuration(_));
        if let Input::Configuration(c) = &input {
            // The shell installs a configuration once everything written is durable, storage
            // first.
            self.flush_durable(server);
            self.install_storage(server, c);
        }
        let node = self.nodes.get_mut(&server).expect("known server");
        let replica = node.replica.as_mut().expect("checked above");
        replica.step(
            input,
            &Reader {
                store: &node.store,
                geometry: &node.geometry,
            },
        );
        if installs {
            self.flush_durable(server);
            self.drop_dropped_subspaces(server);
            self.check_keeps_only(server);
            return;
        }
        if self.rng.random_bool(0.3) {
            return; // outputs wait for a later step's round
        }
        self.flush(server);
    }

    /// What the shell does before its replica steps with `config`, when that is newer than the
    /// configuration it has: storage follows the space's alterations (`Store::alter_space`),
    /// here its key splits, whose entries move to their new regions. (Dropped subspaces go
    /// after the step: [`Sim::drop_dropped_subspaces`].)
    pub(crate) fn install_storage(&mut self, server: ServerId, config: &Arc<Configuration>) {
        let geometry = self.geometry_of(config).clone();
        let node = self.nodes.get_mut(&server).expect("known server");
        if config.epoch <= node.config.epoch {
            return; // the replica ignores it
        }
        node.config = config.clone();
        node.installs += 1;
        if !Arc::ptr_eq(&node.geometry, &geometry) {
            let moved = node.store.follow_key_splits(&node.geometry, &geometry);
            if self.tracing {
                eprintln!(
                    "t={} {server:?} moves {moved} entries to the key regions of configuration {}",
                    self.now, config.epoch
                );
            }
            self.splits[1] += moved;
            node.geometry = geometry;
            // `Store::alter_space` is one fsynced batch: every batch before it is durable too.
            node.durable = node.store.clone();
        }
    }

    /// Once a configuration is installed (and durable): `server`'s storage holds entries only
    /// of the regions the configuration keeps it in (`SpaceConfig::keeps`), as it clears a
    /// region when it stops keeping it, and only then.
    pub(crate) fn check_keeps_only(&self, server: ServerId) {
        let node = &self.nodes[&server];
        let Some(space) = node.config.spaces.iter().find(|s| s.schema.name == "t") else {
            return;
        };
        for (subspace, region, _, key) in node.store.entries.keys() {
            let location = (
                SubspaceId(*subspace),
                tessera_geometry::RegionIndex(*region),
            );
            assert!(
                space.keeps(location.0, location.1, server),
                "t={} {server:?} holds {key} in region {region} of subspace {subspace}, which it does not keep",
                self.now
            );
        }
    }

    /// What the shell does once a configuration is installed: the storage of subspaces it
    /// says are dropped goes.
    pub(crate) fn drop_dropped_subspaces(&mut self, server: ServerId) {
        let node = self.nodes.get_mut(&server).expect("known server");
        let Some(space) = node.config.spaces.iter().find(|s| s.schema.name == "t") else {
            return;
        };
        let dropped: Vec<u16> = space
            .schema
            .subspace_ids()
            .filter(|id| !space.schema.subspace(*id).is_written())
            .map(|id| id.0)
            .collect();
        for store in [&mut node.store, &mut node.durable] {
            store.entries.retain(|(s, _, _, _), _| !dropped.contains(s));
        }
    }

    /// Writes what `server`'s replica produced, as the shell does: the forwards go at once;
    /// the writes are applied (readable) and the replica is told; if they must be durable, an
    /// fsync is asked for, and the round's acknowledgements and replies wait for it and every
    /// earlier one ([`Sim::complete_syncs`], now or later), unless the server crashes first.
    pub(crate) fn flush(&mut self, server: ServerId) {
        let node = self.nodes.get_mut(&server).expect("known");
        let Some(replica) = node.replica.as_mut() else {
            return;
        };
        if node.paused.is_some() {
            return;
        }
        let mut out = replica.take_outputs();
        // Read fences as the shell applies them: pending ones before the forwards leave,
        // settled ones once the writes are in storage.
        let fences = std::mem::take(&mut out.read_fences);
        node.gates.pend(&fences);
        let forwards = std::mem::take(&mut out.forwards);
        self.send(server, forwards);
        let sync = out.must_sync();
        let writes = std::mem::take(&mut out.writes);
        self.write(server, &writes);
        let node = self.nodes.get_mut(&server).expect("known");
        node.replica.as_mut().expect("running").advance();
        let ready = node.gates.settle(&fences);
        for (event, installs) in ready {
            self.finish_read(server, event, installs);
        }
        let node = self.nodes.get_mut(&server).expect("known");
        let incarnation = node.incarnation;
        for u in std::mem::take(&mut out.unknown_shapes) {
            if self.tracing {
                eprintln!(
                    "t={} {server:?} holds a write for shape {}",
                    self.now, u.shape
                );
            }
            self.shapes[1] += 1;
            if !self.shape_requests.contains(&u.shape) {
                self.shape_requests.push(u.shape.clone());
            }
            self.held.push((server, incarnation, u));
        }
        let node = self.nodes.get_mut(&server).expect("known");
        if sync {
            node.syncs_asked += 1;
            node.syncs.push_back((node.syncs_asked, node.store.clone()));
        }
        if node.syncs_asked > node.synced {
            node.deferred.push_back((node.syncs_asked, out));
        } else {
            self.release(server, out);
        }
        if self.rng.random_bool(0.5) {
            self.complete_syncs(server, false);
        }
    }

    /// Applies a round's writes to `server`'s store (readable, not yet durable).
    pub(crate) fn write(&mut self, server: ServerId, writes: &[StoreWrite]) {
        let node = self.nodes.get_mut(&server).expect("known");
        for w in writes {
            if self.tracing {
                eprintln!("t={} {server:?} writes {w:?}", self.now);
            }
            if let StoreWrite::Entry {
                entry: EntryWrite {
                    insert: Some(n), ..
                },
                ..
            }
            | StoreWrite::Log {
                entry: EntryWrite {
                    insert: Some(n), ..
                },
                ..
            } = w
            {
                let produced = self
                    .produced
                    .entry((n.object.key().clone(), n.version))
                    .or_insert(n.object.clone());
                assert_eq!(
                    produced, &n.object,
                    "every hop stores the same object for one version"
                );
            }
            apply(&mut node.store, &node.geometry, w);
            if let StoreWrite::Entry {
                entry:
                    EntryWrite {
                        subspace,
                        insert: Some(n),
                        ..
                    },
                ..
            } = w
            {
                // At no moment is a key twice in one region of a server: a write that moves
                // it within the region removes the old entry in the same batch. (But in a
                // region a transfer is bringing the server back to: entries it kept from
                // before stay until the chunk of their range comes.)
                let (_, region, _, key) = node
                    .geometry
                    .entry(*subspace, &n.object)
                    .expect("a hop stores an object only where it is placed");
                let filling = node.config.spaces.iter().any(|s| {
                    s.schema.name == "t"
                        && s.transfer_at(*subspace, tessera_geometry::RegionIndex(region))
                            .is_some_and(|t| t.to == server)
                });
                let copies: Vec<_> = node
                    .store
                    .entries
                    .iter()
                    .filter(|((s, r, _, k), _)| (*s, *r) == (subspace.0, region) && *k == key)
                    .collect();
                assert!(
                    copies.len() == 1 || filling,
                    "t={} {server:?}: after {w:?} the key is twice in region {region} of subspace {subspace:?}: {copies:?}",
                    self.now
                );
            }
            self.trace = self
                .trace
                .wrapping_mul(31)
                .wrapping_add(format!("{w:?}").len() as u64);
        }
    }

    /// `server`'s fsync thread completes the oldest fsyncs asked for (`all`: every one): what
    /// was written before each is durable; then the rounds waiting for them are released.
    fn complete_syncs(&mut self, server: ServerId, all: bool) {
        let node = self.nodes.get_mut(&server).expect("known");
        if node.paused.is_some() || node.syncs.is_empty() {
            return; // a stopped process fsyncs nothing
        }
        let n = if all {
            node.syncs.len()
        } else {
            self.rng.random_range(1..=node.syncs.len())
        };
        for _ in 0..n {
            let (ticket, store) = node.syncs.pop_front().expect("counted");
            node.durable = store;
            node.synced = ticket;
        }
        let synced = node.synced;
        let mut ready = Vec::new();
        while node.deferred.front().is_some_and(|(t, _)| *t <= synced) {
            ready.push(node.deferred.pop_front().expect("checked").1);
        }
        for out in ready {
            self.release(server, out);
        }
    }

    /// The shell's `flush_durable`: writes what is pending and waits for every fsync.
    pub(crate) fn flush_durable(&mut self, server: ServerId) {
        self.flush(server);
        self.complete_syncs(server, true);
    }

    /// A round's acknowledgements, replies and reports go, once its writes are durable.
    fn release(&mut self, server: ServerId, out: Outputs) {
        for done in out.transfers_done {
            let at = self.now + self.rng.random_range(1..50);
            self.reports.push((at, server, done));
        }
        for done in out.backfills_done {
            let at = self.now + self.rng.random_range(1..50);
            self.backfill_reports.push((at, server, done));
        }
        self.send(server, out.messages);
        for (client, result) in out.replies {
            let event = &mut self.history[client.0 as usize];
            assert!(event.ret.is_none(), "a client is answered once: {event:?}");
            event.ret = Some(self.now);
            event.outcome = Some(match result {
                Ok(()) => Outcome::Done,
                Err(e) => Outcome::Failed(e.status),
            });
        }
    }

    /// Puts `envelopes` from `server` on the network, which may lose or duplicate each.
    fn send(&mut self, server: ServerId, envelopes: Vec<(ServerId, Envelope)>) {
        let partitioned = self.nodes[&server].partitioned_until > self.now;
        for (to, envelope) in envelopes {
            let lost = partitioned || self.nodes[&to].partitioned_until > self.now;
            let copies = if lost || self.rng.random_bool(0.05) {
                0
            } else if self.rng.random_bool(0.1) {
                2
            } else {
                1
            };
            for _ in 0..copies {
                let at = self.now + self.rng.random_range(1..40);
                self.sent += 1;
                self.network
                    .push(Reverse((at, self.sent, to, EnvelopeBox(envelope.clone()))));
            }
        }
    }
}
