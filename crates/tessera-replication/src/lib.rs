//! Value-dependent chain replication (docs/design.md §5, seed 002 §4.1) as a deterministic state
//! machine. No sockets, no clocks, no files: the server is the I/O shell around
//! [`Replica`], and `tests/simulation/` runs many of them over a seeded, hostile network.
//!
//! - [`write`](mod@write): how a write changes a key's object (shared with the standalone server);
//! - [`message`]: what servers send each other;
//! - [`link`]: exactly-once, in-order delivery per pair of servers;
//! - [`replica`]: one server's part in every chain;
//! - [`read_gate`]: when a replica of a key region may answer a read of a key;
//! - [`check`]: what a peer sends is checked before anything acts on it.

#![forbid(unsafe_code)]

pub mod check;
pub mod link;
pub mod message;
pub mod read_gate;
pub mod replica;
pub mod write;

pub use check::{check_envelope, EnvelopeError};
pub use message::{ChainAck, ChainUpdate, Envelope, PeerMessage};
pub use read_gate::{ReadFence, ReadGates};
pub use replica::{
    ClientId, CommittedReader, EntryWrite, Input, LogId, Outputs, Replica, StoreWrite, UnknownShape,
};
pub use write::{evaluate, KeyWrite};
