//! One server's share of value-dependent chain replication, as a deterministic state machine.
//!
//! Inputs: client writes for keys this server leads, envelopes from other servers, new
//! configurations and clock ticks. Outputs ([`Outputs`]), in the order the shell must carry
//! them out: updates to pass down their chains at once, storage writes to write (and to make
//! durable, if [`Outputs::must_sync`]), then acknowledgements and other envelopes to send,
//! then replies to clients; the shell reports the writes written ([`Replica::advance`], as
//! etcd-raft's `Advance`) or failed ([`Replica::fail`]). Nothing here touches a socket, a
//! clock or a file; the only reads are of committed state, through [`CommittedReader`].
//!
//! The protocol (DESIGN §5, seed 002 §4.1, §4.3):
//! - The point leader (head of the key region's replica set) orders a key's writes: it
//!   evaluates each against the key's latest object, pending writes included, gives it the next
//!   version and sends it down the chain computed from the old and new objects.
//! - Each hop applies the update as pending, records it in its log of pending updates
//!   ([`StoreWrite::Log`]) and forwards it before that record is durable: the fsyncs of a
//!   chain's hops overlap. The tail commits and acknowledges once its commit is durable; each
//!   hop passes the acknowledgement on once its own record is durable, and commits then (an
//!   old region's hop drops its entry) without an fsync of its own: the record holds the
//!   update, and a server that restarts commits every record it finds. The point leader
//!   answers the client last: an acknowledged write is durable on every replica, and a
//!   chain costs about one fsync and its network hops, not one fsync per hop.
//! - Updates of one key reach each hop in version order: links are FIFO ([`crate::link`]) and
//!   consecutive non-destructive updates share their chain; an update that arrives before the
//!   one it must follow is delayed, except where it enters a region.
//! - A destructive update (a delete, or one that moves the object out of a region) is issued
//!   only once every earlier update of the key has committed, and holds the key's later writes
//!   until it is acknowledged: nothing of the key travels beside it.
//! - A reply that depends on uncommitted state (a failed condition) waits until the key's
//!   earlier writes commit.
//! - Messages carry the epoch of the chain they were built on. One from a newer configuration
//!   waits until this server has it; one from an older configuration is dropped. On every new
//!   configuration each server sends every update pending at it again, along the update's
//!   chain in the new configuration, from its own place on it: chains skip removed servers,
//!   and a hop that has an update already passes it on (if pending) or acknowledges it (if
//!   committed). The first replica of a key region becomes its point leader when the one before
//!   it is removed, and takes over the updates pending there (their clients were the old
//!   leader's: nobody is answered for them).
//! - State transfer (a region gaining a replica, `tessera_protocol::Transfer`): the target is
//!   the last member of the region's replica set from the epoch that starts the transfer, so
//!   it takes part in every chain through the region from then on, and the member before it
//!   (the source) is its only predecessor there. The source streams the region's committed
//!   entries in chunks over the same FIFO link ([`TransferChunk`]), read from storage only
//!   when everything this machine produced is durable, and leaving out keys with an update
//!   pending at the source's hop: that update, sent to the target on the chain, carries the
//!   key's object. So no chunk carries an entry older than an update the target already
//!   has. The target reports the transfer complete once the last chunk is durable.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Deref;
use std::sync::Arc;

use tessera_geometry::{chain_for_update, point, ChainHop, RegionIndex, ReplicaMap};
use tessera_protocol::{
    BackfillRef, Configuration, ErrorReply, SpaceConfig, SpaceMap, Status, TransferRef,
};
use tessera_types::{
    Epoch, Object, ServerId, Shape, StoredObject, SubspaceId, SubspaceState, Value, Version,
    DOCUMENT_INDEX, FORMULA_INDEX,
};

use crate::check::{check_contents, check_shape};
use crate::link::Link;
use crate::message::{ChainAck, ChainUpdate, Envelope, PeerMessage, TransferChunk};
use crate::read_gate::ReadFence;
use crate::write::{evaluate, KeyWrite};

/// The shell's handle on a client request, returned with its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub u64);

impl ClientId {
    /// The state machine's own rewrites of a backfill ([`KeyWrite::Rewrite`]): their replies
    /// are never handed to the shell.
    const BACKFILL: ClientId = ClientId(u64::MAX);
}

/// A region of a subspace: where one hop of a chain keeps its copy.
type Location = (SubspaceId, RegionIndex);

/// A state transfer: the space's id, the region, and the transfer's id.
type TransferKey = (u64, Location, u64);

/// Where a transfer into this server stands.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Incoming {
    /// Chunks are coming.
    Receiving,
    /// The last chunk came. The source left out keys with an update pending at it, which it
    /// had sent here first; until those updates commit here, this region's committed state
    /// lacks those keys, so the transfer is not reported yet. Listed: (key, version).
    Settling(Vec<(Value, Version)>),
    /// Reported complete (the target is a full replica once the coordinators agree).
    Reported,
}

/// Chunk messages of a transfer a source lets go unacknowledged on its link to the target
/// (with the chain messages on that link): the flow control that keeps a transfer from
/// flooding the target or the source's memory.
pub const TRANSFER_WINDOW: usize = 4;
/// Ticks an update may wait at a hop for its acknowledgement before the hop sends it on
/// again, in its current configuration. Links retransmit what the network loses; this covers
/// what a receiver rightly dropped: a message built before the receiver (re)joined the region
/// it names, when this hop's configuration did not show the change (it skipped the epochs in
/// which the next hop left and came back).
pub const CHAIN_RESEND_TICKS: u64 = 40;
/// About how many bytes of entries a transfer chunk carries (at least one entry).
pub const TRANSFER_CHUNK_BYTES: usize = 256 * 1024;
/// Ticks a hop remembers that a key left one of its regions (deleted, or moved out): long
/// enough to outlast any copy of an earlier update of the key still on its way here (sent
/// again after a chain repair, while the original was being acknowledged). Such a copy finds
/// nothing of the key in storage and would otherwise put the superseded object back. A link
/// delivers within a lease or the sender leaves the chain; this is many leases.
pub const TOMBSTONE_TICKS: u64 = 400;
/// Rewrites of backfills a point leader keeps under way at a time, over all its key regions:
/// enough to keep chains busy, few enough that client writes are not queued behind a flood.
pub const BACKFILL_WINDOW: usize = 128;
/// About how many bytes of a key region a backfill reads from storage at a time.
const BACKFILL_CHUNK_BYTES: usize = 64 * 1024;
const _: () = assert!(
    TRANSFER_CHUNK_BYTES + tessera_types::constants::OBJECT_BYTES_MAX
        < tessera_protocol::constants::FRAME_BYTES_MAX
);

#[derive(Debug)]
pub enum Input {
    /// A client's write to a key of `space`.
    Write {
        client: ClientId,
        space: String,
        write: KeyWrite,
    },
    /// An envelope from a peer. The shell should have run [`crate::check_envelope`] on it
    /// (and closed the connection of a peer that sent a bad one); the state machine checks
    /// each message again and drops a bad one.
    Peer(Envelope),
    Configuration(Arc<Configuration>),
    /// Time passes: retransmit what the network may have lost.
    Tick,
}

/// A record of this server's log of pending updates ([`StoreWrite::Log`]), numbered by the
/// process that wrote it (a restarting server commits and removes every record it finds
/// before its replica starts, so numbers start again at 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogId(pub u64);

/// One subspace entry of one key, at a hop: remove the entry of `remove` and/or store
/// `insert` (both of one key). A relocation's old-region hop only removes, its new-region hop
/// only inserts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryWrite {
    pub space: String,
    pub subspace: SubspaceId,
    pub remove: Option<Object>,
    pub insert: Option<StoredObject>,
}

/// A change the shell writes before it sends or answers anything of the same round, and
/// makes durable first if any write of the round [`StoreWrite::needs_sync`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreWrite {
    /// Commits an update at a hop (or stores an entry of a state transfer). `retires`: the
    /// update's record in the log ([`StoreWrite::Log`]), removed in the same atomic batch;
    /// that record made the update durable here already, so this write needs no fsync.
    Entry {
        entry: EntryWrite,
        retires: Option<LogId>,
    },
    /// An update applied at a hop on its way down its chain and not committed yet: the commit
    /// it will make there (`entry`), `version` its version. Durable before this hop passes on
    /// an acknowledgement of it (it is written with the round that applied the update, and
    /// acknowledgements come in later rounds). A server that restarts commits every record
    /// it finds, in version order, before anything else: each is an update this server
    /// passed on whose commit here may not have reached the disk. (A restarted server then
    /// leaves every replica set it can leave, so the records only matter where it was the
    /// last replica left: then every acknowledged write is among them or committed.)
    Log {
        id: LogId,
        version: Version,
        entry: EntryWrite,
    },
    /// The update logged under this id is no longer pending here without having committed
    /// (this server stopped holding its region): its record goes.
    Unlog(LogId),
    /// This server no longer holds `region` of `subspace`: every entry of it goes.
    ClearRegion {
        space: String,
        subspace: SubspaceId,
        region: RegionIndex,
    },
}

impl StoreWrite {
    /// Whether the round's messages and replies must wait until this write is durable, not
    /// only written: everything but a commit that retires a durable log record, and the
    /// removal of a record.
    pub fn needs_sync(&self) -> bool {
        !matches!(
            self,
            StoreWrite::Entry {
                retires: Some(_),
                ..
            } | StoreWrite::Unlog(_)
        )
    }
}

