//! The chain itself: a point leader orders a client's write, each hop applies it as pending
//! and passes it on, acknowledgements travel back and commit it, and chains are repaired
//! after a configuration change.

use std::collections::BTreeMap;

use tessera_geometry::ChainHop;
use tessera_protocol::{ErrorReply, Status};
use tessera_types::{Epoch, ServerId, StoredObject, SubspaceId, Value, Version};

use super::io::ClientId;
use super::io::{CommittedReader, EntryWrite, LogId, StoreWrite, UnknownShape};
use super::space::Location;
use super::space::SpaceRuntime;
use super::state::Pending;
use super::{Replica, CHAIN_RESEND_TICKS, TOMBSTONE_TICKS};
use crate::message::{ChainAck, ChainUpdate, PeerMessage};
use crate::read_gate::ReadFence;
use crate::write::{evaluate, KeyWrite};

/// Removes the updates pending at the locations `dropped` names; returns their log records,
/// and the newest version removed from `home` (the key's region), whose reads it settles.
pub(super) fn drop_pending(
    pending: &mut BTreeMap<(Location, Version), Pending>,
    dropped: impl Fn(Location) -> bool,
    home: Location,
) -> (Vec<LogId>, Option<Version>) {
    let gone: Vec<(Location, Version)> = pending
        .keys()
        .filter(|(location, _)| dropped(*location))
        .copied()
        .collect();
    let settled = gone
        .iter()
        .filter(|(l, _)| *l == home)
        .map(|(_, v)| *v)
        .max();
    let logs = gone
        .into_iter()
        .filter_map(|k| pending.remove(&k).and_then(|p| p.log))
        .collect();
    (logs, settled)
}

fn ack_for(u: &ChainUpdate, (subspace, region): Location, epoch: Epoch) -> PeerMessage {
    PeerMessage::Ack(ChainAck {
        space: u.space,
        epoch,
        key: u.key().clone(),
        version: u.version,
        subspace,
        region,
    })
}

/// This server's place on `chain` at `location`.
fn position(chain: &[ChainHop], me: ServerId, location: Location) -> Option<usize> {
    chain
        .iter()
        .position(|h| h.server == me && (h.subspace, h.region) == location)
}

/// The hop `step` places after (1) or before (-1) this server's at `location` on `chain`;
/// `None` past either end (or off the chain).
fn neighbour(
    chain: &[ChainHop],
    me: ServerId,
    location: Location,
    step: isize,
) -> Option<(ServerId, Location)> {
    let hop = position(chain, me, location)?.checked_add_signed(step)?;
    chain.get(hop).map(|h| (h.server, (h.subspace, h.region)))
}

impl Replica {
    /// Pending updates dropped here without committing (this server stopped holding their
    /// region): their log records go, or are never written if they are of this round.
    pub(super) fn forget_logs(&mut self, logs: Vec<LogId>) {
        for id in logs {
            if self.round_logs.remove(&id).is_none() {
                self.outputs.writes.push(StoreWrite::Unlog(id));
            }
        }
    }

    /// After a configuration change: every update pending here whose next hop changed (a
    /// server left the chain) is sent on to its new next hop, or committed if this server is
    /// now the chain's tail. The new next hop may have it already: it passes it on if pending,
    /// or acknowledges it again if committed.
    pub(super) fn repair_chains(&mut self, store: &impl CommittedReader) {
        let mut moved: Vec<((u64, Value), Location, Version)> = Vec::new();
        let me = self.me;
        for (key, state) in self.keys.iter_mut() {
            let rt = &self.spaces[&key.0];
            for ((location, version), p) in state.pending.iter_mut() {
                let chain = rt.chain(&p.update);
                p.previous = neighbour(&chain, me, *location, -1);
                if neighbour(&chain, me, *location, 1) != p.next {
                    moved.push((key.clone(), *location, *version));
                }
            }
        }
        moved.sort_by_key(|(_, _, v)| *v);
        for (key, location, version) in moved {
            let rt = self.spaces[&key.0].clone();
            let epoch = self.epoch();
            let Some(state) = self.keys.get_mut(&key) else {
                continue;
            };
            let Some(p) = state.pending.get_mut(&(location, version)) else {
                continue;
            };
            p.update.epoch = epoch;
            let chain = rt.chain(&p.update);
            p.next = neighbour(&chain, self.me, location, 1);
            match p.next {
                None => {
                    p.acked = true;
                    self.commit_in_order(&rt, &key, location, store);
                }
                Some((server, (subspace, region))) => {
                    p.acked = false;
                    p.sent_tick = self.tick;
                    let next = ChainUpdate {
                        subspace,
                        region,
                        resent: true,
                        ..p.update.clone()
                    };
                    self.send(server, PeerMessage::Chain(next));
                }
            }
        }
    }

