//! What servers send each other along chains.

use serde::{Deserialize, Serialize};
use tessera_geometry::RegionIndex;
use tessera_types::{Epoch, Object, ServerId, StoredObject, SubspaceId, Value, Version};

/// An update travelling down its value-dependent chain (docs/design.md §5.2–5.4).
///
/// It carries both the old and the new object, so every hop can recompute the chain and tell
/// which of its regions the update leaves, enters or stays in, without reading its storage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainUpdate {
    /// `SpaceConfig::id`: a space dropped and created again under its name is another space.
    pub space: u64,
    /// The configuration the chain was built on: the point leader's when it ordered the update,
    /// or a later one when a hop sent it again after a configuration change (docs/design.md §5.7).
    pub epoch: Epoch,
    pub version: Version,
    /// A version every hop that does not *enter* a region must have applied before this one,
    /// or `None` when no earlier update can still be travelling (the point leader knew every
    /// earlier one committed, or the previous one was destructive and so acknowledged first).
    pub after: Option<Version>,
    /// The key's object before (absent for a create) and after (absent for a delete).
    pub old: Option<Object>,
    pub new: Option<Object>,
    /// The region of the hop this message is for: the receiver finds its place on the chain
    /// from it, under whatever configuration it acts on (a server is at most one hop per
    /// region of a chain).
    pub subspace: SubspaceId,
    pub region: RegionIndex,
    /// Sent again by a hop whose next hop changed (a server left or joined the chain), or
    /// passed on by a hop that got it so: the receiver may have it already, even committed
    /// and forgotten, and checks (see `Replica::on_chain`).
    pub resent: bool,
}

impl ChainUpdate {
    /// The key the update is for. Every update has an old or a new object, each with its key:
    /// [`crate::check`] refuses any other before it reaches the state machine.
    pub fn key(&self) -> &Value {
        self.new
            .as_ref()
            .or(self.old.as_ref())
            .expect("a checked update has an old or a new object")
            .key()
    }
}

/// The tail's acknowledgement of an update, travelling back up the chain: each hop commits
/// on it, then passes it on, until the point leader answers the client. It means: every hop
/// after the receiver on the chain, as the sender knew it in `epoch`, has committed `version`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainAck {
    pub space: u64,
    /// The sender's configuration when it sent the acknowledgement.
    pub epoch: Epoch,
    pub key: Value,
    pub version: Version,
    /// The region of the hop this acknowledgement is for (a server is at most one hop per
    /// region of a chain).
    pub subspace: SubspaceId,
    pub region: RegionIndex,
}

/// Part of a state transfer (`tessera_protocol::Transfer`): committed entries of one region,
/// from the transfer's source to its target, in the source's storage order. It travels on the
/// same link as the chain updates the source passes to the target, so the target sees both in
/// the order the source sent them: an entry is never older than an update sent before it.
///
/// A chunk covers a range of the region's storage keys, (`after`, `through`]: the target may
/// hold stale entries there (it held the region before), and the chunk says what the range
/// holds, but for the keys left out. The chunks of a transfer cover the region, each range
/// starting where the one before ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransferChunk {
    pub space: u64,
    /// The sender's configuration when it sent the chunk.
    pub epoch: Epoch,
    /// `Transfer::id`.
    pub id: u64,
    pub subspace: SubspaceId,
    pub region: RegionIndex,
    /// The storage position the source read after (the `through` of the chunk before),
    /// `None` for the first chunk: from the region's start. Opaque here; storage's.
    pub after: Option<Vec<u8>>,
    /// The storage position of the last entry the source read, which ends the range
    /// (inclusive), `None` for the last chunk: to the region's end.
    pub through: Option<Vec<u8>>,
    pub entries: Vec<StoredObject>,
    /// Every key with an update pending at the source's hop in the region when it read the
    /// chunk, left out of `entries` (the update went to the target on the chain first): their
    /// entries at the target are the chain's to write. All of them, not only those with an
    /// entry in the range: an update that moves an object into the region has none there yet.
    pub left_out: Vec<Value>,
    /// The region has no entries after these: once it is durable, the target has the region.
    /// Exactly when `through` is `None`.
    pub last: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PeerMessage {
    Chain(ChainUpdate),
    Ack(ChainAck),
    Transfer(TransferChunk),
}

impl PeerMessage {
    /// The configuration the message was built on.
    pub fn epoch(&self) -> Epoch {
        match self {
            PeerMessage::Chain(u) => u.epoch,
            PeerMessage::Ack(a) => a.epoch,
            PeerMessage::Transfer(c) => c.epoch,
        }
    }
}

/// The unit servers exchange: chain messages numbered per link, so that whatever the network
/// does (delay, reorder, duplicate, drop on reconnect) each message is delivered to the state
/// machine exactly once and in the order it was sent (see [`crate::link`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub from: ServerId,
    /// The sender's process incarnation: a restarted server numbers its messages afresh.
    pub incarnation: u64,
    /// The receiver's incarnation as the sender knows it (0: not known yet). A restarted
    /// receiver drops envelopes meant for its former self.
    pub to_incarnation: u64,
    /// The message's number on the link from `from` to the receiver, from 1; 0 for an envelope
    /// that only acknowledges.
    pub seq: u64,
    /// Every message the sender received from the receiver up to this number arrived.
    pub ack: u64,
    pub body: Option<PeerMessage>,
}
