//! State transfers: a region gaining a replica. The source streams its committed entries in
//! chunks over the FIFO link; the target writes each chunk over what its region holds (stale
//! entries from an earlier membership, a server back from a short stop: only what differs is
//! written), and reports the transfer complete once the last chunk is durable and the updates
//! the source left out have committed.

use std::collections::{BTreeMap, BTreeSet};

use tessera_geometry::RegionIndex;
use tessera_protocol::TransferRef;
use tessera_types::{Epoch, ServerId, StoredObject, Value, Version};

use super::chain::drop_pending;
use super::io::{CommittedReader, RegionChunk, StoreWrite};
use super::space::Location;
use super::state::{Incoming, Outgoing, Stage, TransferKey};
use super::{Replica, TRANSFER_CHUNK_BYTES, TRANSFER_WINDOW};
use crate::link::Link;
use crate::message::{PeerMessage, TransferChunk};

impl Replica {
    /// Starts and forgets transfers as the configuration lists them. A transfer into this
    /// server that is new here (or restarted, with a new id) starts over: what was pending at
    /// the region came from a predecessor that is no longer the source (the new one sends its
    /// pending updates again), and whatever the region holds here is from an earlier
    /// membership, which the chunks replace where it differs.
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
                            started.push(key);
                            incoming.insert(key, Incoming::default())
                        }
                    };
                }
            }
        }
        self.outgoing = outgoing;
        self.incoming = incoming;
        // A new transfer's chunks leave out the keys with an update pending here, counting on
        // that update to bring the key: so every such update goes to the target again, ahead
        // of the first chunk, whatever this hop sent it before (the target forgets what was
        // pending at the region when the transfer starts; it may have had it in an earlier
        // membership). Forgetting where it went makes `repair_chains` send it on again.
        for (space, location) in new_sources {
            for (_, state) in self.keys.iter_mut().filter(|((s, _), _)| *s == space) {
                for ((l, _), p) in state.pending.iter_mut() {
                    if *l == location {
                        p.next = None;
                    }
                }
            }
        }
        self.held_since = self.held_since_now();
        for (space, location, _) in started {
            self.start_incoming(space, location);
        }
    }

    /// Per region this server holds in the configuration: since when (see `held_since`).
    fn held_since_now(&self) -> BTreeMap<(u64, Location), Epoch> {
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
        held_since
    }

    /// A transfer into `location` of `space` starts here: what was pending there is dropped
    /// (the source sends it again), and what this server knew of its keys there with it.
    fn start_incoming(&mut self, space: u64, location: Location) {
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

    /// Whether a transfer into this server is filling `location` of `space`.
    pub(super) fn catching_up(&self, space: u64, location: Location) -> bool {
        self.incoming_at(space, location).is_some()
    }

    /// The transfer filling `location` of `space` here, if any (one at a time per region).
    fn incoming_at(&self, space: u64, location: Location) -> Option<&Incoming> {
        let mut at = self
            .incoming
            .range((space, location, 0)..=(space, location, u64::MAX));
        at.next().map(|(_, incoming)| incoming)
    }

    /// The last version of `key` applied at `location` of `space` since the transfer filling
    /// it started (`None`: none applied, or no transfer).
    pub(super) fn touched(&self, space: u64, location: Location, key: &Value) -> Option<Version> {
        self.incoming_at(space, location)?.touched.get(key).copied()
    }

    /// Records that an update of `key` at `version` was applied at `location` of `space`,
    /// which a transfer is filling.
    pub(super) fn note_touched(
        &mut self,
        space: u64,
        location: Location,
        key: &Value,
        version: Version,
    ) {
        let range = (space, location, 0)..=(space, location, u64::MAX);
        if let Some((_, incoming)) = self.incoming.range_mut(range).next() {
            let last = incoming.touched.entry(key.clone()).or_insert(version);
            *last = (*last).max(version);
        }
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
            let (space, location, _) = key;
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
                let message = self.chunk_message(key, chunk);
                self.send(to, PeerMessage::Transfer(message));
            }
        }
    }

    /// The message that sends `chunk`, read for transfer `key` after its cursor, which moves
    /// past it.
    fn chunk_message(&mut self, key: TransferKey, chunk: RegionChunk) -> TransferChunk {
        let (space, location, id) = key;
        // Every key with an update pending here, whether its entry is in this chunk or not
        // (one that enters the region has none yet): the target keeps what the chain wrote
        // of them.
        let left_out: BTreeSet<Value> = self
            .pending_in(space, location)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let entries: Vec<StoredObject> = chunk
            .entries
            .into_iter()
            .filter(|e| !left_out.contains(e.object.key()))
            .collect();
        let last = chunk.next.is_none();
        let o = self
            .outgoing
            .get_mut(&key)
            .expect("a transfer this server sends");
        let after = std::mem::replace(&mut o.cursor, chunk.next.clone());
        o.finished = last;
        TransferChunk {
            space,
            epoch: self.config.epoch,
            id,
            subspace: location.0,
            region: location.1,
            after,
            through: chunk.next,
            entries,
            left_out: left_out.into_iter().collect(),
            last,
        }
    }

    /// A chunk of a transfer into this server, from its source: written over the region's
    /// range it covers (only what differs is written; keys an update on the chain brought, or
    /// the source left out for one, are the chain's); after the last one the transfer is
    /// reported complete once the updates pending here then have committed.
    pub(super) fn on_transfer(
        &mut self,
        from: ServerId,
        c: TransferChunk,
        store: &impl CommittedReader,
    ) {
        let location = (c.subspace, c.region);
        let key = (c.space, location, c.id);
        let Some(incoming) = self.incoming.get(&key) else {
            tracing::debug!(%from, "dropped a chunk of a transfer this server is not receiving");
            return;
        };
        let rt = self.spaces[&c.space].clone();
        let source = rt
            .config()
            .transfer_at(c.subspace, c.region)
            .map(|t| rt.config().transfer_source(t));
        if source != Some(from) {
            tracing::debug!(%from, "dropped a transfer chunk from a server that is not its source");
            return;
        }
        // The link delivers the source's chunks once each, in order: one that does not start
        // where the last ended would leave part of the region as it was.
        if incoming.stage
            != (Stage::Receiving {
                resume: c.after.clone(),
            })
        {
            tracing::warn!(%from, "dropped a transfer chunk that does not follow the one before");
            return;
        }
        let range = (c.after.as_deref(), c.through.as_deref());
        if let Err(e) = store.check_chunk(rt.name(), c.subspace, c.region, range, &c.entries) {
            tracing::warn!(%from, error = %e, "dropped a transfer chunk that does not fit storage");
            return;
        }
        let write = replace_range(rt.name(), &incoming.touched, &c);
        self.outputs.writes.push(write);
        let stage = match c.through {
            Some(resume) => Stage::Receiving {
                resume: Some(resume),
            },
            None => Stage::Settling(self.pending_in(c.space, location)),
        };
        self.incoming.get_mut(&key).expect("found above").stage = stage;
        self.settle_transfers();
    }

    /// The (key, version) of every update pending at `location` of `space` here.
    fn pending_in(&self, space: u64, location: Location) -> Vec<(Value, Version)> {
        self.keys
            .iter()
            .filter(|((s, _), _)| *s == space)
            .flat_map(|((_, k), state)| {
                state
                    .pending
                    .keys()
                    .filter(|(l, _)| *l == location)
                    .map(|(_, v)| (k.clone(), *v))
            })
            .collect()
    }

    /// Reports every transfer into this server whose last chunk came and whose updates
    /// pending then have all committed here (see [`Stage::Settling`]).
    pub(super) fn settle_transfers(&mut self) {
        let keys = &self.keys;
        for (&(space, location, id), incoming) in self.incoming.iter_mut() {
            let state = &mut incoming.stage;
            let Stage::Settling(waiting) = state else {
                continue;
            };
            waiting.retain(|(k, v)| {
                keys.get(&(space, k.clone()))
                    .is_some_and(|s| s.pending.contains_key(&(location, *v)))
            });
            if waiting.is_empty() {
                *state = Stage::Reported;
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

/// The storage write of chunk `c` of a transfer into a region of space `name`, whose keys
/// `touched` had updates applied there since the transfer started: the chunk's entries but
/// those the chain brought at least as new, and, kept, the chain's entries of those keys and
/// of the keys the source left out (each as of the last update applied here; a key the chain
/// did not bring here yet keeps nothing: its update is on its way).
///
/// Every other entry of the range here goes. One the chain wrote here since the transfer
/// started is of a key that had an update pending at the source when it read the chunk
/// (left out: the source lists them all, as an update entering the region has no entry
/// there yet), or one whose updates had all committed there, after here (a hop commits after
/// the hop it sent the update to): then the source's entry is the same, in the chunk if it
/// lies in the range, and skipped here or equal. A kept (key, version) is the chain's write:
/// a key's versions are never given twice, even across a delete (tessera-storage's
/// `replace.rs` says why), so an entry of that version here is that write's object.
fn replace_range(name: &str, touched: &BTreeMap<Value, Version>, c: &TransferChunk) -> StoreWrite {
    let newer_here =
        |e: &StoredObject| touched.get(e.object.key()).is_some_and(|&v| v >= e.version);
    let (skipped, entries): (Vec<&StoredObject>, Vec<&StoredObject>) =
        c.entries.iter().partition(|e| newer_here(e));
    let chain_keys = skipped
        .into_iter()
        .map(|e| e.object.key())
        .chain(&c.left_out);
    let keep: BTreeMap<Value, Version> = chain_keys
        .filter_map(|k| touched.get(k).map(|v| (k.clone(), *v)))
        .collect();
    StoreWrite::ReplaceRange {
        space: name.to_owned(),
        subspace: c.subspace,
        region: c.region,
        after: c.after.clone(),
        through: c.through.clone(),
        entries: entries.into_iter().cloned().collect(),
        keep: keep.into_iter().collect(),
    }
}