    /// Sends on, in the current configuration, every update waiting here for an
    /// acknowledgement for [`CHAIN_RESEND_TICKS`].
    pub(super) fn resend_stalled(&mut self) {
        let (tick, epoch) = (self.tick, self.epoch());
        let mut resend = Vec::new();
        for state in self.keys.values_mut() {
            for p in state.pending.values_mut() {
                let Some((server, (subspace, region))) = p.next else {
                    continue;
                };
                if p.acked || p.sent_tick + CHAIN_RESEND_TICKS > tick {
                    continue;
                }
                p.sent_tick = tick;
                p.update.epoch = epoch;
                let next = ChainUpdate {
                    subspace,
                    region,
                    resent: true,
                    ..p.update.clone()
                };
                resend.push((server, next));
            }
        }
        for (server, u) in resend {
            self.send(server, PeerMessage::Chain(u));
        }
    }

    pub(super) fn on_write(
        &mut self,
        client: ClientId,
        space: &str,
        write: KeyWrite,
        store: &impl CommittedReader,
    ) {
        let Some(rt) = self
            .names
            .get(space)
            .and_then(|id| self.spaces.get(id))
            .cloned()
        else {
            let error = ErrorReply::new(Status::UnknownSpace, format!("no space named {space:?}"));
            return self.outputs.replies.push((client, Err(error)));
        };
        let leader = match rt.point_leader(write.key()) {
            Ok(leader) => leader,
            Err(e) => return self.outputs.replies.push((client, Err(e))),
        };
        if leader != self.me {
            let error = ErrorReply::new(
                Status::StaleEpoch,
                format!(
                    "server {leader} leads that key in epoch {}; refresh the configuration",
                    self.epoch()
                ),
            );
            return self.outputs.replies.push((client, Err(error)));
        }
        let epoch = self.epoch();
        let state = self
            .keys
            .entry((rt.config().id, write.key().clone()))
            .or_default();
        if state.blocked_by.is_some() || state.draining {
            state.held.push_back((client, write));
            return;
        }
        let latest = match (&state.latest, &state.committed_home) {
            (Some(l), _) | (None, Some(l)) => l.clone(),
            (None, None) => match store.get(rt.name(), write.key()) {
                Ok(l) => l,
                Err(e) => return self.outputs.replies.push((client, Err(e))),
            },
        };
        let new = match evaluate(
            &rt.config().schema,
            latest.as_ref().map(|l| &l.object),
            &write,
        ) {
            Ok(new) => match rt.unknown_shape(new.as_ref()) {
                None => new,
                Some(shape) => {
                    state.latest = Some(latest);
                    let space = space.to_owned();
                    return self.outputs.unknown_shapes.push(UnknownShape {
                        client,
                        space,
                        write,
                        shape,
                    });
                }
            },
            Err(e) => {
                match state.in_flight.keys().next_back() {
                    Some(&last) => state.deferred.push((last, client, e)),
                    None => self.outputs.replies.push((client, Err(e))),
                }
                state.latest = Some(latest);
                return;
            }
        };
        let version = self
            .clock
            .max(state.issued)
            .max(latest.as_ref().map_or(Version::NONE, |l| l.version))
            .next()
            .max(Version::first_in(epoch));
        let update = ChainUpdate {
            space: rt.config().id,
            epoch,
            version,
            after: state.in_flight.keys().next_back().copied(),
            old: latest.as_ref().map(|l| l.object.clone()),
            new,
            subspace: SubspaceId::KEY,
            region: rt.key_location(write.key()).1,
            resent: false,
        };
        let destructive = rt.is_destructive(&update);
        if destructive && !state.in_flight.is_empty() {
            // Nothing of the key may travel beside a destructive update: let the earlier ones
            // commit first, then evaluate this write again.
            state.latest = Some(latest);
            state.draining = true;
            state.held.push_front((client, write));
            return;
        }
        self.clock = version;
        state.issued = version;
        state.latest = Some(
            update
                .new
                .clone()
                .map(|object| StoredObject { version, object }),
        );
        state.in_flight.insert(version, Some(client));
        if destructive {
            state.blocked_by = Some(version);
        }
        let me = self.me;
        self.on_chain(me, update, store);
    }