/// What one or more steps produced, in the order the shell must act on it.
#[derive(Debug, Default)]
pub struct Outputs {
    /// 0. Send these at once, before the writes are durable (and while they are made so):
    ///    updates passed down their chains and transfer chunks. They vouch for nothing about
    ///    this server's storage: a hop acknowledges only in [`Outputs::messages`], once its
    ///    log record (or, at the tail, its commit) is durable, and an update is answered only
    ///    once every hop has acknowledged it. So the hops' fsyncs overlap. If this server
    ///    then loses the writes (a crash, a failed commit), it leaves the chains and the hops
    ///    around it carry on, as after any failure (DESIGN §5.7).
    pub forwards: Vec<(ServerId, Envelope)>,
    /// 1. Write these (one atomic batch, readable at once), then report it with
    ///    [`Replica::advance`] (or [`Replica::fail`] if that failed) before the next step.
    ///    If [`Outputs::must_sync`], they must be durable before anything below is carried
    ///    out; the shell may fsync on another thread and step on meanwhile.
    pub writes: Vec<StoreWrite>,
    /// 2. Only once the writes are durable as [`Outputs::must_sync`] says, and every earlier
    ///    round's writes too (round order: a round that needs no fsync of its own may vouch
    ///    for an earlier round's log records), send these: acknowledgements (each one says
    ///    the update is durable here and at every hop after), retransmissions, and envelopes
    ///    that only acknowledge delivery.
    pub messages: Vec<(ServerId, Envelope)>,
    /// 3. Then answer these clients.
    pub replies: Vec<(ClientId, Result<(), ErrorReply>)>,
    /// 4. And tell the coordinators these transfers into this server are complete (until
    ///    a configuration without them arrives: the report may be lost).
    pub transfers_done: Vec<TransferRef>,
    /// 5. And that this server finished backfilling these key regions into the subspace
    ///    being built (`tessera_protocol::Build`), until a configuration records them.
    pub backfills_done: Vec<BackfillRef>,
    /// 6. Writes not ordered because they would store a document of a shape the space has
    ///    not registered: register it (`SpaceChange::AddShape`), then write again (the write
    ///    is evaluated afresh), or answer the client why not.
    pub unknown_shapes: Vec<UnknownShape>,
    /// For the metrics only: the hops of each chain this server started as a point leader.
    pub chains_started: Vec<usize>,
    /// What changed the versions pending at this server's key regions, for the reads by key
    /// it serves ([`crate::read_gate`]): apply the pending fences before step 0 and the settled
    /// ones after step 1.
    pub read_fences: Vec<ReadFence>,
}

/// A write held back for its document's shape (see [`Outputs::unknown_shapes`]).
#[derive(Clone, Debug)]
pub struct UnknownShape {
    pub client: ClientId,
    pub space: String,
    pub write: KeyWrite,
    pub shape: Shape,
}

impl Outputs {
    /// Reports every version of `key` up to `version` settled at its key region here
    /// ([`ReadFence::Settled`]).
    fn settle_reads(&mut self, space: u64, key: &Value, version: Version) {
        self.read_fences.push(ReadFence::Settled {
            space,
            key: key.clone(),
            version,
        });
    }

    /// Whether the writes must be durable (fsync) before the messages and replies go: some
    /// write needs it ([`StoreWrite::needs_sync`]). Otherwise writing them is enough.
    pub fn must_sync(&self) -> bool {
        self.writes.iter().any(StoreWrite::needs_sync)
    }

    pub fn is_empty(&self) -> bool {
        self.forwards.is_empty()
            && self.writes.is_empty()
            && self.messages.is_empty()
            && self.replies.is_empty()
            && self.transfers_done.is_empty()
            && self.backfills_done.is_empty()
            && self.unknown_shapes.is_empty()
            && self.read_fences.is_empty()
    }
}

/// Part of a region's committed entries, in storage order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RegionChunk {
    pub entries: Vec<StoredObject>,
    /// Where the next chunk starts (an opaque storage position), `None` when the region has
    /// no more entries.
    pub next: Option<Vec<u8>>,
}

/// Committed state, as storage holds it.
pub trait CommittedReader {
    /// The committed object of `key` (the point leader's key region holds it).
    fn get(&self, space: &str, key: &Value) -> Result<Option<StoredObject>, ErrorReply>;
    /// The version of `key`'s committed entry in `region` of `subspace`, wherever its point
    /// (a scan of the region: used only for updates sent again after a chain repair).
    fn region_entry_version(
        &self,
        space: &str,
        subspace: SubspaceId,
        region: RegionIndex,
        key: &Value,
    ) -> Result<Option<Version>, ErrorReply>;
    /// The version of the committed entry stored at exactly `object`'s place (its key at its
    /// point) in `subspace`, if any.
    fn entry_version(
        &self,
        space: &str,
        subspace: SubspaceId,
        object: &Object,
    ) -> Result<Option<Version>, ErrorReply>;
    /// The committed entries of `region` of `subspace` after the position `after` (`None`:
    /// from the start), about `max_bytes` of them but at least one if any remain: a state
    /// transfer's source reads its region with it, chunk by chunk.
    fn region_entries(
        &self,
        space: &str,
        subspace: SubspaceId,
        region: RegionIndex,
        after: Option<&[u8]>,
        max_bytes: usize,
    ) -> Result<RegionChunk, ErrorReply>;
}

/// A space of the configuration with its tessellations, and the shapes it may store.
struct SpaceRuntime {
    map: SpaceMap,
    /// A dynamic space's shapes whose documents may be stored (`SpaceConfig::shapes`, ready).
    shapes: BTreeSet<Shape>,
}

/// A space's runtime is its map, plus the shapes it may store.
impl Deref for SpaceRuntime {
    type Target = SpaceMap;

    fn deref(&self) -> &SpaceMap {
        &self.map
    }
}

impl ReplicaMap for SpaceRuntime {
    fn replicas(&self, subspace: SubspaceId, region: RegionIndex) -> &[ServerId] {
        self.config().replicas_of(subspace, region)
    }
}

impl SpaceRuntime {
    fn new(config: SpaceConfig) -> SpaceRuntime {
        SpaceRuntime {
            shapes: config
                .shapes
                .iter()
                .zip(&config.shape_entries)
                .filter(|(_, e)| e.ready)
                .map(|(s, _)| s.clone())
                .collect(),
            map: SpaceMap::new(config),
        }
    }

    /// The shape of `object`'s document when the space is dynamic and has not registered it,
    /// or not made it ready: such a document may not be stored yet, or a search planned from
    /// the registered shapes, or answered by a server that does not know it, would miss it.
    fn unknown_shape(&self, object: Option<&Object>) -> Option<Shape> {
        if !self.config().schema.is_dynamic() {
            return None;
        }
        let object = object?;
        let (Value::Document(d), Value::String(formula)) =
            (object.get(DOCUMENT_INDEX), object.get(FORMULA_INDEX))
        else {
            return None;
        };
        // Formula ids are text (validated when written); other bytes name no formula.
        let shape = d.shape_in(formula.as_str()?);
        (!self.shapes.contains(&shape)).then_some(shape)
    }

    fn chain(&self, u: &ChainUpdate) -> Vec<ChainHop> {
        chain_for_update(
            &self.config().schema,
            self.tessellations(),
            self,
            u.old.as_ref(),
            u.new.as_ref(),
        )
    }

    fn key_location(&self, key: &Value) -> Location {
        (SubspaceId::KEY, self.key_region(key))
    }

    /// Whether `me` is in the replica set of `location` (none: a dropped subspace has no
    /// regions).
    fn holds(&self, me: ServerId, (subspace, region): Location) -> bool {
        self.config().holds(subspace, region, me)
    }

    /// Whether `subspace` is being built: it does not hold every object yet.
    fn building(&self, subspace: SubspaceId) -> bool {
        self.config().schema.subspace(subspace).state == SubspaceState::Building
    }

    /// Whether `u` moves the object out of a region of some subspace, or deletes it.
    fn is_destructive(&self, u: &ChainUpdate) -> bool {
        match (&u.old, &u.new) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some(o), Some(n)) => self.config().schema.written_subspaces().skip(1).any(|s| {
                // Leaving a subspace (a document changing formula) is moving out too;
                // entering one is not.
                let from = self.region_of(s, o);
                from.is_some() && from != self.region_of(s, n)
            }),
        }
    }

    fn in_location(&self, (subspace, region): Location, object: Option<&Object>) -> bool {
        object.is_some_and(|o| self.region_of(subspace, o) == Some(region))
    }

    /// The storage write that commits `u` at `location`. It removes the old object's entry
    /// only where the new one does not replace it (same key, same point): the write is also
    /// the hop's log record ([`StoreWrite::Log`]), so it carries no object it need not.
    fn commit_write(&self, location: Location, u: &ChainUpdate) -> EntryWrite {
        let replaced = |old: &Object| {
            u.new.as_ref().is_some_and(|new| {
                self.in_location(location, Some(new))
                    && (location.0 == SubspaceId::KEY
                        || point(&self.config().schema, location.0, old)
                            == point(&self.config().schema, location.0, new))
            })
        };
        let remove = u
            .old
            .as_ref()
            .filter(|o| self.in_location(location, Some(o)) && !replaced(o))
            .cloned();
        let insert = u
            .new
            .as_ref()
            .filter(|o| self.in_location(location, Some(o)))
            .map(|o| StoredObject {
                version: u.version,
                object: o.clone(),
            });
        assert!(
            remove.is_some() || insert.is_some(),
            "a hop holds the old or the new object"
        );
        EntryWrite {
            space: self.name().to_owned(),
            subspace: location.0,
            remove,
            insert,
        }
    }

    /// Whether storage shows `u` applied (and so committed) at `location`, for an update sent
    /// again after a chain repair to a hop that has forgotten the key. For a hop that holds
    /// the new object: its entry has `u`'s version or a later one; or, if neither the new nor
    /// the old object's entry is there (a later update moved the object within the region),
    /// the key's entry anywhere in the region does (a scan of the region: rare, and only on
    /// this path). For a hop that only removes (a destructive update, issued once every
    /// earlier update of the key had committed, so the entry it removes was there when it was
    /// issued): that entry is gone, or was written again by a later update. Except while
    /// the region is `catching_up` (a transfer is filling it): there an entry that is not
    /// there may simply not have come yet, so only a later version shows the update applied.
    fn applied_in_store(
        &self,
        location: Location,
        u: &ChainUpdate,
        catching_up: bool,
        store: &impl CommittedReader,
    ) -> Result<bool, ErrorReply> {
        let (subspace, region) = location;
        let old_here = u
            .old
            .as_ref()
            .filter(|o| self.in_location(location, Some(o)));
        let Some(new) = u
            .new
            .as_ref()
            .filter(|n| self.in_location(location, Some(n)))
        else {
            let old = old_here.expect("a hop holds the old object when it does not hold the new");
            // In a region still catching up, an absent entry may not have come yet.
            let gone_counts = !catching_up;
            return Ok(store
                .entry_version(self.name(), subspace, old)?
                .map_or(gone_counts, |v| v > u.version));
        };
        if store
            .entry_version(self.name(), subspace, new)?
            .is_some_and(|v| v >= u.version)
        {
            return Ok(true);
        }
        if let Some(old) = old_here {
            if let Some(v) = store.entry_version(self.name(), subspace, old)? {
                return Ok(v > u.version);
            }
        }
        Ok(store
            .region_entry_version(self.name(), subspace, region, u.key())?
            .is_some_and(|v| v >= u.version))
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
    /// Updates sent down their chain, not yet acknowledged: version -> client (none for an
    /// update taken over from a removed point leader).
    in_flight: BTreeMap<Version, Option<ClientId>>,
    /// A destructive update in flight: the key's next writes wait for it.
    blocked_by: Option<Version>,
    /// The first held write would be destructive: it waits until nothing is in flight.
    draining: bool,
    held: VecDeque<(ClientId, KeyWrite)>,
    /// Failure replies waiting for a version to commit.
    deferred: Vec<(Version, ClientId, ErrorReply)>,
    // As any hop.
    /// Updates applied here, not yet committed, per location in version order.
    pending: BTreeMap<(Location, Version), Pending>,
    /// The last version applied (pending or committed) per location held here.
    applied: BTreeMap<Location, Version>,
    /// Updates that arrived before the one they follow.
    delayed: Vec<(ServerId, ChainUpdate)>,
    /// What the last update committed at the key's own region here left (`None` inside: the
    /// key deleted). Storage may not show it until the write is durable, so a point leader
    /// reads the key from here rather than from storage while this state lives.
    committed_home: Option<Option<StoredObject>>,
}

