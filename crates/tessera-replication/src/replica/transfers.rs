//! State transfers: a region gaining a replica. The source streams its committed entries in
//! chunks over the FIFO link; the target reports the transfer complete once the last chunk is
//! durable and the updates the source left out have committed.

use std::collections::BTreeMap;

use tessera_geometry::RegionIndex;
use tessera_protocol::TransferRef;
use tessera_types::{Epoch, ServerId, StoredObject, Value, Version};

use super::chain::drop_pending;
use super::io::{CommittedReader, EntryWrite, StoreWrite};
use super::space::Location;
use super::state::{Incoming, Outgoing, TransferKey};
use super::{Replica, TRANSFER_CHUNK_BYTES, TRANSFER_WINDOW};
use crate::link::Link;
use crate::message::{PeerMessage, TransferChunk};

impl Replica {
    /// Starts and forgets transfers as the configuration lists them. A transfer into this
    /// server that is new here (or restarted, with a new id) starts from an empty region:
    /// whatever the region held here is from an earlier membership, and what was pending at
    /// it came from a predecessor that is no longer the source (the new one sends its pending
    /// updates again).
    pub(super) fn install_transfers(&mut self) {
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
    pub(super) fn catching_up(&self, space: u64, location: Location) -> bool {
        self.incoming
            .keys()
            .any(|&(s, l, _)| s == space && l == location)
    }

    /// Sends the next chunks of the transfers this server is the source of, as far as each
    /// link's window allows. Only when storage holds everything this machine decided (no
    /// write awaits the disk): then a chunk, read from storage, is exactly the committed state
    /// of the keys that have no update pending at the region here.
    pub(super) fn pump_transfers(&mut self, store: &impl CommittedReader) {
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
    pub(super) fn on_transfer(&mut self, from: ServerId, c: TransferChunk) {
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
    pub(super) fn settle_transfers(&mut self) {
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
}