    /// An update for this server's hop at the region it names, from `from`. Only the hop
    /// before this one on the chain, as this server's configuration draws it, is listened
    /// to: a server removed from the chain (a deposed point leader above all) can no longer
    /// inject updates, whatever it still believes.
    pub(super) fn on_chain(
        &mut self,
        from: ServerId,
        u: ChainUpdate,
        store: &impl CommittedReader,
    ) {
        let Some(rt) = self.spaces.get(&u.space).cloned() else {
            return;
        };
        let chain = rt.chain(&u);
        let location = (u.subspace, u.region);
        let Some(hop) = position(&chain, self.me, location) else {
            tracing::warn!(version = %u.version, "dropped a chain message this server has no hop for");
            return;
        };
        let predecessor = if hop == 0 {
            self.me
        } else {
            chain[hop - 1].server
        };
        if hop == 0 && from == self.me && !u.resent {
            self.outputs.chains_started.push(chain.len());
        }
        if from != predecessor {
            tracing::debug!(version = %u.version, %from, "dropped an update from a server that is not the hop before");
            return;
        }
        if hop > 0
            && u.epoch
                < rt.config()
                    .member_since(chain[hop - 1].subspace, chain[hop - 1].region, from)
        {
            // Built by the hop before in an earlier membership of its region (it left and came
            // back since): what it says may be long stale.
            tracing::debug!(version = %u.version, %from, "dropped an update from an earlier membership of the hop before");
            return;
        }
        let key = (u.space, u.key().clone());
        let catching_up = self.catching_up(u.space, location);
        let state = self.keys.entry(key.clone()).or_default();
        if state.pending.contains_key(&(location, u.version)) {
            // Sent again after a configuration change, by a hop before this one: this hop sent
            // it on along the new chain when it installed the configuration.
            return;
        }
        // Only an update sent again by a new predecessor can be one this hop has (the link
        // from one predecessor delivers each message once).
        let removed_since = self
            .tombstones
            .get(&(u.space, u.key().clone(), location))
            .is_some_and(|&v| v >= u.version);
        // A region this round clears (this server stopped keeping it): what storage shows of
        // it now is about to go, so it shows nothing applied.
        let clearing = self.outputs.writes.iter().any(|w| {
            matches!(w, StoreWrite::ClearRegion { space, subspace, region }
                if space == rt.name() && (*subspace, *region) == location)
        });
        // A region a transfer is filling may still hold entries of an earlier membership of
        // this server: only what the chain did here since the transfer started counts. (An
        // update not among it is applied, even if an earlier copy of it committed here: the
        // source sends a key's updates in order, and the chunk that could bring a newer entry
        // comes after them.)
        let touched = catching_up.then(|| self.touched(u.space, location, u.key()));
        let state = self.keys.get_mut(&key).expect("created above");
        let applied_here = match (touched, state.applied.get(&location)) {
            (Some(touched), _) => touched.is_some_and(|v| v >= u.version),
            (None, Some(&applied)) => applied >= u.version,
            (None, None) if clearing => false,
            // The key left this region by a later update: this one is long committed here.
            (None, None) if removed_since => true,
            // In a subspace being built, an update ordered before the subspace was added can
            // reach a region after a later one of its key did (it was not destructive there
            // when it was ordered, so nothing held the later one back: the backfill's rewrite,
            // say); storage then shows it superseded.
            (None, None) if !u.resent && !rt.building(location.0) => false,
            (None, None) => match rt.applied_in_store(location, &u, store) {
                Ok(applied) => applied,
                Err(e) => {
                    tracing::error!(error = %e, "reading a committed entry; the update waits");
                    state.delayed.push((from, u));
                    return;
                }
            },
        };
        if applied_here {
            // Committed here already (it is not pending): the hops after this one have it too.
            // Acknowledge again: the first acknowledgement was lost with an older chain.
            if hop > 0 {
                let previous = &chain[hop - 1];
                let ack = ack_for(&u, (previous.subspace, previous.region), self.epoch());
                self.send(previous.server, ack);
            }
            return;
        }
        // A region catching up here has only this hop's source before it, on one FIFO link:
        // updates come in the order the source applied them, and the object an update
        // follows may not have been transferred yet.
        let ordered_by_link = catching_up;
        let state = self.keys.get_mut(&key).expect("created above");
        if let Some(after) = u
            .after
            .filter(|_| rt.in_location(location, u.old.as_ref()) && !ordered_by_link)
        {
            // The update this one follows produced the object this region holds: wait for it.
            let ready = match state.applied.get(&location) {
                Some(&applied) => applied >= after,
                // Forgotten here: then it committed, and storage holds what it produced.
                None => {
                    let old = u
                        .old
                        .as_ref()
                        .expect("an update that does not enter has an old object");
                    // A subspace being built lacks the objects of updates ordered before it
                    // was added: the one this follows may never come here. Nothing of the key
                    // here, it goes on (the backfill rewrites the key after it anyway).
                    let building = rt.building(location.0);
                    match store.entry_version(rt.name(), location.0, old) {
                        Ok(v) => v.map_or(building, |v| v >= after),
                        Err(e) => {
                            tracing::error!(error = %e, "reading a committed entry; the update waits");
                            false
                        }
                    }
                }
            };
            if !ready {
                state.delayed.push((from, u));
                return;
            }
        }
        state.applied.insert(location, u.version);
        if catching_up {
            self.note_touched(u.space, location, u.key(), u.version);
        }
        self.pass_on(&rt, location, &chain, hop, u, store);
        self.retry_delayed(&key, store);
    }