impl KeyState {
    /// A backfill's rewrite of the key is in flight or held here (its point leader).
    fn rewrite_under_way(&self) -> bool {
        self.in_flight
            .values()
            .any(|c| *c == Some(ClientId::BACKFILL))
            || self.held.iter().any(|(c, _)| *c == ClientId::BACKFILL)
    }

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
    /// Its `epoch` is the configuration in which this hop last sent it on.
    update: ChainUpdate,
    /// The hop it was sent on to, `None` at the tail. After a configuration change the update
    /// is sent again only if this changed.
    next: Option<(ServerId, Location)>,
    /// The hop before this one, whom the acknowledgement goes to; `None` at the head (the
    /// point leader). Kept so that committing needs no chain computed again.
    previous: Option<(ServerId, Location)>,
    /// The rest of the chain has it: it commits here as soon as every earlier version pending
    /// at the same location has (chains of successive versions differ where one relocates,
    /// so acknowledgements can overtake each other).
    acked: bool,
    /// When it was last sent on (see [`CHAIN_RESEND_TICKS`]).
    sent_tick: u64,
    /// Its record in this server's log ([`StoreWrite::Log`]); `None` where it was committed
    /// as soon as applied (the tail).
    log: Option<LogId>,
}

/// A transfer this server is the source of.
#[derive(Debug)]
struct Outgoing {
    to: ServerId,
    /// Where the next chunk starts; `None` before the first.
    cursor: Option<Vec<u8>>,
    /// The last chunk was sent.
    finished: bool,
}

/// A key region this server leads, being backfilled into the subspace its space is building
/// (see `tessera_protocol::Build`): every object of the region is rewritten through its
/// chain, which now has hops in the new subspace.
#[derive(Debug)]
struct Backfill {
    /// `Build::since`.
    since: u64,
    subspace: SubspaceId,
    /// Keys to rewrite next: those with unfinished work here when the backfill began, then
    /// those of the chunk of the region last read.
    queue: VecDeque<Value>,
    /// Where the next read of the region starts; `None` before the first.
    cursor: Option<Vec<u8>>,
    /// The whole region was read.
    scanned: bool,
    /// Keys whose rewrite is not committed yet.
    outstanding: BTreeSet<Value>,
    /// Reported done (until a configuration records it).
    reported: bool,
}

/// A server's replication state machine.
pub struct Replica {
    me: ServerId,
    incarnation: u64,
    config: Arc<Configuration>,
    spaces: BTreeMap<u64, Arc<SpaceRuntime>>,
    /// Space name -> id in the current configuration.
    names: BTreeMap<String, u64>,
    keys: BTreeMap<(u64, Value), KeyState>,
    links: BTreeMap<ServerId, Link>,
    /// Servers that hold a region in the current configuration: the only ones sent anything.
    members: BTreeSet<ServerId>,
    /// Messages built on a configuration this server does not have yet, in arrival order,
    /// with their sender.
    future: Vec<(ServerId, PeerMessage)>,
    /// Messages between two hops that are both this server.
    local: VecDeque<PeerMessage>,
    /// Acknowledgements to peers made since the last [`Replica::take_outputs`], numbered on
    /// their links only there: on every link a round's forwards go first (sent before the
    /// round's writes are durable) and its acknowledgements after (sent once they are).
    acks: Vec<(ServerId, PeerMessage)>,
    tick: u64,
    /// The highest version this server gave any key. A key's next version is above both its
    /// latest and this, so versions keep growing across a delete (whose key state is then
    /// forgotten) as long as the process lives.
    clock: Version,
    outputs: Outputs,
    /// Set by [`Replica::fail`]: storage failed, this server has left every chain.
    failed: Option<ErrorReply>,
    /// Transfers this server is the source of, in the current configuration.
    outgoing: BTreeMap<TransferKey, Outgoing>,
    /// Bytes of transfer chunks this server may read and send per tick, and what is left of
    /// them until the next ([`Replica::set_transfer_rate`]).
    transfer_bytes_per_tick: usize,
    transfer_budget: usize,
    /// Transfers into this server in the current configuration: whether the last chunk came.
    incoming: BTreeMap<TransferKey, Incoming>,
    /// Writes were handed out by `take_outputs` and not yet reported durable: storage may
    /// lag this machine, so no transfer chunk is read.
    awaiting_advance: bool,
    /// Per region this process holds: the epoch since which it has held it without a break
    /// (at least the id of the transfer that brought it). A chain message built on an earlier
    /// configuration is not for this hop: it was for a former membership (or a former process)
    /// and may be long stale; what is still pending of it comes again, in a newer epoch.
    held_since: BTreeMap<(u64, Location), Epoch>,
    /// The key regions this server leads that it is backfilling, by space id and region.
    backfills: BTreeMap<(u64, RegionIndex), Backfill>,
    /// Keys that recently left a region of this server: (space, key, region) -> the version
    /// that removed it (see [`TOMBSTONE_TICKS`]), and when each is forgotten, in time order.
    tombstones: BTreeMap<(u64, Value, Location), Version>,
    tombstone_expiry: VecDeque<(u64, (u64, Value, Location), Version)>,
    /// The next [`LogId`] of this process.
    next_log: u64,
    /// Log records of updates applied since the last [`Replica::take_outputs`]: handed out
    /// there, unless the update commits first (then no record is written, and the commit
    /// needs an fsync of its own).
    round_logs: BTreeMap<LogId, StoreWrite>,
}

impl Replica {
    /// `incarnation` must grow with every start of the server's process (a start time will do).
    /// `previous` is the configuration the server acted on before it stopped, if any: regions
    /// it held then and does not hold in `config` are cleared.
    pub fn new(
        me: ServerId,
        incarnation: u64,
        config: Arc<Configuration>,
        previous: Option<&Configuration>,
    ) -> Replica {
        assert!(incarnation > 0, "incarnation 0 means unknown");
        let mut r = Replica {
            me,
            incarnation,
            config: Arc::new(Configuration {
                model: None,
                epoch: Epoch(0),
                servers: vec![],
                spaces: vec![],
            }),
            spaces: BTreeMap::new(),
            names: BTreeMap::new(),
            keys: BTreeMap::new(),
            links: BTreeMap::new(),
            members: BTreeSet::new(),
            future: Vec::new(),
            local: VecDeque::new(),
            acks: Vec::new(),
            tick: 0,
            clock: Version::NONE,
            outputs: Outputs::default(),
            failed: None,
            outgoing: BTreeMap::new(),
            transfer_bytes_per_tick: usize::MAX,
            transfer_budget: usize::MAX,
            incoming: BTreeMap::new(),
            awaiting_advance: false,
            held_since: BTreeMap::new(),
            backfills: BTreeMap::new(),
            tombstones: BTreeMap::new(),
            tombstone_expiry: VecDeque::new(),
            next_log: 0,
            round_logs: BTreeMap::new(),
        };
        if let Some(previous) = previous {
            r.spaces = previous
                .spaces
                .iter()
                .map(|s| (s.id, Arc::new(SpaceRuntime::new(s.clone()))))
                .collect();
        }
        r.install(config);
        r
    }

    /// Paces the transfers this server is the source of: at most `bytes_per_tick` bytes of
    /// chunks are read and sent per tick (a chunk asks storage for no more than what is left,
    /// and carries at least one entry). Unlimited by default. Copying at full speed starves
    /// the server's live traffic; `tessera server --transfer-mb-s` sets the rate.
    pub fn set_transfer_rate(&mut self, bytes_per_tick: usize) {
        assert!(
            bytes_per_tick > 0,
            "a transfer must be able to make progress"
        );
        self.transfer_bytes_per_tick = bytes_per_tick;
        self.transfer_budget = bytes_per_tick;
    }

    pub fn epoch(&self) -> Epoch {
        self.config.epoch
    }

    pub fn me(&self) -> ServerId {
        self.me
    }

    /// Whether [`Replica::fail`] stopped this replica.
    pub fn is_failed(&self) -> bool {
        self.failed.is_some()
    }

    /// Handles one input. Outputs accumulate until [`Replica::take_outputs`].
    pub fn step(&mut self, input: Input, store: &impl CommittedReader) {
        if let Some(why) = &self.failed {
            // Fail-stop: writes are refused, nothing else is acted on.
            if let Input::Write { client, .. } = input {
                self.outputs.replies.push((client, Err(why.clone())));
            }
            return;
        }
        self.pump_transfers(store);
        match input {
            Input::Write {
                client,
                space,
                write,
            } => self.on_write(client, &space, write, store),
            Input::Peer(envelope) => self.on_envelope(envelope, store),
            Input::Configuration(config) => {
                if config.epoch > self.epoch() {
                    self.install(config);
                    self.repair_chains(store);
                    let (ready, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.future)
                        .into_iter()
                        .partition(|(_, m)| m.epoch() <= self.epoch());
                    self.future = later;
                    for (from, m) in ready {
                        self.deliver(from, m, store);
                    }
                }
            }
            Input::Tick => {
                self.tick += 1;
                while let Some((at, _, _)) = self.tombstone_expiry.front() {
                    if *at > self.tick {
                        break;
                    }
                    let (_, key, version) = self.tombstone_expiry.pop_front().expect("peeked");
                    if self.tombstones.get(&key) == Some(&version) {
                        self.tombstones.remove(&key);
                    }
                }
                self.transfer_budget = self.transfer_bytes_per_tick;
                let tick = self.tick;
                self.resend_stalled();
                let mut resend = Vec::new();
                for (&peer, link) in self
                    .links
                    .iter_mut()
                    .filter(|(p, _)| self.members.contains(p))
                {
                    for (seq, m) in link.due(tick) {
                        resend.push((peer, seq, m, link.peer_incarnation));
                    }
                }
                for (peer, seq, m, to_incarnation) in resend {
                    self.push_envelope(peer, seq, to_incarnation, Some(m));
                }
                self.pump_backfills(store);
            }
        }
        while let Some(m) = self.local.pop_front() {
            self.deliver(self.me, m, store);
        }
        self.settle_transfers();
        self.pump_transfers(store);
    }

