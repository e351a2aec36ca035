//! One server's share of value-dependent chain replication, as a deterministic state machine.
//!
//! Inputs: client writes for keys this server leads, envelopes from other servers, new
//! configurations and clock ticks. Outputs, in the order the shell must carry them out: storage
//! writes to make durable, then envelopes to send, then replies to clients. Nothing here
//! touches a socket, a clock or a file; the only read is of the committed object of a key this
//! server leads, through [`CommittedReader`].
//!
//! The protocol (DESIGN §5, seed 002 §4.1):
//! - The point leader (head of the key region's replica set) orders a key's writes: it
//!   evaluates each against the key's latest object, pending writes included, gives it the next
//!   version and sends it down the chain computed from the old and new objects.
//! - Each hop applies the update as pending and forwards it; the tail commits and acknowledges;
//!   each hop commits when the acknowledgement passes it (an old region's hop drops its entry)
//!   and the point leader answers the client last: an acknowledged write is on every replica.
//! - Updates of one key reach each hop in version order: links are FIFO ([`crate::link`]) and
//!   consecutive non-destructive updates share their chain; an update that arrives before the
//!   one it must follow is delayed, except where it enters a region.
//! - A destructive update (a delete, or one that moves the object out of a region) holds the
//!   key's next writes at the point leader until it is acknowledged.
//! - A reply that depends on uncommitted state (a failed condition) waits until the key's
//!   earlier writes commit.
//! - Messages carry the epoch of the chain they were built on. One from a newer configuration
//!   waits until this server has it. One from an older configuration is applied only if its hop
//!   is still this server's under the current one: replica sets of existing regions do not
//!   change in this release, so in-flight chains stay valid across epochs.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use tessera_geometry::{chain_for_update, key_region, point, ChainHop, RegionIndex, ReplicaMap, Tessellation};
use tessera_protocol::{Configuration, ErrorReply, SpaceConfig, Status};
use tessera_storage::{ObjectWrite, StoredObject};
use tessera_types::{Epoch, Object, ServerId, SubspaceId, Value, Version};

use crate::link::Link;
use crate::message::{ChainAck, ChainUpdate, Envelope, PeerMessage};
use crate::write::{evaluate, KeyWrite};

/// The shell's handle on a client request, returned with its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub u64);

#[derive(Debug)]
pub enum Input {
    /// A client's write to a key of `space`.
    Write { client: ClientId, space: String, write: KeyWrite },
    Peer(Envelope),
    Configuration(Arc<Configuration>),
    /// Time passes: retransmit what the network may have lost.
    Tick,
}

/// What one or more steps produced, in the order the shell must act on it.
#[derive(Debug, Default)]
pub struct Outputs {
    /// 1. Make these durable (one atomic batch is fine).
    pub writes: Vec<ObjectWrite>,
    /// 2. Then send these.
    pub messages: Vec<(ServerId, Envelope)>,
    /// 3. Then answer these clients.
    pub replies: Vec<(ClientId, Result<(), ErrorReply>)>,
}

impl Outputs {
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.messages.is_empty() && self.replies.is_empty()
    }
}

/// The committed object of a key, as the point leader reads it (its storage, in the server).
pub trait CommittedReader {
    /// The committed object of `key` (the point leader's key region holds it).
    fn get(&self, space: &str, key: &Value) -> Result<Option<StoredObject>, ErrorReply>;
    /// The version of the committed entry that stores exactly `object` in `subspace`, if any.
    fn entry_version(&self, space: &str, subspace: SubspaceId, object: &Object) -> Result<Option<Version>, ErrorReply>;
}

/// A space of the configuration with its tessellations.
struct SpaceRuntime {
    config: SpaceConfig,
    tessellations: Vec<Tessellation>,
}

impl ReplicaMap for SpaceRuntime {
    fn replicas(&self, subspace: SubspaceId, region: RegionIndex) -> &[ServerId] {
        self.config.replicas_of(subspace, region)
    }
}

