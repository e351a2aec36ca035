//! What the replica remembers of a key while work on it is unfinished: as its point leader
//! (versions issued, updates in flight, held writes) and as any hop (pending updates).

use std::collections::{BTreeMap, VecDeque};

use tessera_protocol::ErrorReply;
use tessera_types::{ServerId, StoredObject, Version};

use super::io::LogId;
use super::{ClientId, Location};
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
    /// When it was last sent on (see [`CHAIN_RESEND_TICKS`]).
    pub(super) sent_tick: u64,
    /// Its record in this server's log ([`StoreWrite::Log`]); `None` where it was committed
    /// as soon as applied (the tail).
    pub(super) log: Option<LogId>,
}
