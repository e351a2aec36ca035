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
//! The protocol (docs/design.md §5, seed 002 §4.1, §4.3):
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
//!   entries in chunks over the same FIFO link ([`TransferChunk`](crate::message::TransferChunk)), read from storage only
//!   when everything this machine produced is durable, and leaving out keys with an update
//!   pending at the source's hop: that update, sent to the target on the chain, carries the
//!   key's object. So no chunk carries an entry older than an update the target already
//!   has. The target may hold the region from an earlier membership (a server back from a
//!   short stop keeps the regions it rests in): each chunk says which range of storage
//!   positions it covers, and the target writes over that range only the entries that
//!   differ, keeping those the chain wrote since the transfer started
//!   ([`StoreWrite::ReplaceRange`]). The target reports the transfer complete once the last
//!   chunk is durable and the updates the source left out have committed.

mod backfill;
mod chain;
mod install;
mod io;
mod messages;
mod space;
mod splits;
mod state;
mod transfers;

pub use io::{
    ClientId, CommittedReader, EntryWrite, Input, LogId, Outputs, RegionChunk, StoreWrite,
    UnknownShape,
};

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use tessera_geometry::RegionIndex;
use tessera_protocol::{Configuration, ErrorReply, Status};
use tessera_types::{Epoch, ServerId, Value, Version};

use crate::link::Link;
use crate::message::{Envelope, PeerMessage};
use space::{Location, SpaceRuntime};
use state::{Backfill, Incoming, KeyState, Outgoing, TransferKey};

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
    /// it kept then and does not keep in `config` are cleared (one it rests in, or a transfer
    /// brings it back to, keeps what it holds: `SpaceConfig::keeps`).
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
}