impl SpaceRuntime {
    fn new(config: SpaceConfig) -> SpaceRuntime {
        SpaceRuntime { tessellations: config.tessellations(), config }
    }

    fn chain(&self, u: &ChainUpdate) -> Vec<ChainHop> {
        chain_for_update(&self.config.schema, &self.tessellations, self, u.old.as_ref(), u.new.as_ref())
    }

    fn region_of(&self, subspace: SubspaceId, object: &Object) -> RegionIndex {
        self.tessellations[subspace.get()].region_of(&point(&self.config.schema, subspace, object))
    }

    fn point_leader(&self, key: &Value) -> ServerId {
        let region = key_region(&self.tessellations[SubspaceId::KEY.get()], key);
        self.config.replicas_of(SubspaceId::KEY, region)[0]
    }

    /// Whether `u` moves the object out of a region of some subspace, or deletes it.
    fn is_destructive(&self, u: &ChainUpdate) -> bool {
        match (&u.old, &u.new) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some(o), Some(n)) => self
                .config
                .schema
                .subspace_ids()
                .skip(1)
                .any(|s| self.region_of(s, o) != self.region_of(s, n)),
        }
    }

    /// Whether the hop's region gains the object with `u` (it did not hold the old one).
    fn enters(&self, hop: &ChainHop, u: &ChainUpdate) -> bool {
        u.old.as_ref().is_none_or(|o| self.region_of(hop.subspace, o) != hop.region)
    }

    /// The storage write that commits `u` at `hop`.
    fn hop_write(&self, hop: &ChainHop, u: &ChainUpdate) -> ObjectWrite {
        let here = |o: &&Object| self.region_of(hop.subspace, o) == hop.region;
        let remove = u.old.as_ref().filter(here).cloned();
        let insert = u.new.as_ref().filter(here).map(|o| StoredObject { version: u.version, object: o.clone() });
        assert!(remove.is_some() || insert.is_some(), "a hop holds the old or the new object");
        ObjectWrite::Entry { space: self.config.schema.name.clone(), subspace: hop.subspace, remove, insert }
    }
}

/// What this server remembers of a key while work on it is unfinished. Dropped when idle:
/// then every update of the key this server took part in has committed here.
#[derive(Default, Debug)]
struct KeyState {
    // As point leader.
    /// The latest object, pending updates included (`None` until read from storage).
    latest: Option<Option<StoredObject>>,
    /// Highest version this leader gave the key.
    issued: Version,
    /// Updates sent down their chain, not yet acknowledged: version -> client.
    in_flight: BTreeMap<Version, ClientId>,
    /// A destructive update in flight: the key's next writes wait for it.
    blocked_by: Option<Version>,
    held: VecDeque<(ClientId, KeyWrite)>,
    /// Failure replies waiting for a version to commit.
    deferred: Vec<(Version, ClientId, ErrorReply)>,
    // As any hop.
    /// Updates applied here, not yet committed: (version, hop).
    pending: BTreeMap<(Version, u32), Pending>,
    /// The last version applied (pending or committed) per region held here.
    applied: BTreeMap<(SubspaceId, RegionIndex), Version>,
    /// Updates that arrived before the one they follow.
    delayed: Vec<ChainUpdate>,
}

impl KeyState {
    fn is_idle(&self) -> bool {
        self.in_flight.is_empty()
            && self.held.is_empty()
            && self.deferred.is_empty()
            && self.pending.is_empty()
            && self.delayed.is_empty()
    }
}

/// An update applied at one hop of this server and not yet committed there.
#[derive(Debug)]
struct Pending {
    update: ChainUpdate,
    location: (SubspaceId, RegionIndex),
    /// The rest of the chain has it: it commits here as soon as every earlier version pending
    /// at the same location has (chains of successive versions differ where one relocates,
    /// so acknowledgements can overtake each other).
    acked: bool,
}

