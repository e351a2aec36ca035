//! Tessera's coordinator: the cluster configuration (servers, spaces, replica sets, epoch) as a
//! state machine replicated with Raft ([openraft] 0.9) over 1, 3 or 5 coordinator processes.
//!
//! # Modules
//! - [`state`]: the pure state machine. [`ClusterState::apply`] takes a [`Command`]
//!   (register a server, take one offline, add or remove a space, complete state transfers,
//!   decommission a server) and either changes the state and bumps the epoch by one, or fails
//!   and changes nothing. It also assigns replica sets and plans state transfers (below).
//! - `raft_types`, `log_store`, `sm_store`: openraft's type configuration, the durable log and
//!   vote, the state machine with its snapshots.
//! - `peer`: coordinator-to-coordinator messages (Raft RPCs, forwarded writes) over TCP.
//! - `service`: the listener, serving clients, servers and peers on one port.
//! - `detector`: heartbeats, leases and the leader's failure detector (below).
//! - [`Coordinator`]: start, address, shutdown.
//!
//! # One address, two kinds of frames
//! A coordinator listens on one `host:port`. Every frame is a 4-byte big-endian length and a
//! body. A body starting with the protocol version byte is a tessera-protocol request
//! (`GetConfig`, `WaitConfig`, `AddSpace`, `RmSpace`, `RegisterServer`, `Heartbeat`,
//! `TransfersDone`, `Decommission`, `CoordinatorStatus`),
//! answered by id, out of order (a `WaitConfig` never holds up other requests). A body starting
//! with [`PEER_TAG`] (0xC7) is a peer message: postcard of a Raft RPC or a forwarded write, one
//! at a time per connection. Every response carries the coordinator's applied epoch (a
//! `Config` response: the epoch of the configuration it carries). Peer frames may be up to
//! [`PEER_FRAME_BYTES_MAX`]; client frames are held to the protocol's `FRAME_BYTES_MAX`.
//!
//! # Writes and forwarding
//! `AddSpace`, `RmSpace`, `RegisterServer`, `TransfersDone` and `Decommission` become a
//! [`Command`] proposed through Raft and answered once applied; `AddSpace` and `RmSpace` only
//! once the servers act on the change, too (below). A coordinator that is not the leader sends the command to the leader
//! as a peer `Forward` message on a fresh connection, answers with the leader's result, and
//! first waits (up to 2 s) until it has applied that epoch itself, so a read it serves next sees
//! the change. With no leader, it retries for up to 3 s, then answers `Unavailable` ("no
//! coordinator leader; retry"). A write whose forwarded request was sent but never answered is
//! `Unavailable` too; it may have applied (a retried `AddSpace` then says `SpaceExists`).
//! Reads (`GetConfig`, `WaitConfig`) are served from the local applied state: a follower may lag
//! a little, but epochs only move forward.
//!
//! # Durability
//! Everything lives in `<data_dir>/raft/`. The vote is written and fsynced (file and directory)
//! before openraft is told it is saved; appended log entries are written and fsynced before the
//! flush callback. The state itself is in memory and is rebuilt on start from the last snapshot
//! (fsynced when built or installed) plus the log entries after it, replayed up to the last
//! commit index recorded (`committed`, not fsynced: if lost, the leader supplies it). A snapshot
//! is built every [`RaftTuning::snapshot_every`] applied entries, after which the log before it
//! is purged (a purge point file, then the log file rewritten). A follower that lags behind the
//! purged log receives the snapshot from the leader. On the very first start (nothing in the data
//! directory), the member with the smallest id initializes the group with every member as a
//! voter (the others wait for it: it must come up at least once); a restarted member never
//! initializes again. `<data_dir>/raft/node-id` pins the directory to its node id.
//!
//! # Failure detection
//! Servers hold leases. Each server sends `Heartbeat` to every coordinator a few times per lease
//! (`tessera_server::lease`); every coordinator notes when it received it, and the Raft leader,
//! once a quorum has confirmed its leadership after the heartbeat arrived, answers
//! `leader: true`, which renews the server's lease to `lease_ms` after the heartbeat was sent.
//! A server whose lease lapses stops serving reads and taking writes. The leader's detector
//! (every 100 ms) proposes [`Command::MarkOffline`] for an Available server it has not heard
//! from for `lease_ms + margin_ms`, and at once for one whose heartbeat says its storage failed
//! (it stopped by itself and gets no lease). A coordinator that becomes leader starts every
//! server's count afresh, so it acts only a full lease and margin after its election. Taking
//! a server offline, or its registering again with a new incarnation (a restart: its chain
//! state is gone), removes it from every replica set except those it alone holds, keeping the
//! others' order: the next replica becomes the point leader, and the new epoch reroutes every
//! chain. The argument, and the tunables, are on [`LeaseTuning`]. A heartbeat from an unknown
//! server or with the wrong token is refused (`Malformed`), one from an earlier incarnation
//! too (`StaleServer`). `CoordinatorStatus` from the leader lists when it last heard each
//! server, and the epoch each said it acts on. A server never heard from is suspected like a
//! silent one (see [`LeaseTuning::suspect_unheard`]). A Leaving server (below) is watched, and
//! granted leases, like an Available one: it serves until its regions have moved.
//!
//! # Re-replication and membership
//! On by default ([`state::PLAN_TRANSFERS`]; `CoordinatorOptions::plan_transfers` turns it
//! off, for tests: then a region that lost a replica stays a replica short, a joining server
//! gets regions only in spaces created after it joined, and `Decommission` of a server that
//! holds regions is refused, `CmpFail`, [`state::CommandError::TransfersOff`]).
//!
//! A region's replica set changes by *state transfer* ([`tessera_protocol::Transfer`] in
//! `SpaceConfig::transfers`, at most one per region): the target joins the set last, named by
//! the epoch that started it; the member before it (the source) streams it the region while
//! live updates reach it down the chain; it serves no reads, never leads, and is not counted
//! as a copy until it reports the transfer done (`TransfersDone`,
//! [`Command::CompleteTransfers`]), when it becomes a full member and the member it replaces,
//! if any, leaves, in one new epoch. After every command that changed the configuration, the
//! state machine plans transfers in the same epoch: a region short of K replicas (a server
//! died, restarted, or was taken offline) gains a member from the Available servers holding
//! the fewest regions; a region holding a Leaving server gets its replacement; and each
//! subspace is balanced so that every Available server holds between floor and ceil of
//! regions × K / servers (how a joining server gets its share). No server is the target, nor
//! the source, of more than [`state::TRANSFERS_PER_SERVER_MAX`] (8) transfers at a time; the
//! rest start as earlier ones complete. A server leaving a set takes its transfers along: as
//! target, the transfer ends; as source, it is cancelled and planned again under a new id; a
//! server is never removed from a set where it is the only complete member. `Decommission`
//! (`tessera decommission`) makes an Available server Leaving, provided enough other
//! Available servers remain for every space's K: it gets nothing new, its regions move away,
//! and once it holds none it leaves the configuration (its heartbeats are then refused as from
//! an unknown server).
//!
//! # Space changes are finished when the servers act on them
//! Each heartbeat carries the epoch the server acts on; every coordinator records the latest
//! per server (soft state, not in Raft). `AddSpace` and `RmSpace` are answered `Done` only once
//! every live server heard within the last lease reports the change's epoch or a later one;
//! after 5 s they are answered `Timeout`, naming the servers that have not (the change is made
//! all the same).
//!
//! # Replica assignment
//! A new space's regions are assigned over the Available servers, region by region: the K
//! (= tolerated failures + 1) servers holding the fewest regions of this subspace, ties broken by
//! fewest regions over the whole cluster, then by smaller id; chain order puts first the member
//! heading the fewest regions of this subspace (ties: fewest heads cluster-wide, smaller id).
//! Within a subspace no server holds more than `ceil(regions * K / servers)` regions, and heads
//! spread likewise. See `tessera_geometry::assign_replicas`.

#![forbid(unsafe_code)]

mod coordinator;
mod detector;
mod format1;
mod fsutil;
mod log_store;
mod peer;
mod raft_types;
mod service;
mod sm_store;
pub mod state;

pub use coordinator::{Coordinator, CoordinatorError, CoordinatorOptions, LeaseTuning, RaftTuning};
pub use peer::{PEER_FRAME_BYTES_MAX, PEER_TAG};
pub use state::{ClusterState, Command, CommandError, CommandOutcome};
pub use tessera_protocol::listener::ConnectionLimits;

// The CLI and tests hold a coordinator across tasks and threads.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Coordinator>();
};