    /// Everything produced since the last call. The shell sends the forwards, writes the
    /// writes and calls [`Replica::advance`] before the next step (which may read storage);
    /// once they are durable as [`Outputs::must_sync`] says (and every earlier round's), it
    /// sends the messages, then answers the clients. If the writes or an fsync fail, it
    /// calls [`Replica::fail`] instead, with every round not yet carried out, and sends
    /// nothing more of them.
    pub fn take_outputs(&mut self) -> Outputs {
        let mut out = std::mem::take(&mut self.outputs);
        out.replies
            .retain(|(client, _)| *client != ClientId::BACKFILL);
        if self.failed.is_some() {
            return out;
        }
        let logs = std::mem::take(&mut self.round_logs).into_values();
        out.writes.splice(0..0, logs);
        self.awaiting_advance = !out.writes.is_empty();
        let tick = self.tick;
        for (to, ack) in std::mem::take(&mut self.acks) {
            let link = self.links.entry(to).or_default();
            let (seq, to_incarnation) = (link.send(ack.clone(), tick), link.peer_incarnation);
            let envelope = self.envelope(seq, to_incarnation, Some(ack));
            out.messages.push((to, envelope));
        }
        for (&peer, link) in self.links.iter_mut() {
            if !link.ack_owed {
                continue;
            }
            link.ack_owed = false;
            let sends = |list: &[(ServerId, Envelope)]| list.iter().any(|(to, _)| *to == peer);
            if !sends(&out.messages) && !sends(&out.forwards) {
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
        for (to, envelope) in out.forwards.iter_mut().chain(out.messages.iter_mut()) {
            envelope.ack = self.links.get(to).map_or(0, Link::delivered);
        }
        out
    }

    /// The writes of the last [`Replica::take_outputs`] are written: storage shows them. Keys
    /// with no unfinished work are forgotten: from now on their committed state is storage's.
    pub fn advance(&mut self) {
        self.keys.retain(|_, k| !k.is_idle());
        self.awaiting_advance = false;
    }

    /// The writes of `unpersisted` (the last [`Replica::take_outputs`]) did not reach the
    /// disk, so nothing more of that round (its forwards are gone already) may be sent or
    /// answered as a success — nor ever after,
    /// by a retransmission. The replica stops (fail-stop) and sends nothing more; the server
    /// must then leave the cluster's chains (the coordinators remove it) rather than stall them.
    /// Clients it owes an answer: a write that was ordered (in flight, or about to be answered
    /// `Ok`) may have been committed by the hops after this one, which go on without it, so it
    /// gets `TIMEOUT` (it may or may not apply); every other (held, refused, and every later
    /// write) gets `why`: nothing of it was applied.
    pub fn fail(&mut self, unpersisted: Outputs, why: ErrorReply) {
        let unknown = ErrorReply::new(
            Status::Timeout,
            format!(
                "{}; the write had been sent down its chain and may or may not apply",
                why.message
            ),
        );
        let mut replies: Vec<(ClientId, Result<(), ErrorReply>)> = Vec::new();
        replies.extend(
            unpersisted
                .unknown_shapes
                .into_iter()
                .map(|u| (u.client, Err(why.clone()))),
        );
        for (client, result) in unpersisted.replies {
            replies.push((
                client,
                Err(if result.is_ok() {
                    unknown.clone()
                } else {
                    why.clone()
                }),
            ));
        }
        for (_, state) in std::mem::take(&mut self.keys) {
            replies.extend(
                state
                    .in_flight
                    .into_values()
                    .flatten()
                    .map(|c| (c, Err(unknown.clone()))),
            );
            replies.extend(state.held.into_iter().map(|(c, _)| (c, Err(why.clone()))));
            replies.extend(
                state
                    .deferred
                    .into_iter()
                    .map(|(_, c, _)| (c, Err(why.clone()))),
            );
        }
        self.links.clear();
        self.future.clear();
        self.local.clear();
        self.acks.clear();
        self.outgoing.clear();
        self.incoming.clear();
        self.round_logs.clear();
        self.outputs = Outputs::default();
        self.outputs.replies = replies;
        self.failed = Some(why);
    }

    /// Messages not yet acknowledged, per receiver that still holds a region.
    pub fn unacked(&self) -> Vec<(ServerId, usize)> {
        self.links
            .iter()
            .filter(|(s, _)| self.members.contains(s))
            .map(|(s, l)| (*s, l.unacked_len()))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// What is unfinished here, for a test that finds a replica stuck.
    #[doc(hidden)]
    pub fn describe_unfinished(&self) -> String {
        format!(
            "keys {:?}; outgoing transfers {:?}; incoming {:?}",
            self.keys, self.outgoing, self.incoming
        )
    }

    /// Keys with unfinished work here, and messages not yet acknowledged by their receiver.
    pub fn backlog(&self) -> (usize, usize) {
        let unacked = self.unacked().iter().map(|(_, n)| n).sum();
        (self.keys.len(), unacked)
    }

    /// Switches to `config`: spaces created and dropped, regions this server lost cleared
    /// (with whatever was pending there), servers that left no longer sent to, and the keys
    /// whose point leader this server stopped or started being handed over.
    fn install(&mut self, config: Arc<Configuration>) {
        assert!(
            config.epoch > self.epoch() || self.config.epoch == Epoch(0),
            "epochs only move forward"
        );
        let spaces: BTreeMap<u64, Arc<SpaceRuntime>> = config
            .spaces
            .iter()
            .map(|s| match self.spaces.get(&s.id) {
                Some(existing) if existing.config() == s => (s.id, existing.clone()),
                _ => (s.id, Arc::new(SpaceRuntime::new(s.clone()))),
            })
            .collect();
        // Regions this server held in a space that goes on, and holds no more.
        for (id, before) in &self.spaces {
            let Some(now) = spaces.get(id) else { continue };
            // A dropped subspace's storage goes whole (the shell drops it), not region by region.
            let kept = |s: &SubspaceId| {
                now.config()
                    .schema
                    .subspaces
                    .get(s.get())
                    .is_some_and(|s| s.is_written())
            };
            for subspace in before.config().schema.subspace_ids().filter(kept) {
                for (r, set) in before.config().replicas[subspace.get()].iter().enumerate() {
                    let location = (subspace, RegionIndex(r as u32));
                    if set.contains(&self.me) && !now.holds(self.me, location) {
                        let (space, region) = (now.name().to_owned(), location.1);
                        self.outputs.writes.push(StoreWrite::ClearRegion {
                            space,
                            subspace,
                            region,
                        });
                    }
                }
            }
            // Key regions split off since `before` that this server does not hold: storage
            // moved into them the keys of a region it held then (and may have left since,
            // in a configuration it skipped).
            let key_regions = |rt: &SpaceRuntime| rt.config().replicas[SubspaceId::KEY.get()].len();
            for r in key_regions(before)..key_regions(now) {
                let region = RegionIndex(r as u32);
                if !now.holds(self.me, (SubspaceId::KEY, region)) {
                    self.outputs.writes.push(StoreWrite::ClearRegion {
                        space: now.name().to_owned(),
                        subspace: SubspaceId::KEY,
                        region,
                    });
                }
            }
        }
        // Writes to a dropped space fail; its chains stop here.
        let gone: Vec<(u64, Value)> = self
            .keys
            .keys()
            .filter(|(space, _)| !spaces.contains_key(space))
            .cloned()
            .collect();
        for key in gone {
            let state = self.keys.remove(&key).expect("listed above");
            self.forget_logs(state.pending.values().filter_map(|p| p.log).collect());
            // The space is gone: no read of it waits for anything.
            self.outputs.settle_reads(key.0, &key.1, Version(u64::MAX));
            let error = || {
                Err(ErrorReply::new(
                    Status::UnknownSpace,
                    "the space was removed",
                ))
            };
            let clients = state
                .in_flight
                .into_values()
                .flatten()
                .chain(state.held.into_iter().map(|(c, _)| c))
                .chain(state.deferred.into_iter().map(|(_, c, _)| c));
            for client in clients {
                self.outputs.replies.push((client, error()));
            }
        }
        // A server that holds no region (failed, removed) is sent nothing more, and what it
        // was sent is not retransmitted. Links keep their state, though: a link's numbering
        // must go on where it was if that server comes back.
        self.members = config
            .spaces
            .iter()
            .flat_map(|s| s.replicas.iter().flatten().flatten().copied())
            .collect();
        self.names = config
            .spaces
            .iter()
            .map(|s| (s.schema.name.clone(), s.id))
            .collect();
        for (id, now) in &spaces {
            if let Some(before) = self.spaces.get(id).cloned() {
                self.follow_key_splits(*id, &before, now);
            }
        }
        self.spaces = spaces;
        self.config = config;
        let keys: Vec<(u64, Value)> = self.keys.keys().cloned().collect();
        for key in keys {
            self.hand_over(&key);
        }
        self.install_transfers();
        self.install_backfills();
    }

    /// A key region of space `id` split between `before` and `now` (`SpaceChange::
    /// SplitKeyRegion`): the keys that moved to the new region are known there from now on.
    /// Storage moved their committed entries already (the shell alters storage before it
    /// installs); here their pending updates, last versions and tombstones follow. A chain
    /// message built before the split may name either region for keys now in the other, so
    /// both regions count as held from the split's epoch: older messages for them are
    /// dropped, and their senders send them again in a later configuration
    /// (`resend_stalled`, or at once if their next hop changed).
    fn follow_key_splits(&mut self, id: u64, before: &SpaceRuntime, now: &SpaceRuntime) {
        let (old, new) = (
            &before.tessellations()[SubspaceId::KEY.get()],
            &now.tessellations()[SubspaceId::KEY.get()],
        );
        if old == new {
            return;
        }
        let home = |key: &Value, location: Location| -> Location {
            if location.0 == SubspaceId::KEY {
                now.key_location(key)
            } else {
                location
            }
        };
        for ((space, key), state) in self.keys.iter_mut() {
            if *space != id {
                continue;
            }
            state.pending = std::mem::take(&mut state.pending)
                .into_iter()
                .map(|((location, version), mut p)| {
                    p.update.region = home(key, (p.update.subspace, p.update.region)).1;
                    ((home(key, location), version), p)
                })
                .collect();
            state.applied = std::mem::take(&mut state.applied)
                .into_iter()
                .map(|(location, version)| (home(key, location), version))
                .collect();
            for (_, u) in state.delayed.iter_mut() {
                u.region = home(key, (u.subspace, u.region)).1;
            }
        }
        self.tombstones = std::mem::take(&mut self.tombstones)
            .into_iter()
            .map(|((space, key, location), version)| {
                let at = if space == id {
                    home(&key, location)
                } else {
                    location
                };
                ((space, key, at), version)
            })
            .collect();
        for (_, (space, key, location), _) in self.tombstone_expiry.iter_mut() {
            if *space == id {
                *location = home(key, *location);
            }
        }
        // Both regions of each split since `before` are held, for chain messages, from the
        // split's epoch (a later start, by a transfer, stays); one built before it may name
        // either region for keys now in the other.
        let splits = &now.config().schema.key_splits;
        let first_new = before.config().schema.key_splits.len().min(splits.len());
        for (i, split) in splits.iter().enumerate().skip(first_new) {
            // Split `i` made region `partitions + i`.
            let new_region = RegionIndex(now.config().schema.partitions + i as u32);
            for region in [RegionIndex(split.region), new_region] {
                let since = self
                    .held_since
                    .entry((id, (SubspaceId::KEY, region)))
                    .or_insert(Epoch(split.epoch));
                *since = (*since).max(Epoch(split.epoch));
            }
        }
    }

    /// Starts and forgets backfills as the configuration's builds and point leaders say: this
    /// server backfills each key region it leads that the build under way has not recorded
    /// done. One that goes on keeps its progress; one this server stops leading is dropped
    /// (its rewrites in flight end as any write of a deposed leader does), and the new leader
    /// starts it over. A new one first rewrites the keys with unfinished work here: an update
    /// ordered before the build has no hop in the new subspace, and storage does not show
    /// what is not committed yet. Every other key's last update before the build is in
    /// storage (the shell commits what is pending before it installs a configuration), where
    /// the backfill's reads find it.
    fn install_backfills(&mut self) {
        let mut backfills = BTreeMap::new();
        for space in &self.config.spaces {
            let Some(build) = &space.build else { continue };
            let rt = &self.spaces[&space.id];
            for (r, set) in space.replicas[SubspaceId::KEY.get()].iter().enumerate() {
                let region = RegionIndex(r as u32);
                if set.first() != Some(&self.me) || build.done.binary_search(&region.0).is_ok() {
                    continue;
                }
                let key = (space.id, region);
                let backfill = match self.backfills.remove(&key) {
                    Some(b) if (b.since, b.subspace) == (build.since, build.subspace) => b,
                    _ => Backfill {
                        since: build.since,
                        subspace: build.subspace,
                        queue: self
                            .keys
                            .keys()
                            .filter(|(s, k)| {
                                *s == space.id && rt.key_location(k) == (SubspaceId::KEY, region)
                            })
                            .map(|(_, k)| k.clone())
                            .collect(),
                        cursor: None,
                        scanned: false,
                        outstanding: BTreeSet::new(),
                        reported: false,
                    },
                };
                backfills.insert(key, backfill);
            }
        }
        self.backfills = backfills;
    }

    /// Moves the backfills of the key regions this server leads along, once a tick: keeps at
    /// most [`BACKFILL_WINDOW`] rewrites under way in all, taking keys from the queue and,
    /// when it is empty, from the region's next chunk in storage (paced with the transfers);
    /// reports a region once it has read all of it and every rewrite has committed.
    fn pump_backfills(&mut self, store: &impl CommittedReader) {
        let keys = &self.keys;
        for ((space, _), b) in self.backfills.iter_mut() {
            b.outstanding.retain(|k| {
                keys.get(&(*space, k.clone()))
                    .is_some_and(KeyState::rewrite_under_way)
            });
        }
        // The window is the server's, not each region's: every rewrite of every region goes
        // through the same few chains when the data is skewed (all of a subspace in one
        // region), and a window per region flooded them until resends piled up without end.
        let mut under_way: usize = self.backfills.values().map(|b| b.outstanding.len()).sum();
        let regions: Vec<(u64, RegionIndex)> = self.backfills.keys().copied().collect();
        for (space, region) in regions {
            let Some(rt) = self.spaces.get(&space).cloned() else {
                continue;
            };
            loop {
                let b = self
                    .backfills
                    .get_mut(&(space, region))
                    .expect("listed above");
                if under_way >= BACKFILL_WINDOW {
                    break;
                }
                if let Some(key) = b.queue.pop_front() {
                    let before = b.outstanding.len();
                    self.rewrite(&rt, region, key, store);
                    let b = self.backfills.get(&(space, region)).expect("listed above");
                    under_way += b.outstanding.len() - before;
                    continue;
                }
                // A backfill copies the space's objects, as a transfer copies a region's: it
                // must not starve the live load either (`Replica::set_transfer_rate`).
                if b.scanned || self.transfer_budget == 0 {
                    break;
                }
                let max_bytes = BACKFILL_CHUNK_BYTES.min(self.transfer_budget);
                self.transfer_budget -= max_bytes;
                let chunk = match store.region_entries(
                    rt.name(),
                    SubspaceId::KEY,
                    region,
                    b.cursor.as_deref(),
                    max_bytes,
                ) {
                    Ok(chunk) => chunk,
                    Err(e) => {
                        tracing::error!(error = %e, "reading a key region to backfill; trying again later");
                        break;
                    }
                };
                b.scanned = chunk.next.is_none();
                b.cursor = chunk.next;
                b.queue
                    .extend(chunk.entries.into_iter().map(|e| e.object.key().clone()));
            }
            let b = self
                .backfills
                .get_mut(&(space, region))
                .expect("listed above");
            if b.scanned && b.queue.is_empty() && b.outstanding.is_empty() && !b.reported {
                b.reported = true;
                self.outputs.backfills_done.push(BackfillRef {
                    space,
                    subspace: b.subspace,
                    region: region.0,
                    since: b.since,
                });
            }
        }
    }

    /// Rewrites `key`'s object through its chain (see [`KeyWrite::Rewrite`]), as part of the
    /// backfill of `region`, and remembers it until it commits.
    fn rewrite(
        &mut self,
        rt: &SpaceRuntime,
        region: RegionIndex,
        key: Value,
        store: &impl CommittedReader,
    ) {
        let write = KeyWrite::Rewrite { key: key.clone() };
        self.on_write(ClientId::BACKFILL, rt.name(), write, store);
        let under_way = self
            .keys
            .get(&(rt.config().id, key.clone()))
            .is_some_and(KeyState::rewrite_under_way);
        if under_way {
            if let Some(b) = self.backfills.get_mut(&(rt.config().id, region)) {
                b.outstanding.insert(key);
            }
        }
    }

    /// Starts and forgets transfers as the configuration lists them. A transfer into this
    /// server that is new here (or restarted, with a new id) starts from an empty region:
    /// whatever the region held here is from an earlier membership, and what was pending at
    /// it came from a predecessor that is no longer the source (the new one sends its pending
    /// updates again).
    fn install_transfers(&mut self) {
        let mut outgoing = BTreeMap::new();
        let mut incoming = BTreeMap::new();
        let mut started = Vec::new();
        let mut new_sources = Vec::new();
        for space in &self.config.spaces {
            for t in &space.transfers {
                let key = (space.id, (t.subspace, t.region), t.id);
                if space.transfer_source(t) == self.me {
                    let o = self.outgoing.remove(&key).unwrap_or_else(|| {
                        new_sources.push((space.id, (t.subspace, t.region)));
                        Outgoing {
                            to: t.to,
                            cursor: None,
                            finished: false,
                        }
                    });
                    outgoing.insert(key, o);
                }
                if t.to == self.me {
                    match self.incoming.remove(&key) {
                        Some(state) => incoming.insert(key, state),
                        None => {
                            started.push((space.schema.name.clone(), key));
                            incoming.insert(key, Incoming::Receiving)
                        }
                    };
                }
            }
        }
        self.outgoing = outgoing;
        self.incoming = incoming;
        // A new transfer's chunks leave out the keys with an update pending here, counting on
        // that update to bring the key: so every such update goes to the target again, ahead
        // of the first chunk, whatever this hop sent it before (the target's region starts
        // empty; it may have had it in an earlier membership). Forgetting where it went makes
        // `repair_chains` send it on again.
        for (space, location) in new_sources {
            for (_, state) in self.keys.iter_mut().filter(|((s, _), _)| *s == space) {
                for ((l, _), p) in state.pending.iter_mut() {
                    if *l == location {
                        p.next = None;
                    }
                }
            }
        }
        let mut held_since = BTreeMap::new();
        for space in &self.config.spaces {
            for subspace in space.schema.subspace_ids() {
                for (r, set) in space.replicas[subspace.get()].iter().enumerate() {
                    if !set.contains(&self.me) {
                        continue;
                    }
                    let location = (subspace, RegionIndex(r as u32));
                    // Held without a break: since then. Coming in by a transfer: since the
                    // epoch that started it, however many configurations this server skipped
                    // (the source sends it chain traffic from that epoch on). Otherwise: from
                    // this configuration.
                    let before = self.held_since.get(&(space.id, location)).copied();
                    let since = match space.transfer_at(subspace, location.1) {
                        Some(t) if t.to == self.me => {
                            before.map_or(Epoch(t.id), |b| b.max(Epoch(t.id)))
                        }
                        _ => before.unwrap_or(self.config.epoch),
                    };
                    held_since.insert((space.id, location), since);
                }
            }
        }
        self.held_since = held_since;
        for (name, (space, location, _)) in started {
            self.outputs.writes.push(StoreWrite::ClearRegion {
                space: name,
                subspace: location.0,
                region: location.1,
            });
            let mut dropped = Vec::new();
            for ((_, key), state) in self.keys.iter_mut().filter(|((s, _), _)| *s == space) {
                let home = self.spaces[&space].key_location(key);
                let (logs, settled) = drop_pending(&mut state.pending, |l| l == location, home);
                dropped.extend(logs);
                if let Some(version) = settled {
                    self.outputs.settle_reads(space, key, version);
                }
                state.applied.remove(&location);
                if home == location {
                    state.committed_home = None;
                }
            }
            self.forget_logs(dropped);
        }
    }

    /// Whether a transfer into this server is filling `location` of `space`.
    fn catching_up(&self, space: u64, location: Location) -> bool {
        self.incoming
            .keys()
            .any(|&(s, l, _)| s == space && l == location)
    }

    /// Sends the next chunks of the transfers this server is the source of, as far as each
    /// link's window allows. Only when storage holds everything this machine decided (no
    /// write awaits the disk): then a chunk, read from storage, is exactly the committed state
    /// of the keys that have no update pending at the region here.
    fn pump_transfers(&mut self, store: &impl CommittedReader) {
        if self.awaiting_advance || !self.outputs.writes.is_empty() || self.failed.is_some() {
            return;
        }
        let keys: Vec<TransferKey> = self
            .outgoing
            .iter()
            .filter(|(_, o)| !o.finished)
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            let (space, location, id) = key;
            let Some(rt) = self.spaces.get(&space).cloned() else {
                continue;
            };
            loop {
                let o = &self.outgoing[&key];
                let to = o.to;
                if o.finished
                    || self.transfer_budget == 0
                    || self.links.get(&to).map_or(0, Link::unacked_len) >= TRANSFER_WINDOW
                {
                    break;
                }
                let max_bytes = TRANSFER_CHUNK_BYTES.min(self.transfer_budget);
                self.transfer_budget -= max_bytes;
                let chunk = match store.region_entries(
                    rt.name(),
                    location.0,
                    location.1,
                    o.cursor.as_deref(),
                    max_bytes,
                ) {
                    Ok(chunk) => chunk,
                    Err(e) => {
                        tracing::error!(error = %e, "reading a region to transfer; trying again later");
                        break;
                    }
                };
                let entries: Vec<StoredObject> = chunk
                    .entries
                    .into_iter()
                    .filter(|e| !self.pending_at(space, e.object.key(), location))
                    .collect();
                let last = chunk.next.is_none();
                let o = self.outgoing.get_mut(&key).expect("listed above");
                o.cursor = chunk.next;
                o.finished = last;
                let message = TransferChunk {
                    space,
                    epoch: self.config.epoch,
                    id,
                    subspace: location.0,
                    region: location.1,
                    entries,
                    last,
                };
                self.send(to, PeerMessage::Transfer(message));
            }
        }
    }

    /// Whether `key` has an update applied and not yet committed at `location` here.
    fn pending_at(&self, space: u64, key: &Value, location: Location) -> bool {
        self.keys
            .get(&(space, key.clone()))
            .is_some_and(|s| s.pending.keys().any(|(l, _)| *l == location))
    }

    /// A chunk of a transfer into this server, from its source: its entries are stored
    /// (except for keys an update on the chain brought already); after the last one the
    /// transfer is reported complete.
    fn on_transfer(&mut self, from: ServerId, c: TransferChunk) {
        let location = (c.subspace, c.region);
        let key = (c.space, location, c.id);
        let Some(done) = self
            .incoming
            .get(&key)
            .map(|state| *state != Incoming::Receiving)
        else {
            tracing::debug!(%from, "dropped a chunk of a transfer this server is not receiving");
            return;
        };
        let rt = self.spaces[&c.space].clone();
        let source = rt
            .config()
            .transfer_at(c.subspace, c.region)
            .map(|t| rt.config().transfer_source(t));
        if done || source != Some(from) {
            tracing::debug!(%from, "dropped a transfer chunk from a server that is not its source");
            return;
        }
        for entry in c.entries {
            // An update of the key came on the chain already (the source sent it first): it
            // is at least as new as the entry.
            let newer_here = self
                .keys
                .get(&(c.space, entry.object.key().clone()))
                .and_then(|s| s.applied.get(&location))
                .is_some_and(|&v| v >= entry.version);
            if newer_here {
                continue;
            }
            let entry = EntryWrite {
                space: rt.name().to_owned(),
                subspace: c.subspace,
                remove: None,
                insert: Some(entry),
            };
            let retires = None;
            self.outputs
                .writes
                .push(StoreWrite::Entry { entry, retires });
        }
        if c.last {
            let pending: Vec<(Value, Version)> = self
                .keys
                .iter()
                .filter(|((space, _), _)| *space == c.space)
                .flat_map(|((_, k), state)| {
                    state
                        .pending
                        .keys()
                        .filter(|(l, _)| *l == location)
                        .map(|(_, v)| (k.clone(), *v))
                })
                .collect();
            self.incoming.insert(key, Incoming::Settling(pending));
            self.settle_transfers();
        }
    }

    /// Reports every transfer into this server whose last chunk came and whose updates
    /// pending then have all committed here (see [`Incoming::Settling`]).
    fn settle_transfers(&mut self) {
        let keys = &self.keys;
        for (&(space, location, id), state) in self.incoming.iter_mut() {
            let Incoming::Settling(waiting) = state else {
                continue;
            };
            waiting.retain(|(k, v)| {
                keys.get(&(space, k.clone()))
                    .is_some_and(|s| s.pending.contains_key(&(location, *v)))
            });
            if waiting.is_empty() {
                *state = Incoming::Reported;
                self.outputs.transfers_done.push(TransferRef {
                    space,
                    subspace: location.0,
                    region: location.1 .0,
                    id,
                });
            }
        }
    }

    /// After a configuration change: drops what was pending at regions this server lost, and
    /// moves the point leader's part of `key` to this server, or away from it.
    fn hand_over(&mut self, key: &(u64, Value)) {
        let rt = self.spaces[&key.0].clone();
        let me = self.me;
        let state = self.keys.get_mut(key).expect("a key with state");
        let home = rt.key_location(&key.1);
        let (dropped, settled) =
            drop_pending(&mut state.pending, |location| !rt.holds(me, location), home);
        if let Some(version) = settled {
            self.outputs.settle_reads(key.0, &key.1, version);
        }
        state.applied.retain(|location, _| rt.holds(me, *location));
        state
            .delayed
            .retain(|(_, u)| rt.holds(me, (u.subspace, u.region)));
        let leads = rt.point_leader(&key.1).ok() == Some(me);
        let was_leading =
            state.latest.is_some() || !state.in_flight.is_empty() || !state.held.is_empty();
        if leads {
            // Everything pending at the key region here is in flight: this server's own writes,
            // or those of a removed point leader before it (the key region's replicas come
            // first on every chain, so they hold every update any later hop holds).
            let mut newest = None;
            for ((_, version), p) in state
                .pending
                .range((home, Version::NONE)..=(home, Version(u64::MAX)))
            {
                state.in_flight.entry(*version).or_insert(None);
                newest = Some((*version, p.update.new.clone()));
            }
            if let Some((version, new)) = newest {
                state.issued = state.issued.max(version);
                if state
                    .latest
                    .as_ref()
                    .is_none_or(|l| l.as_ref().is_none_or(|l| l.version < version))
                {
                    state.latest = Some(new.map(|object| StoredObject { version, object }));
                }
                let last = &state.pending[&(home, version)].update;
                if rt.is_destructive(last) {
                    state.blocked_by = Some(version);
                }
            }
            self.clock = self.clock.max(state.issued);
        } else if was_leading {
            // Another server leads the key now. Writes not ordered yet were not applied: they
            // may be sent again; those in flight may or may not complete.
            let epoch = self.config.epoch;
            let moved = || {
                ErrorReply::new(
                    Status::StaleEpoch,
                    format!("the key has another point leader in epoch {epoch}; retry"),
                )
            };
            let unknown = || {
                ErrorReply::new(Status::Timeout, "the key's point leader changed while the write was in flight: it may or may not apply")
            };
            for (_, client) in std::mem::take(&mut state.in_flight) {
                if let Some(c) = client {
                    self.outputs.replies.push((c, Err(unknown())));
                }
            }
            for (c, _) in std::mem::take(&mut state.held) {
                self.outputs.replies.push((c, Err(moved())));
            }
            for (_, c, _) in std::mem::take(&mut state.deferred) {
                self.outputs.replies.push((c, Err(moved())));
            }
            state.latest = None;
            state.blocked_by = None;
            state.draining = false;
        }
        self.forget_logs(dropped);
    }

    /// Pending updates dropped here without committing (this server stopped holding their
    /// region): their log records go, or are never written if they are of this round.
    fn forget_logs(&mut self, logs: Vec<LogId>) {
        for id in logs {
            if self.round_logs.remove(&id).is_none() {
                self.outputs.writes.push(StoreWrite::Unlog(id));
            }
        }
    }

    /// After a configuration change: every update pending here whose next hop changed (a
    /// server left the chain) is sent on to its new next hop, or committed if this server is
    /// now the chain's tail. The new next hop may have it already: it passes it on if pending,
    /// or acknowledges it again if committed.
    fn repair_chains(&mut self, store: &impl CommittedReader) {
        let mut moved: Vec<((u64, Value), Location, Version)> = Vec::new();
        let me = self.me;
        for (key, state) in self.keys.iter_mut() {
            let rt = &self.spaces[&key.0];
            for ((location, version), p) in state.pending.iter_mut() {
                let chain = rt.chain(&p.update);
                p.previous = neighbour(&chain, me, *location, -1);
                if neighbour(&chain, me, *location, 1) != p.next {
                    moved.push((key.clone(), *location, *version));
                }
            }
        }
        moved.sort_by_key(|(_, _, v)| *v);
        for (key, location, version) in moved {
            let rt = self.spaces[&key.0].clone();
            let epoch = self.epoch();
            let Some(state) = self.keys.get_mut(&key) else {
                continue;
            };
            let Some(p) = state.pending.get_mut(&(location, version)) else {
                continue;
            };
            p.update.epoch = epoch;
            let chain = rt.chain(&p.update);
            p.next = neighbour(&chain, self.me, location, 1);
            match p.next {
                None => {
                    p.acked = true;
                    self.commit_in_order(&rt, &key, location, store);
                }
                Some((server, (subspace, region))) => {
                    p.acked = false;
                    p.sent_tick = self.tick;
                    let next = ChainUpdate {
                        subspace,
                        region,
                        resent: true,
                        ..p.update.clone()
                    };
                    self.send(server, PeerMessage::Chain(next));
                }
            }
        }
    }

    /// Sends on, in the current configuration, every update waiting here for an
    /// acknowledgement for [`CHAIN_RESEND_TICKS`].
    fn resend_stalled(&mut self) {
        let (tick, epoch) = (self.tick, self.epoch());
        let mut resend = Vec::new();
        for state in self.keys.values_mut() {
            for p in state.pending.values_mut() {
                let Some((server, (subspace, region))) = p.next else {
                    continue;
                };
                if p.acked || p.sent_tick + CHAIN_RESEND_TICKS > tick {
                    continue;
                }
                p.sent_tick = tick;
                p.update.epoch = epoch;
                let next = ChainUpdate {
                    subspace,
                    region,
                    resent: true,
                    ..p.update.clone()
                };
                resend.push((server, next));
            }
        }
        for (server, u) in resend {
            self.send(server, PeerMessage::Chain(u));
        }
    }

    /// Sends `message` to `to`: an update or a chunk at once (a forward, see
    /// [`Outputs::forwards`]), an acknowledgement once this round's writes are durable.
    fn send(&mut self, to: ServerId, message: PeerMessage) {
        if to == self.me {
            self.local.push_back(message);
            return;
        }
        if matches!(message, PeerMessage::Ack(_)) {
            self.acks.push((to, message));
            return;
        }
        let link = self.links.entry(to).or_default();
        let (seq, to_incarnation) = (link.send(message.clone(), self.tick), link.peer_incarnation);
        let envelope = self.envelope(seq, to_incarnation, Some(message));
        self.outputs.forwards.push((to, envelope));
    }

    /// Sends again a message numbered `seq` (a retransmission): after this round's writes, as
    /// it may be an acknowledgement.
    fn push_envelope(
        &mut self,
        to: ServerId,
        seq: u64,
        to_incarnation: u64,
        body: Option<PeerMessage>,
    ) {
        let envelope = self.envelope(seq, to_incarnation, body);
        self.outputs.messages.push((to, envelope));
    }

    /// An envelope from this server (its `ack` is filled in by [`Replica::take_outputs`]).
    fn envelope(&self, seq: u64, to_incarnation: u64, body: Option<PeerMessage>) -> Envelope {
        Envelope {
            from: self.me,
            incarnation: self.incarnation,
            to_incarnation,
            seq,
            ack: 0,
            body,
        }
    }

    fn on_envelope(&mut self, e: Envelope, store: &impl CommittedReader) {
        if e.from == self.me || (e.seq == 0) != e.body.is_none() {
            tracing::warn!(from = %e.from, seq = e.seq, "dropped a malformed envelope");
            return;
        }
        if self.config.server(e.from).is_none() {
            tracing::debug!(from = %e.from, "dropped an envelope from a server not in the configuration");
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
                self.deliver(e.from, m, store);
            }
        }
    }

    fn deliver(&mut self, from: ServerId, m: PeerMessage, store: &impl CommittedReader) {
        let epoch = m.epoch();
        if epoch > self.epoch() {
            self.future.push((from, m));
            return;
        }
        // One built on an older configuration is still good where this server holds the
        // region it names: chains only lose servers, so what it says still holds. A message
        // between two hops of this server was made here; one from a peer is checked before it
        // is touched (the hop it names is checked against the chain by `on_chain`/`on_ack`).
        let checked = if from == self.me {
            Ok(())
        } else {
            check_shape(&m).and_then(|()| check_contents(&m, &self.config))
        };
        if let Err(e) = checked {
            tracing::warn!(error = %e, "dropped a chain message that does not fit the configuration");
            return;
        }
        let hop = match &m {
            PeerMessage::Chain(u) => Some((u.space, (u.subspace, u.region))),
            PeerMessage::Ack(a) => Some((a.space, (a.subspace, a.region))),
            PeerMessage::Transfer(_) => None,
        };
        if let Some(hop) = hop {
            if self.held_since.get(&hop).is_none_or(|&since| epoch < since) {
                tracing::debug!(%from, %epoch, "dropped a chain message built before this server held its region");
                return;
            }
        }
        match m {
            PeerMessage::Chain(u) => self.on_chain(from, u, store),
            PeerMessage::Ack(a) => self.on_ack(from, a, store),
            PeerMessage::Transfer(c) => self.on_transfer(from, c),
        }
    }

    fn on_write(
        &mut self,
        client: ClientId,
        space: &str,
        write: KeyWrite,
        store: &impl CommittedReader,
    ) {
        let Some(rt) = self
            .names
            .get(space)
            .and_then(|id| self.spaces.get(id))
            .cloned()
        else {
            let error = ErrorReply::new(Status::UnknownSpace, format!("no space named {space:?}"));
            return self.outputs.replies.push((client, Err(error)));
        };
        let leader = match rt.point_leader(write.key()) {
            Ok(leader) => leader,
            Err(e) => return self.outputs.replies.push((client, Err(e))),
        };
        if leader != self.me {
            let error = ErrorReply::new(
                Status::StaleEpoch,
                format!(
                    "server {leader} leads that key in epoch {}; refresh the configuration",
                    self.epoch()
                ),
            );
            return self.outputs.replies.push((client, Err(error)));
        }
        let epoch = self.epoch();
        let state = self
            .keys
            .entry((rt.config().id, write.key().clone()))
            .or_default();
        if state.blocked_by.is_some() || state.draining {
            state.held.push_back((client, write));
            return;
        }
        let latest = match (&state.latest, &state.committed_home) {
            (Some(l), _) | (None, Some(l)) => l.clone(),
            (None, None) => match store.get(rt.name(), write.key()) {
                Ok(l) => l,
                Err(e) => return self.outputs.replies.push((client, Err(e))),
            },
        };
        let new = match evaluate(
            &rt.config().schema,
            latest.as_ref().map(|l| &l.object),
            &write,
        ) {
            Ok(new) => match rt.unknown_shape(new.as_ref()) {
                None => new,
                Some(shape) => {
                    state.latest = Some(latest);
                    let space = space.to_owned();
                    return self.outputs.unknown_shapes.push(UnknownShape {
                        client,
                        space,
                        write,
                        shape,
                    });
                }
            },
            Err(e) => {
                match state.in_flight.keys().next_back() {
                    Some(&last) => state.deferred.push((last, client, e)),
                    None => self.outputs.replies.push((client, Err(e))),
                }
                state.latest = Some(latest);
                return;
            }
        };
        let version = self
            .clock
            .max(state.issued)
            .max(latest.as_ref().map_or(Version::NONE, |l| l.version))
            .next()
            .max(Version::first_in(epoch));
        let update = ChainUpdate {
            space: rt.config().id,
            epoch,
            version,
            after: state.in_flight.keys().next_back().copied(),
            old: latest.as_ref().map(|l| l.object.clone()),
            new,
            subspace: SubspaceId::KEY,
            region: rt.key_location(write.key()).1,
            resent: false,
        };
        let destructive = rt.is_destructive(&update);
        if destructive && !state.in_flight.is_empty() {
            // Nothing of the key may travel beside a destructive update: let the earlier ones
            // commit first, then evaluate this write again.
            state.latest = Some(latest);
            state.draining = true;
            state.held.push_front((client, write));
            return;
        }
        self.clock = version;
        state.issued = version;
        state.latest = Some(
            update
                .new
                .clone()
                .map(|object| StoredObject { version, object }),
        );
        state.in_flight.insert(version, Some(client));
        if destructive {
            state.blocked_by = Some(version);
        }
        let me = self.me;
        self.on_chain(me, update, store);
    }

    /// An update for this server's hop at the region it names, from `from`. Only the hop
    /// before this one on the chain, as this server's configuration draws it, is listened
    /// to: a server removed from the chain (a deposed point leader above all) can no longer
    /// inject updates, whatever it still believes.
    fn on_chain(&mut self, from: ServerId, u: ChainUpdate, store: &impl CommittedReader) {
        let Some(rt) = self.spaces.get(&u.space).cloned() else {
            return;
        };
        let chain = rt.chain(&u);
        let location = (u.subspace, u.region);
        let Some(hop) = position(&chain, self.me, location) else {
            tracing::warn!(version = %u.version, "dropped a chain message this server has no hop for");
            return;
        };
        let predecessor = if hop == 0 {
            self.me
        } else {
            chain[hop - 1].server
        };
        if hop == 0 && from == self.me && !u.resent {
            self.outputs.chains_started.push(chain.len());
        }
        if from != predecessor {
            tracing::debug!(version = %u.version, %from, "dropped an update from a server that is not the hop before");
            return;
        }
        if hop > 0
            && u.epoch
                < rt.config()
                    .member_since(chain[hop - 1].subspace, chain[hop - 1].region, from)
        {
            // Built by the hop before in an earlier membership of its region (it left and came
            // back since): what it says may be long stale.
            tracing::debug!(version = %u.version, %from, "dropped an update from an earlier membership of the hop before");
            return;
        }
        let key = (u.space, u.key().clone());
        let catching_up = self.catching_up(u.space, location);
        let state = self.keys.entry(key.clone()).or_default();
        if state.pending.contains_key(&(location, u.version)) {
            // Sent again after a configuration change, by a hop before this one: this hop sent
            // it on along the new chain when it installed the configuration.
            return;
        }
        // Only an update sent again by a new predecessor can be one this hop has (the link
        // from one predecessor delivers each message once).
        let removed_since = self
            .tombstones
            .get(&(u.space, u.key().clone(), location))
            .is_some_and(|&v| v >= u.version);
        // A region this step clears (a transfer's target starting over): what storage shows
        // of it now is about to go, so it shows nothing applied.
        let clearing = self.outputs.writes.iter().any(|w| {
            matches!(w, StoreWrite::ClearRegion { space, subspace, region }
                if space == rt.name() && (*subspace, *region) == location)
        });
        let state = self.keys.get_mut(&key).expect("created above");
        let applied_here = match state.applied.get(&location) {
            Some(&applied) => applied >= u.version,
            None if clearing => false,
            // The key left this region by a later update: this one is long committed here.
            None if removed_since => true,
            // In a subspace being built, an update ordered before the subspace was added can
            // reach a region after a later one of its key did (it was not destructive there
            // when it was ordered, so nothing held the later one back: the backfill's rewrite,
            // say); storage then shows it superseded.
            None if !u.resent && !rt.building(location.0) => false,
            None => match rt.applied_in_store(location, &u, catching_up, store) {
                Ok(applied) => applied,
                Err(e) => {
                    tracing::error!(error = %e, "reading a committed entry; the update waits");
                    state.delayed.push((from, u));
                    return;
                }
            },
        };
        if applied_here {
            // Committed here already (it is not pending): the hops after this one have it too.
            // Acknowledge again: the first acknowledgement was lost with an older chain.
            if hop > 0 {
                let previous = &chain[hop - 1];
                let ack = ack_for(&u, (previous.subspace, previous.region), self.epoch());
                self.send(previous.server, ack);
            }
            return;
        }
        // A region catching up here has only this hop's source before it, on one FIFO link:
        // updates come in the order the source applied them, and the object an update
        // follows may not have been transferred yet.
        let ordered_by_link = catching_up;
        let state = self.keys.get_mut(&key).expect("created above");
        if let Some(after) = u
            .after
            .filter(|_| rt.in_location(location, u.old.as_ref()) && !ordered_by_link)
        {
            // The update this one follows produced the object this region holds: wait for it.
            let ready = match state.applied.get(&location) {
                Some(&applied) => applied >= after,
                // Forgotten here: then it committed, and storage holds what it produced.
                None => {
                    let old = u
                        .old
                        .as_ref()
                        .expect("an update that does not enter has an old object");
                    // A subspace being built lacks the objects of updates ordered before it
                    // was added: the one this follows may never come here. Nothing of the key
                    // here, it goes on (the backfill rewrites the key after it anyway).
                    let building = rt.building(location.0);
                    match store.entry_version(rt.name(), location.0, old) {
                        Ok(v) => v.map_or(building, |v| v >= after),
                        Err(e) => {
                            tracing::error!(error = %e, "reading a committed entry; the update waits");
                            false
                        }
                    }
                }
            };
            if !ready {
                state.delayed.push((from, u));
                return;
            }
        }
        state.applied.insert(location, u.version);
        self.pass_on(&rt, location, &chain, hop, u, store);
        self.retry_delayed(&key, store);
    }

    /// `u` is applied at `location`, this server's hop `hop` of `chain`: pending there, sent
    /// to the next hop (or committed, at the tail).
    fn pass_on(
        &mut self,
        rt: &SpaceRuntime,
        location: Location,
        chain: &[ChainHop],
        hop: usize,
        u: ChainUpdate,
        store: &impl CommittedReader,
    ) {
        let key = (u.space, u.key().clone());
        let at = |h: &ChainHop| (h.server, (h.subspace, h.region));
        let next = chain.get(hop + 1).map(at);
        let previous = hop.checked_sub(1).map(|p| at(&chain[p]));
        let update = ChainUpdate {
            epoch: self.epoch(),
            // Once sent again, an update stays so down the chain: a hop it reaches through a new
            // member may have had it through the old chain.
            resent: u.resent,
            ..u
        };
        let log = next.map(|_| {
            let id = LogId(self.next_log);
            self.next_log += 1;
            let entry = rt.commit_write(location, &update);
            let version = update.version;
            let record = StoreWrite::Log { id, version, entry };
            self.round_logs.insert(id, record);
            id
        });
        // At the tail an update commits in this step: its commit is what makes it visible.
        if next.is_some() && location == rt.key_location(&key.1) {
            self.outputs.read_fences.push(ReadFence::Pending {
                space: key.0,
                key: key.1.clone(),
                version: update.version,
            });
        }
        let state = self.keys.get_mut(&key).expect("the key has state");
        state.pending.insert(
            (location, update.version),
            Pending {
                update: update.clone(),
                next,
                previous,
                acked: next.is_none(),
                sent_tick: self.tick,
                log,
            },
        );
        match next {
            None => self.commit_in_order(rt, &key, location, store),
            Some((server, (subspace, region))) => {
                self.send(
                    server,
                    PeerMessage::Chain(ChainUpdate {
                        subspace,
                        region,
                        ..update
                    }),
                );
            }
        }
    }

    /// Commits, in version order, the acknowledged updates pending at `location`, up to the
    /// first one that is not acknowledged yet; passes each acknowledgement up its chain.
    fn commit_in_order(
        &mut self,
        rt: &SpaceRuntime,
        key: &(u64, Value),
        location: Location,
        store: &impl CommittedReader,
    ) {
        loop {
            let Some(state) = self.keys.get_mut(key) else {
                return;
            };
            let Some((&id, first)) = state
                .pending
                .range((location, Version::NONE)..=(location, Version(u64::MAX)))
                .next()
            else {
                return;
            };
            if !first.acked {
                return;
            }
            let Pending {
                update: u,
                previous,
                log,
                ..
            } = state.pending.remove(&id).expect("found above");
            if location == rt.key_location(&key.1) {
                state.committed_home = Some(u.new.clone().map(|object| StoredObject {
                    version: u.version,
                    object,
                }));
                if log.is_some() {
                    self.outputs.settle_reads(key.0, &key.1, u.version);
                }
            }
            let entry = rt.commit_write(location, &u);
            let tombstone = (key.0, key.1.clone(), location);
            match &entry {
                EntryWrite { insert: None, .. } => {
                    self.tombstones.insert(tombstone.clone(), u.version);
                    self.tombstone_expiry.push_back((
                        self.tick + TOMBSTONE_TICKS,
                        tombstone,
                        u.version,
                    ));
                }
                _ => {
                    self.tombstones.remove(&tombstone);
                }
            }
            // A record of this round is not written at all: the commit takes its place, and
            // needs an fsync of its own.
            let retires = log.filter(|id| self.round_logs.remove(id).is_none());
            self.outputs
                .writes
                .push(StoreWrite::Entry { entry, retires });
            match previous {
                None => {
                    self.leader_committed(key.clone(), u.version);
                    self.release_held(rt, key, store);
                }
                Some((server, at)) => {
                    let ack = ack_for(&u, at, self.epoch());
                    self.send(server, ack);
                }
            }
        }
    }

    fn retry_delayed(&mut self, key: &(u64, Value), store: &impl CommittedReader) {
        let Some(state) = self.keys.get_mut(key) else {
            return;
        };
        if state.delayed.is_empty() {
            return;
        }
        let mut delayed = std::mem::take(&mut state.delayed);
        delayed.sort_by_key(|(_, u)| u.version);
        for (from, u) in delayed {
            self.on_chain(from, u, store);
        }
    }

    /// An acknowledgement, heeded only from the hop this server last sent the update to.
    fn on_ack(&mut self, from: ServerId, a: ChainAck, store: &impl CommittedReader) {
        let Some(rt) = self.spaces.get(&a.space).cloned() else {
            return;
        };
        let key = (a.space, a.key.clone());
        let location = (a.subspace, a.region);
        let Some(pending) = self
            .keys
            .get_mut(&key)
            .and_then(|s| s.pending.get_mut(&(location, a.version)))
        else {
            return; // a repeat
        };
        let Some((next, (subspace, region))) = pending.next.filter(|(next, _)| *next == from)
        else {
            return; // from a hop this one no longer sends the update to
        };
        if a.epoch < rt.config().member_since(subspace, region, next) {
            return; // from an earlier membership of the next hop: it may not hold the update now
        }
        pending.acked = true;
        self.commit_in_order(&rt, &key, location, store);
    }

    /// The whole chain has `version`: answer its client and whoever waited for it.
    fn leader_committed(&mut self, key: (u64, Value), version: Version) {
        let state = self
            .keys
            .get_mut(&key)
            .expect("the leader tracks its in-flight updates");
        let Some(client) = state.in_flight.remove(&version) else {
            // Committed at the key region's head by a server that is not (or no longer) its
            // point leader: nobody to answer here.
            return;
        };
        assert!(
            state.in_flight.keys().all(|&v| v > version),
            "a key's updates commit at its point leader in version order"
        );
        if let Some(client) = client {
            self.outputs.replies.push((client, Ok(())));
        }
        let (ready, waiting): (Vec<_>, Vec<_>) = state
            .deferred
            .drain(..)
            .partition(|(v, _, _)| *v <= version);
        state.deferred = waiting;
        for (_, client, error) in ready {
            self.outputs.replies.push((client, Err(error)));
        }
        if state.blocked_by == Some(version) {
            state.blocked_by = None;
        }
        if state.in_flight.is_empty() {
            state.draining = false;
        }
    }

    fn release_held(
        &mut self,
        rt: &SpaceRuntime,
        key: &(u64, Value),
        store: &impl CommittedReader,
    ) {
        loop {
            let Some(state) = self.keys.get_mut(key) else {
                return;
            };
            if state.blocked_by.is_some() || state.draining {
                return;
            }
            let Some((client, write)) = state.held.pop_front() else {
                return;
            };
            self.on_write(client, rt.name(), write, store);
        }
    }
}

/// Removes the updates pending at the locations `dropped` names; returns their log records,
/// and the newest version removed from `home` (the key's region), whose reads it settles.
fn drop_pending(
    pending: &mut BTreeMap<(Location, Version), Pending>,
    dropped: impl Fn(Location) -> bool,
    home: Location,
) -> (Vec<LogId>, Option<Version>) {
    let gone: Vec<(Location, Version)> = pending
        .keys()
        .filter(|(location, _)| dropped(*location))
        .copied()
        .collect();
    let settled = gone
        .iter()
        .filter(|(l, _)| *l == home)
        .map(|(_, v)| *v)
        .max();
    let logs = gone
        .into_iter()
        .filter_map(|k| pending.remove(&k).and_then(|p| p.log))
        .collect();
    (logs, settled)
}

fn ack_for(u: &ChainUpdate, (subspace, region): Location, epoch: Epoch) -> PeerMessage {
    PeerMessage::Ack(ChainAck {
        space: u.space,
        epoch,
        key: u.key().clone(),
        version: u.version,
        subspace,
        region,
    })
}

/// This server's place on `chain` at `location`.
fn position(chain: &[ChainHop], me: ServerId, location: Location) -> Option<usize> {
    chain
        .iter()
        .position(|h| h.server == me && (h.subspace, h.region) == location)
}

/// The hop `step` places after (1) or before (-1) this server's at `location` on `chain`;
/// `None` past either end (or off the chain).
fn neighbour(
    chain: &[ChainHop],
    me: ServerId,
    location: Location,
    step: isize,
) -> Option<(ServerId, Location)> {
    let hop = position(chain, me, location)?.checked_add_signed(step)?;
    chain.get(hop).map(|h| (h.server, (h.subspace, h.region)))
}
