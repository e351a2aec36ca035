//! Identifiers and counters shared by every crate. Newtypes, so one is never mistaken for
//! another.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A server of the cluster. Stable across restarts: a restarted server keeps its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ServerId(pub u64);

/// Index of a subspace within its space. Subspace 0 is always the key subspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SubspaceId(pub u16);

impl SubspaceId {
    pub const KEY: SubspaceId = SubspaceId(0);

    pub fn get(self) -> usize {
        self.0 as usize
    }
}

/// A configuration's number. Every configuration change makes a strictly greater epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Epoch(pub u64);

/// The version of one key's object, assigned by its point leader: strictly increasing per key.
/// Version 0 never names a stored object (and is the default: "no version yet").
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Version(pub u64);

impl Version {
    pub const NONE: Version = Version(0);

    pub fn next(self) -> Version {
        Version(
            self.0
                .checked_add(1)
                .expect("a key's version space is 2^64"),
        )
    }

    /// The lowest version a point leader gives in `epoch`: the epoch in the high 32 bits.
    /// A key changes leader only with the epoch, so a new leader's versions are above every
    /// version an earlier leader gave, even one whose key was deleted since and is remembered
    /// nowhere (a replica that dedups by version would otherwise drop the new write). The
    /// guarantee holds while a key takes fewer than 2^32 writes within one epoch.
    pub fn first_in(epoch: Epoch) -> Version {
        Version(epoch.0 << 32)
    }
}

macro_rules! display_as_number {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    )*};
}
display_as_number!(ServerId, Epoch, Version);
