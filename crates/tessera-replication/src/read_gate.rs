//! Reads by key at any replica of the key's region, still linearizable (chain replication with
//! apportioned queries, CRAQ).
//!
//! A write takes effect when its chain's tail commits it: every hop commits only after the
//! tail's acknowledgement, and every update of a key passes each replica of its key region
//! before the tail. So at a replica of the key region:
//! - with no update of the key pending there, its storage holds the newest version the tail
//!   has committed (the tail cannot have one this replica has not seen), and a read may answer
//!   from storage at once;
//! - with updates pending there, some may already be committed at the tail. The read waits
//!   until every version pending when it came has committed (or stopped being pending) here,
//!   then reads storage: what it finds was committed at the tail, and nothing newer was
//!   committed at the tail before the read came. (CRAQ asks the tail for the committed
//!   version instead; waiting needs no message and no knowledge of which hop is a
//!   value-dependent chain's tail.)
//!
//! The state machine reports what changes this ([`ReadFence`], in `Outputs::read_fences`); the
//! shell keeps a [`ReadGates`] that every read by key consults before it reads storage. The
//! order matters: a [`ReadFence::Pending`] is applied before the round's forwards leave (so no
//! tail can commit an update a reader here could miss), a [`ReadFence::Settled`] only once the
//! round's writes are in storage (so a released read finds the commit).

use std::collections::BTreeMap;

use tessera_types::{Value, Version};

/// A change to which versions of a key are pending at this server's replica of its key region.
#[derive(Clone, Debug, PartialEq)]
pub enum ReadFence {
    /// `version` of `key` is pending here. Apply before the round's forwards are sent.
    Pending {
        space: u64,
        key: Value,
        version: Version,
    },
    /// Every version of `key` up to `version` committed here or stopped being pending here (a
    /// region lost, a space removed). Apply once the round's writes are in storage.
    Settled {
        space: u64,
        key: Value,
        version: Version,
    },
}

/// The keys with updates pending at this server's key regions, and the reads waiting for them.
/// `W` is whatever the shell wakes a waiting read with.
#[derive(Debug)]
pub struct ReadGates<W> {
    spaces: BTreeMap<u64, BTreeMap<Value, Gate<W>>>,
}

#[derive(Debug)]
struct Gate<W> {
    /// The newest version pending here.
    newest: Version,
    /// Every version up to this one is settled here.
    settled: Version,
    /// Reads waiting, each for the version that was newest when it came.
    waiters: Vec<(Version, W)>,
}

impl<W> Default for ReadGates<W> {
    fn default() -> Self {
        ReadGates {
            spaces: BTreeMap::new(),
        }
    }
}

impl<W> ReadGates<W> {
    pub fn new() -> Self {
        Self::default()
    }

    /// A read of `key` comes: `Some(waiter)` back if it may read storage now; otherwise the
    /// waiter is kept and handed back by [`ReadGates::settle`] once it may.
    pub fn admit(&mut self, space: u64, key: &Value, waiter: W) -> Option<W> {
        let Some(gate) = self.spaces.get_mut(&space).and_then(|s| s.get_mut(key)) else {
            return Some(waiter);
        };
        if gate.settled >= gate.newest {
            return Some(waiter);
        }
        gate.waiters.push((gate.newest, waiter));
        None
    }

    /// Whether a read of `key` would wait here: a version of it is pending and not settled.
    pub fn is_pending(&self, space: u64, key: &Value) -> bool {
        self.spaces
            .get(&space)
            .and_then(|s| s.get(key))
            .is_some_and(|gate| gate.settled < gate.newest)
    }

    /// Applies the [`ReadFence::Pending`] fences of a round (before its forwards are sent).
    pub fn pend(&mut self, fences: &[ReadFence]) {
        for fence in fences {
            if let ReadFence::Pending {
                space,
                key,
                version,
            } = fence
            {
                let gates = self.spaces.entry(*space).or_default();
                let gate = gates.entry(key.clone()).or_insert(Gate {
                    newest: Version::NONE,
                    settled: Version::NONE,
                    waiters: Vec::new(),
                });
                gate.newest = gate.newest.max(*version);
            }
        }
    }

    /// Applies the [`ReadFence::Settled`] fences of a round (once its writes are in storage);
    /// returns the waiters that may read now.
    pub fn settle(&mut self, fences: &[ReadFence]) -> Vec<W> {
        let mut ready = Vec::new();
        for fence in fences {
            let ReadFence::Settled {
                space,
                key,
                version,
            } = fence
            else {
                continue;
            };
            let Some(gates) = self.spaces.get_mut(space) else {
                continue;
            };
            let Some(gate) = gates.get_mut(key) else {
                continue;
            };
            gate.settled = gate.settled.max(*version);
            let settled = gate.settled;
            let (go, stay): (Vec<_>, Vec<_>) =
                gate.waiters.drain(..).partition(|(v, _)| *v <= settled);
            gate.waiters = stay;
            ready.extend(go.into_iter().map(|(_, w)| w));
            // Forgotten when clean: a version pending here again later starts afresh.
            if gate.settled >= gate.newest && gate.waiters.is_empty() {
                gates.remove(key);
                if gates.is_empty() {
                    self.spaces.remove(space);
                }
            }
        }
        ready
    }