    /// `u` is applied at `location`, this server's hop `hop` of `chain`: pending there, sent
    /// to the next hop (or committed, at the tail).
    fn pass_on(
        &mut self,
        rt: &SpaceRuntime,
        location: Location,
        chain: &[ChainHop],
        hop: usize,
        u: ChainUpdate,
        store: &impl CommittedReader,
    ) {
        let key = (u.space, u.key().clone());
        let at = |h: &ChainHop| (h.server, (h.subspace, h.region));
        let next = chain.get(hop + 1).map(at);
        let previous = hop.checked_sub(1).map(|p| at(&chain[p]));
        let update = ChainUpdate {
            epoch: self.epoch(),
            // Once sent again, an update stays so down the chain: a hop it reaches through a new
            // member may have had it through the old chain.
            resent: u.resent,
            ..u
        };
        let log = next.map(|_| {
            let id = LogId(self.next_log);
            self.next_log += 1;
            let entry = rt.commit_write(location, &update);
            let version = update.version;
            let record = StoreWrite::Log { id, version, entry };
            self.round_logs.insert(id, record);
            id
        });
        // At the tail an update commits in this step: its commit is what makes it visible.
        if next.is_some() && location == rt.key_location(&key.1) {
            self.outputs.read_fences.push(ReadFence::Pending {
                space: key.0,
                key: key.1.clone(),
                version: update.version,
            });
        }
        let state = self.keys.get_mut(&key).expect("the key has state");
        state.pending.insert(
            (location, update.version),
            Pending {
                update: update.clone(),
                next,
                previous,
                acked: next.is_none(),
                sent_tick: self.tick,
                log,
            },
        );
        match next {
            None => self.commit_in_order(rt, &key, location, store),
            Some((server, (subspace, region))) => {
                self.send(
                    server,
                    PeerMessage::Chain(ChainUpdate {
                        subspace,
                        region,
                        ..update
                    }),
                );
            }
        }
    }

