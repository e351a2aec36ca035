//! What the replica keeps between steps besides its spaces: each key's unfinished work, as its
//! point leader (versions issued, updates in flight, held writes) and as any hop (pending
//! updates); each backfill this server leads; each state transfer into or out of it. The steps
//! that change them are in chain.rs, backfill.rs and transfers.rs.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use tessera_protocol::ErrorReply;
use tessera_types::{ServerId, StoredObject, SubspaceId, Value, Version};

use super::io::{ClientId, LogId};
use super::space::Location;
use crate::message::ChainUpdate;
use crate::write::KeyWrite;

/// What this server remembers of a key while work on it is unfinished. Dropped when idle:
/// then every update of the key this server took part in has committed here.
#[derive(Default, Debug)]
pub(super) struct KeyState {
    // As point leader.
    /// The latest object, pending updates included (`None` until read from storage).
    pub(super) latest: Option<Option<StoredObject>>,
    /// Highest version this leader gave the key.
    pub(super) issued: Version,
    /// Updates sent down their chain, not yet acknowledged: version -> client (none for an
    /// update taken over from a removed point leader).
    pub(super) in_flight: BTreeMap<Version, Option<ClientId>>,
    /// A destructive update in flight: the key's next writes wait for it.
    pub(super) blocked_by: Option<Version>,
    /// The first held write would be destructive: it waits until nothing is in flight.
    pub(super) draining: bool,
    pub(super) held: VecDeque<(ClientId, KeyWrite)>,
    /// Failure replies waiting for a version to commit.
    pub(super) deferred: Vec<(Version, ClientId, ErrorReply)>,
    // As any hop.
    /// Updates applied here, not yet committed, per location in version order.
    pub(super) pending: BTreeMap<(Location, Version), Pending>,
    /// The last version applied (pending or committed) per location held here.
    pub(super) applied: BTreeMap<Location, Version>,
    /// Updates that arrived before the one they follow.
    pub(super) delayed: Vec<(ServerId, ChainUpdate)>,
    /// What the last update committed at the key's own region here left (`None` inside: the
    /// key deleted). Storage may not show it until the write is durable, so a point leader
    /// reads the key from here rather than from storage while this state lives.
    pub(super) committed_home: Option<Option<StoredObject>>,
}

impl KeyState {
    /// A backfill's rewrite of the key is in flight or held here (its point leader).
    pub(super) fn rewrite_under_way(&self) -> bool {
        self.in_flight
            .values()
            .any(|c| *c == Some(ClientId::BACKFILL))
            || self.held.iter().any(|(c, _)| *c == ClientId::BACKFILL)
    }

    pub(super) fn is_idle(&self) -> bool {
        self.in_flight.is_empty()
            && self.held.is_empty()
            && self.deferred.is_empty()
            && self.pending.is_empty()
            && self.delayed.is_empty()
    }
}

/// An update applied at one hop of this server and not yet committed there.
#[derive(Debug)]
pub(super) struct Pending {
    /// Its `epoch` is the configuration in which this hop last sent it on.
    pub(super) update: ChainUpdate,
    /// The hop it was sent on to, `None` at the tail. After a configuration change the update
    /// is sent again only if this changed.
    pub(super) next: Option<(ServerId, Location)>,
    /// The hop before this one, whom the acknowledgement goes to; `None` at the head (the
    /// point leader). Kept so that committing needs no chain computed again.
    pub(super) previous: Option<(ServerId, Location)>,
    /// The rest of the chain has it: it commits here as soon as every earlier version pending
    /// at the same location has (chains of successive versions differ where one relocates,
    /// so acknowledgements can overtake each other).
    pub(super) acked: bool,
    /// When it was last sent on (see [`CHAIN_RESEND_TICKS`](super::CHAIN_RESEND_TICKS)).
    pub(super) sent_tick: u64,
    /// Its record in this server's log ([`StoreWrite::Log`]); `None` where it was committed
    /// as soon as applied (the tail).
    pub(super) log: Option<LogId>,
}

/// A state transfer: the space's id, the region, and the transfer's id.
pub(super) type TransferKey = (u64, Location, u64);

/// A key region this server leads, being backfilled into the subspace its space is building
/// (see `tessera_protocol::Build`): every object of the region is rewritten through its
/// chain, which now has hops in the new subspace.
#[derive(Debug)]
pub(super) struct Backfill {
    /// `Build::since`.
    pub(super) since: u64,
    pub(super) subspace: SubspaceId,
    /// Keys to rewrite next: those with unfinished work here when the backfill began, then
    /// those of the chunk of the region last read.
    pub(super) queue: VecDeque<Value>,
    /// Where the next read of the region starts; `None` before the first.
    pub(super) cursor: Option<Vec<u8>>,
    /// The whole region was read.
    pub(super) scanned: bool,
    /// Keys whose rewrite is not committed yet.
    pub(super) outstanding: BTreeSet<Value>,
    /// Reported done (until a configuration records it).
    pub(super) reported: bool,
}

/// A transfer into this server: where it stands, and what the chain did at its region since
/// it started.
#[derive(Debug, Default)]
pub(super) struct Incoming {
    pub(super) stage: Stage,
    /// Every key with an update applied at the region here since the transfer started, and
    /// the last version applied. Until the transfer ends this, not storage, says what the
    /// chain did here: storage may still hold entries from an earlier membership, and a
    /// key's own state is forgotten once its updates commit. (As many keys as the chain
    /// wrote in the region meanwhile.)
    pub(super) touched: BTreeMap<Value, Version>,
}

/// Where a transfer into this server stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    /// Chunks are coming; the next one covers the storage positions after `resume` (`None`:
    /// from the region's start).
    Receiving { resume: Option<Vec<u8>> },
    /// The last chunk came. The source left out keys with an update pending at it, which it
    /// had sent here first; until those updates commit here, this region's committed state
    /// lacks those keys, so the transfer is not reported yet. Listed: (key, version).
    Settling(Vec<(Value, Version)>),
    /// Reported complete (the target is a full replica once the coordinators agree).
    Reported,
}

impl Default for Stage {
    fn default() -> Stage {
        Stage::Receiving { resume: None }
    }
}

/// A transfer this server is the source of.
#[derive(Debug)]
pub(super) struct Outgoing {
    pub(super) to: ServerId,
    /// Where the next chunk starts; `None` before the first.
    pub(super) cursor: Option<Vec<u8>>,
    /// The last chunk was sent.
    pub(super) finished: bool,
}