    /// Forgets every gate and hands back every waiter (the server stops taking part in chains).
    pub fn release_all(&mut self) -> Vec<W> {
        std::mem::take(&mut self.spaces)
            .into_values()
            .flat_map(BTreeMap::into_values)
            .flat_map(|g| g.waiters.into_iter().map(|(_, w)| w))
            .collect()
    }

    /// How many keys have versions pending (or reads waiting) here.
    pub fn len(&self) -> usize {
        self.spaces.values().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.spaces.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pending(key: i64, v: u64) -> ReadFence {
        ReadFence::Pending {
            space: 1,
            key: Value::Int(key),
            version: Version(v),
        }
    }

    fn settled(key: i64, v: u64) -> ReadFence {
        ReadFence::Settled {
            space: 1,
            key: Value::Int(key),
            version: Version(v),
        }
    }

    #[test]
    fn a_read_of_a_key_with_nothing_pending_goes_at_once() {
        let mut gates = ReadGates::new();
        assert_eq!(gates.admit(1, &Value::Int(7), "r"), Some("r"));
        gates.pend(&[pending(8, 3)]);
        assert_eq!(gates.admit(1, &Value::Int(7), "r"), Some("r"));
        assert_eq!(gates.admit(2, &Value::Int(8), "r"), Some("r"));
    }

    #[test]
    fn a_key_is_pending_from_its_pending_fence_to_its_settled_one() {
        let mut gates: ReadGates<&str> = ReadGates::new();
        assert!(!gates.is_pending(1, &Value::Int(1)));
        gates.pend(&[pending(1, 3), pending(1, 4)]);
        assert!(gates.is_pending(1, &Value::Int(1)));
        assert!(!gates.is_pending(1, &Value::Int(2)));
        assert!(!gates.is_pending(2, &Value::Int(1)));
        gates.settle(&[settled(1, 3)]);
        assert!(gates.is_pending(1, &Value::Int(1)));
        gates.settle(&[settled(1, 4)]);
        assert!(!gates.is_pending(1, &Value::Int(1)));
    }

    #[test]
    fn a_read_waits_for_the_versions_pending_when_it_came_and_no_later_ones() {
        let mut gates = ReadGates::new();
        gates.pend(&[pending(1, 3), pending(1, 4)]);
        assert_eq!(gates.admit(1, &Value::Int(1), "first"), None);
        gates.pend(&[pending(1, 5)]);
        assert_eq!(gates.admit(1, &Value::Int(1), "second"), None);
        assert!(gates.settle(&[settled(1, 3)]).is_empty());
        assert_eq!(gates.settle(&[settled(1, 4)]), vec!["first"]);
        assert_eq!(gates.settle(&[settled(1, 5)]), vec!["second"]);
        assert!(gates.is_empty(), "a clean key is forgotten");
    }

    #[test]
    fn settling_before_pending_in_one_round_leaves_the_key_dirty() {
        // The shell applies a round's pending fences first: a version committed and a newer
        // one pending in the same round leave the newer one gating reads.
        let mut gates = ReadGates::new();
        let round = [pending(1, 3), settled(1, 3), pending(1, 4)];
        gates.pend(&round);
        assert!(gates.settle(&round).is_empty());
        assert_eq!(gates.admit(1, &Value::Int(1), "r"), None);
        assert_eq!(gates.release_all(), vec!["r"]);
        assert!(gates.is_empty());
    }

    proptest! {
        /// Against a model: a read admitted at once saw nothing pending; a waiting read is
        /// released exactly when every version pending at its arrival is settled.
        #[test]
        fn reads_go_exactly_when_what_was_pending_is_settled(
            steps in prop::collection::vec((0u8..3, 0i64..3), 1..120)
        ) {
            let mut gates = ReadGates::new();
            // Model: per key, versions pending (in order) and reads with what they wait for.
            let mut pending_at: BTreeMap<i64, Vec<u64>> = BTreeMap::new();
            let mut waiting: Vec<(usize, i64, u64)> = Vec::new();
            let mut next_version = 1u64;
            let mut released = Vec::new();
            for (n, (op, key)) in steps.into_iter().enumerate() {
                let versions = pending_at.entry(key).or_default();
                match op {
                    0 => {
                        versions.push(next_version);
                        gates.pend(&[pending(key, next_version)]);
                        next_version += 1;
                    }
                    1 if !versions.is_empty() => {
                        let v = versions.remove(0);
                        released.extend(gates.settle(&[settled(key, v)]));
                        let settled_up_to = v;
                        let (go, stay): (Vec<_>, Vec<_>) = waiting
                            .iter()
                            .partition(|(_, k, w)| *k == key && *w <= settled_up_to);
                        let mut expected: Vec<usize> = go.iter().map(|(id, _, _)| *id).collect();
                        waiting = stay;
                        let mut got: Vec<usize> = std::mem::take(&mut released);
                        got.sort();
                        expected.sort();
                        prop_assert_eq!(got, expected);
                    }
                    _ => {
                        let newest = versions.last().copied();
                        match gates.admit(1, &Value::Int(key), n) {
                            Some(_) => prop_assert!(newest.is_none()),
                            None => waiting.push((n, key, newest.expect("waits only if pending"))),
                        }
                    }
                }
            }
        }
    }
}
