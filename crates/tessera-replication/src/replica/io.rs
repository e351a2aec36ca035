//! What the replica takes in and hands out: its inputs, the outputs the shell carries out in
//! order (forwards, storage writes, messages, replies), and the committed state it reads.

use std::sync::Arc;

use tessera_geometry::RegionIndex;
use tessera_protocol::{BackfillRef, Configuration, ErrorReply, TransferRef};
use tessera_types::{Object, ServerId, Shape, StoredObject, SubspaceId, Value, Version};

use crate::message::Envelope;
use crate::read_gate::ReadFence;
use crate::write::KeyWrite;

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
    /// This server no longer keeps `region` of `subspace`: every entry of it goes.
    ClearRegion {
        space: String,
        subspace: SubspaceId,
        region: RegionIndex,
    },
    /// A chunk of a state transfer into `region` of `subspace`, which may hold stale entries
    /// (this server held it before). Within the chunk's range of storage positions
    /// (`after`, `through`] (`None`: from the region's start, to its end), every entry goes
    /// that is not one of `entries` at the same place and version, unless it is exactly a
    /// `(key, version)` of `keep` (the chain wrote it since the transfer started); each of
    /// `entries` is written where its place holds something else. So only what differs is
    /// written. Written with the round's other writes, in order: it sees those before it.
    ReplaceRange {
        space: String,
        subspace: SubspaceId,
        region: RegionIndex,
        after: Option<Vec<u8>>,
        through: Option<Vec<u8>>,
        entries: Vec<StoredObject>,
        keep: Vec<(Value, Version)>,
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
    ///    around it carry on, as after any failure (docs/design.md §5.7).
    pub forwards: Vec<(ServerId, Envelope)>,
    /// 1. Write these (one atomic batch, readable at once), then report it with
    ///    [`Replica::advance`](super::Replica::advance) (or [`Replica::fail`](super::Replica::fail) if that failed) before the next step.
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
    pub(super) fn settle_reads(&mut self, space: u64, key: &Value, version: Version) {
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
    /// Where the next chunk starts (an opaque storage position: the last entry read's), `None`
    /// when the region has no more entries.
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
    /// Whether a transfer chunk over the positions (`after`, `through`] of `region` of
    /// `subspace` (`range`), with `entries`, fits this store as a [`StoreWrite::ReplaceRange`]:
    /// the positions are the region's, in order, and every entry lies between them. Positions
    /// are storage's, opaque to the state machine, and come from a peer: a chunk that does not
    /// fit is dropped, where its write would fail the commit of its round.
    fn check_chunk(
        &self,
        space: &str,
        subspace: SubspaceId,
        region: RegionIndex,
        range: (Option<&[u8]>, Option<&[u8]>),
        entries: &[StoredObject],
    ) -> Result<(), ErrorReply>;
}

/// The shell's handle on a client request, returned with its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub u64);

impl ClientId {
    /// The state machine's own rewrites of a backfill ([`KeyWrite::Rewrite`]): their replies
    /// are never handed to the shell.
    pub(super) const BACKFILL: ClientId = ClientId(u64::MAX);
}