    /// Commits, in version order, the acknowledged updates pending at `location`, up to the
    /// first one that is not acknowledged yet; passes each acknowledgement up its chain.
    fn commit_in_order(
        &mut self,
        rt: &SpaceRuntime,
        key: &(u64, Value),
        location: Location,
        store: &impl CommittedReader,
    ) {
        loop {
            let Some(state) = self.keys.get_mut(key) else {
                return;
            };
            let Some((&id, first)) = state
                .pending
                .range((location, Version::NONE)..=(location, Version(u64::MAX)))
                .next()
            else {
                return;
            };
            if !first.acked {
                return;
            }
            let Pending {
                update: u,
                previous,
                log,
                ..
            } = state.pending.remove(&id).expect("found above");
            if location == rt.key_location(&key.1) {
                state.committed_home = Some(u.new.clone().map(|object| StoredObject {
                    version: u.version,
                    object,
                }));
                if log.is_some() {
                    self.outputs.settle_reads(key.0, &key.1, u.version);
                }
            }
            let entry = rt.commit_write(location, &u);
            let tombstone = (key.0, key.1.clone(), location);
            match &entry {
                EntryWrite { insert: None, .. } => {
                    self.tombstones.insert(tombstone.clone(), u.version);
                    self.tombstone_expiry.push_back((
                        self.tick + TOMBSTONE_TICKS,
                        tombstone,
                        u.version,
                    ));
                }
                _ => {
                    self.tombstones.remove(&tombstone);
                }
            }
            // A record of this round is not written at all: the commit takes its place, and
            // needs an fsync of its own.
            let retires = log.filter(|id| self.round_logs.remove(id).is_none());
            self.outputs
                .writes
                .push(StoreWrite::Entry { entry, retires });
            match previous {
                None => {
                    self.leader_committed(key.clone(), u.version);
                    self.release_held(rt, key, store);
                }
                Some((server, at)) => {
                    let ack = ack_for(&u, at, self.epoch());
                    self.send(server, ack);
                }
            }
        }
    }

    fn retry_delayed(&mut self, key: &(u64, Value), store: &impl CommittedReader) {
        let Some(state) = self.keys.get_mut(key) else {
            return;
        };
        if state.delayed.is_empty() {
            return;
        }
        let mut delayed = std::mem::take(&mut state.delayed);
        delayed.sort_by_key(|(_, u)| u.version);
        for (from, u) in delayed {
            self.on_chain(from, u, store);
        }
    }

    /// An acknowledgement, heeded only from the hop this server last sent the update to.
    pub(super) fn on_ack(&mut self, from: ServerId, a: ChainAck, store: &impl CommittedReader) {
        let Some(rt) = self.spaces.get(&a.space).cloned() else {
            return;
        };
        let key = (a.space, a.key.clone());
        let location = (a.subspace, a.region);
        let Some(pending) = self
            .keys
            .get_mut(&key)
            .and_then(|s| s.pending.get_mut(&(location, a.version)))
        else {
            return; // a repeat
        };
        let Some((next, (subspace, region))) = pending.next.filter(|(next, _)| *next == from)
        else {
            return; // from a hop this one no longer sends the update to
        };
        if a.epoch < rt.config().member_since(subspace, region, next) {
            return; // from an earlier membership of the next hop: it may not hold the update now
        }
        pending.acked = true;
        self.commit_in_order(&rt, &key, location, store);
    }

    /// The whole chain has `version`: answer its client and whoever waited for it.
    fn leader_committed(&mut self, key: (u64, Value), version: Version) {
        let state = self
            .keys
            .get_mut(&key)
            .expect("the leader tracks its in-flight updates");
        let Some(client) = state.in_flight.remove(&version) else {
            // Committed at the key region's head by a server that is not (or no longer) its
            // point leader: nobody to answer here.
            return;
        };
        assert!(
            state.in_flight.keys().all(|&v| v > version),
            "a key's updates commit at its point leader in version order"
        );
        if let Some(client) = client {
            self.outputs.replies.push((client, Ok(())));
        }
        let (ready, waiting): (Vec<_>, Vec<_>) = state
            .deferred
            .drain(..)
            .partition(|(v, _, _)| *v <= version);
        state.deferred = waiting;
        for (_, client, error) in ready {
            self.outputs.replies.push((client, Err(error)));
        }
        if state.blocked_by == Some(version) {
            state.blocked_by = None;
        }
        if state.in_flight.is_empty() {
            state.draining = false;
        }
    }

    fn release_held(
        &mut self,
        rt: &SpaceRuntime,
        key: &(u64, Value),
        store: &impl CommittedReader,
    ) {
        loop {
            let Some(state) = self.keys.get_mut(key) else {
                return;
            };
            if state.blocked_by.is_some() || state.draining {
                return;
            }
            let Some((client, write)) = state.held.pop_front() else {
                return;
            };
            self.on_write(client, rt.name(), write, store);
        }
    }
}