/// A server's replication state machine.
pub struct Replica {
    me: ServerId,
    incarnation: u64,
    epoch: Epoch,
    spaces: BTreeMap<u64, Arc<SpaceRuntime>>,
    /// Space name -> id in the current configuration.
    names: BTreeMap<String, u64>,
    keys: BTreeMap<(u64, Value), KeyState>,
    links: BTreeMap<ServerId, Link>,
    /// Messages built on a configuration this server does not have yet, in arrival order.
    future: Vec<PeerMessage>,
    /// Messages between two hops that are both this server.
    local: VecDeque<PeerMessage>,
    tick: u64,
    /// The highest version this server gave any key. A key's next version is above both its
    /// latest and this, so versions keep growing across a delete (whose key state is then
    /// forgotten) as long as the process lives.
    clock: Version,
    outputs: Outputs,
}

impl Replica {
    /// `incarnation` must grow with every start of the server's process (a start time will do).
    pub fn new(me: ServerId, incarnation: u64, config: Arc<Configuration>) -> Replica {
        assert!(incarnation > 0, "incarnation 0 means unknown");
        let mut r = Replica {
            me,
            incarnation,
            epoch: Epoch(0),
            spaces: BTreeMap::new(),
            names: BTreeMap::new(),
            keys: BTreeMap::new(),
            links: BTreeMap::new(),
            future: Vec::new(),
            local: VecDeque::new(),
            tick: 0,
            clock: Version::NONE,
            outputs: Outputs::default(),
        };
        r.install(config);
        r
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    pub fn me(&self) -> ServerId {
        self.me
    }

    /// Handles one input. Outputs accumulate until [`Replica::take_outputs`].
    pub fn step(&mut self, input: Input, store: &impl CommittedReader) {
        match input {
            Input::Write { client, space, write } => self.on_write(client, &space, write, store),
            Input::Peer(envelope) => self.on_envelope(envelope, store),
            Input::Configuration(config) => {
                if config.epoch > self.epoch {
                    self.install(config);
                    let ready: Vec<PeerMessage> = std::mem::take(&mut self.future);
                    for m in ready {
                        self.deliver(m, store);
                    }
                }
            }
            Input::Tick => {
                self.tick += 1;
                let tick = self.tick;
                let mut resend = Vec::new();
                for (&peer, link) in self.links.iter_mut() {
                    for (seq, m) in link.due(tick) {
                        resend.push((peer, seq, m, link.peer_incarnation));
                    }
                }
                for (peer, seq, m, to_incarnation) in resend {
                    self.push_envelope(peer, seq, to_incarnation, Some(m));
                }
            }
        }
        while let Some(m) = self.local.pop_front() {
            self.deliver(m, store);
        }
    }

    /// Everything produced since the last call. The shell makes the writes durable before it
    /// sends the messages, and sends the messages before it answers the clients; it must do so
    /// before the next step that could read storage. Keys with no unfinished work are forgotten
    /// here: from now on their committed state is storage's.
    pub fn take_outputs(&mut self) -> Outputs {
        let mut out = std::mem::take(&mut self.outputs);
        for (&peer, link) in self.links.iter_mut() {
            if !link.ack_owed {
                continue;
            }
            link.ack_owed = false;
            if !out.messages.iter().any(|(to, _)| *to == peer) {
                out.messages.push((
                    peer,
                    Envelope {
                        from: self.me,
                        incarnation: self.incarnation,
                        to_incarnation: link.peer_incarnation,
                        seq: 0,
                        ack: 0,
                        body: None,
                    },
                ));
            }
        }
        for (to, envelope) in out.messages.iter_mut() {
            envelope.ack = self.links.get(to).map_or(0, Link::delivered);
        }
        self.keys.retain(|_, k| !k.is_idle());
        out
    }

    /// Keys with unfinished work here, and messages not yet acknowledged by their receiver.
    pub fn backlog(&self) -> (usize, usize) {
        (self.keys.len(), self.links.values().map(Link::unacked_len).sum())
    }

    fn install(&mut self, config: Arc<Configuration>) {
        assert!(config.epoch > self.epoch || self.spaces.is_empty(), "epochs only move forward");
        let spaces: BTreeMap<u64, Arc<SpaceRuntime>> = config
            .spaces
            .iter()
            .map(|s| match self.spaces.get(&s.id) {
                Some(existing) if existing.config == *s => (s.id, existing.clone()),
                _ => (s.id, Arc::new(SpaceRuntime::new(s.clone()))),
            })
            .collect();
        // Writes to a dropped space fail; its chains stop here.
        let gone: Vec<(u64, Value)> =
            self.keys.keys().filter(|(space, _)| !spaces.contains_key(space)).cloned().collect();
        for key in gone {
            let state = self.keys.remove(&key).expect("listed above");
            let error = || Err(ErrorReply::new(Status::UnknownSpace, "the space was removed"));
            let clients = state
                .in_flight
                .into_values()
                .chain(state.held.into_iter().map(|(c, _)| c))
                .chain(state.deferred.into_iter().map(|(_, c, _)| c));
            for client in clients {
                self.outputs.replies.push((client, error()));
            }
        }
        self.names = config.spaces.iter().map(|s| (s.schema.name.clone(), s.id)).collect();
        self.spaces = spaces;
        self.epoch = config.epoch;
    }

    fn send(&mut self, to: ServerId, message: PeerMessage) {
        if to == self.me {
            self.local.push_back(message);
            return;
        }
        let link = self.links.entry(to).or_default();
        let seq = link.send(message.clone(), self.tick);
        let to_incarnation = link.peer_incarnation;
        self.push_envelope(to, seq, to_incarnation, Some(message));
    }

    fn push_envelope(&mut self, to: ServerId, seq: u64, to_incarnation: u64, body: Option<PeerMessage>) {
        let envelope = Envelope { from: self.me, incarnation: self.incarnation, to_incarnation, seq, ack: 0, body };
        self.outputs.messages.push((to, envelope));
    }

    fn on_envelope(&mut self, e: Envelope, store: &impl CommittedReader) {
        if e.from == self.me {
            tracing::warn!("dropped an envelope from this server to itself");
            return;
        }
        if e.to_incarnation != 0 && e.to_incarnation != self.incarnation {
            // Meant for this server's previous life; answering tells the sender who we are now.
            self.links.entry(e.from).or_default().ack_owed = true;
            return;
        }
        let tick = self.tick;
        let link = self.links.entry(e.from).or_default();
        if e.incarnation < link.peer_incarnation {
            return; // from the sender's previous life
        }
        if e.incarnation > link.peer_incarnation {
            if link.peer_incarnation == 0 {
                link.peer_incarnation = e.incarnation;
            } else {
                let resend = link.reset(e.incarnation, tick);
                for (seq, m) in resend {
                    self.push_envelope(e.from, seq, e.incarnation, Some(m));
                }
            }
        }
        let link = self.links.get_mut(&e.from).expect("created above");
        link.on_ack(e.ack);
        if let Some(body) = e.body {
            for m in link.on_message(e.seq, body) {
                self.deliver(m, store);
            }
        }
    }

    fn deliver(&mut self, m: PeerMessage, store: &impl CommittedReader) {
        let epoch = match &m {
            PeerMessage::Chain(u) => u.epoch,
            PeerMessage::Ack(a) => a.epoch,
        };
        if epoch > self.epoch {
            self.future.push(m);
            return;
        }
        match m {
            PeerMessage::Chain(u) => self.on_chain(u, store),
            PeerMessage::Ack(a) => self.on_ack(a, store),
        }
    }

    fn on_write(&mut self, client: ClientId, space: &str, write: KeyWrite, store: &impl CommittedReader) {
        let Some(rt) = self.names.get(space).and_then(|id| self.spaces.get(id)).cloned() else {
            let error = ErrorReply::new(Status::UnknownSpace, format!("no space named {space:?}"));
            return self.outputs.replies.push((client, Err(error)));
        };
        let leader = rt.point_leader(write.key());
        if leader != self.me {
            let error = ErrorReply::new(
                Status::StaleEpoch,
                format!("server {leader} leads that key in epoch {}; refresh the configuration", self.epoch),
            );
            return self.outputs.replies.push((client, Err(error)));
        }
        let state = self.keys.entry((rt.config.id, write.key().clone())).or_default();
        if state.blocked_by.is_some() {
            state.held.push_back((client, write));
            return;
        }
        let latest = match &state.latest {
            Some(l) => l.clone(),
            None => match store.get(&rt.config.schema.name, write.key()) {
                Ok(l) => l,
                Err(e) => return self.outputs.replies.push((client, Err(e))),
            },
        };
        let new = match evaluate(&rt.config.schema, latest.as_ref().map(|l| &l.object), &write) {
            Ok(new) => new,
            Err(e) => {
                match state.in_flight.keys().next_back() {
                    Some(&last) => state.deferred.push((last, client, e)),
                    None => self.outputs.replies.push((client, Err(e))),
                }
                state.latest = Some(latest);
                return;
            }
        };
        let version = self.clock.max(state.issued).max(latest.as_ref().map_or(Version::NONE, |l| l.version)).next();
        self.clock = version;
        let update = ChainUpdate {
            space: rt.config.id,
            epoch: self.epoch,
            version,
            after: state.in_flight.keys().next_back().copied(),
            old: latest.map(|l| l.object),
            new,
            hop: 0,
        };
        state.issued = version;
        state.latest = Some(update.new.clone().map(|object| StoredObject { version, object }));
        state.in_flight.insert(version, client);
        if rt.is_destructive(&update) {
            state.blocked_by = Some(version);
        }
        self.on_chain(update, store);
    }

    fn on_chain(&mut self, u: ChainUpdate, store: &impl CommittedReader) {
        let Some(rt) = self.spaces.get(&u.space).cloned() else { return };
        let chain = rt.chain(&u);
        let hop_index = u.hop as usize;
        let Some(hop) = chain.get(hop_index).cloned().filter(|h| h.server == self.me) else {
            tracing::warn!(version = %u.version, hop = u.hop, "dropped a chain message this server has no hop for");
            return;
        };
        let key = (u.space, u.key().clone());
        let state = self.keys.entry(key.clone()).or_default();
        let location = (hop.subspace, hop.region);
        if state.pending.contains_key(&(u.version, u.hop))
            || state.applied.get(&location).is_some_and(|&v| v >= u.version)
        {
            return; // a repeat: the link layer should have dropped it
        }
        if let Some(after) = u.after.filter(|_| !rt.enters(&hop, &u)) {
            // The update this one follows produced the object this region holds: wait for it.
            let ready = match state.applied.get(&location) {
                Some(&applied) => applied >= after,
                // Forgotten here: then it committed, and storage holds what it produced.
                None => {
                    let old = u.old.as_ref().expect("an update that does not enter has an old object");
                    match store.entry_version(&rt.config.schema.name, hop.subspace, old) {
                        Ok(v) => v.is_some_and(|v| v >= after),
                        Err(e) => {
                            tracing::error!(error = %e, "reading a committed entry; the update waits");
                            false
                        }
                    }
                }
            };
            if !ready {
                state.delayed.push(u);
                return;
            }
        }
        state.applied.insert(location, u.version);
        let is_tail = hop_index + 1 == chain.len();
        state.pending.insert((u.version, u.hop), Pending { update: u.clone(), location, acked: is_tail });
        if is_tail {
            self.commit_in_order(&rt, &key, location, store);
        } else {
            let next = ChainUpdate { hop: u.hop + 1, ..u };
            self.send(chain[hop_index + 1].server, PeerMessage::Chain(next));
        }
        self.retry_delayed(&key, store);
    }

    /// Commits, in version order, the acknowledged updates pending at `location`, up to the
    /// first one that is not acknowledged yet; passes each acknowledgement up its chain.
    fn commit_in_order(
        &mut self,
        rt: &SpaceRuntime,
        key: &(u64, Value),
        location: (SubspaceId, RegionIndex),
        store: &impl CommittedReader,
    ) {
        loop {
            let Some(state) = self.keys.get_mut(key) else { return };
            let Some((&id, first)) = state.pending.iter().find(|(_, p)| p.location == location) else { return };
            if !first.acked {
                return;
            }
            let u = state.pending.remove(&id).expect("found above").update;
            let chain = rt.chain(&u);
            let hop = u.hop as usize;
            assert_eq!(chain[hop].server, self.me, "a hop commits its own updates");
            self.commit(rt, &chain[hop], &u);
            if hop == 0 {
                self.leader_committed(key.clone(), u.version);
                self.release_held(rt, key, store);
            } else {
                let ack = self.ack_for(&u, hop - 1);
                self.send(chain[hop - 1].server, ack);
            }
        }
    }

    fn retry_delayed(&mut self, key: &(u64, Value), store: &impl CommittedReader) {
        let Some(state) = self.keys.get_mut(key) else { return };
        if state.delayed.is_empty() {
            return;
        }
        let mut delayed = std::mem::take(&mut state.delayed);
        delayed.sort_by_key(|u| u.version);
        for u in delayed {
            self.on_chain(u, store);
        }
    }

    fn ack_for(&self, u: &ChainUpdate, hop: usize) -> PeerMessage {
        PeerMessage::Ack(ChainAck {
            space: u.space,
            epoch: u.epoch,
            key: u.key().clone(),
            version: u.version,
            hop: hop as u32,
        })
    }

    fn commit(&mut self, rt: &SpaceRuntime, hop: &ChainHop, u: &ChainUpdate) {
        self.outputs.writes.push(rt.hop_write(hop, u));
    }

    fn on_ack(&mut self, a: ChainAck, store: &impl CommittedReader) {
        let Some(rt) = self.spaces.get(&a.space).cloned() else { return };
        let key = (a.space, a.key.clone());
        let Some(pending) = self.keys.get_mut(&key).and_then(|s| s.pending.get_mut(&(a.version, a.hop))) else {
            return; // a repeat
        };
        pending.acked = true;
        let location = pending.location;
        self.commit_in_order(&rt, &key, location, store);
    }

    /// The whole chain has `version`: answer its client and whoever waited for it.
    fn leader_committed(&mut self, key: (u64, Value), version: Version) {
        let state = self.keys.get_mut(&key).expect("the leader tracks its in-flight updates");
        let client = state.in_flight.remove(&version).expect("committed at the head once");
        assert!(
            state.in_flight.keys().all(|&v| v > version),
            "a key's updates commit at its point leader in version order"
        );
        self.outputs.replies.push((client, Ok(())));
        let (ready, waiting): (Vec<_>, Vec<_>) = state.deferred.drain(..).partition(|(v, _, _)| *v <= version);
        state.deferred = waiting;
        for (_, client, error) in ready {
            self.outputs.replies.push((client, Err(error)));
        }
        if state.blocked_by == Some(version) {
            state.blocked_by = None;
        }
    }

    fn release_held(&mut self, rt: &SpaceRuntime, key: &(u64, Value), store: &impl CommittedReader) {
        loop {
            let Some(state) = self.keys.get_mut(key) else { return };
            if state.blocked_by.is_some() {
                return;
            }
            let Some((client, write)) = state.held.pop_front() else { return };
            self.on_write(client, &rt.config.schema.name, write, store);
        }
    }
}
