//! Installing a new configuration: spaces created and dropped, regions no longer kept cleared,
//! and the point leader's part of each key handed over to, or away from, this server.

use std::collections::BTreeMap;
use std::sync::Arc;

use tessera_geometry::RegionIndex;
use tessera_protocol::{Configuration, ErrorReply, Status};
use tessera_types::{Epoch, StoredObject, SubspaceId, Value, Version};

use super::chain::drop_pending;
use super::io::StoreWrite;
use super::space::SpaceRuntime;
use super::Replica;

impl Replica {
    /// Switches to `config`: spaces created and dropped, regions this server no longer keeps
    /// cleared, what was pending at regions it no longer holds dropped, servers that left no
    /// longer sent to, and the keys whose point leader this server stopped or started being
    /// handed over.
    pub(super) fn install(&mut self, config: Arc<Configuration>) {
        assert!(
            config.epoch > self.epoch() || self.config.epoch == Epoch(0),
            "epochs only move forward"
        );
        let spaces: BTreeMap<u64, Arc<SpaceRuntime>> = config
            .spaces
            .iter()
            .map(|s| match self.spaces.get(&s.id) {
                Some(existing) if existing.config() == s => (s.id, existing.clone()),
                _ => (s.id, Arc::new(SpaceRuntime::new(s.clone()))),
            })
            .collect();
        // Regions this server kept in a space that goes on, and keeps no more. A region it
        // leaves but rests in keeps its data: the server comes back to it, and the transfer
        // that brings it back writes only what changed meanwhile.
        for (id, before) in &self.spaces {
            let Some(now) = spaces.get(id) else { continue };
            // A dropped subspace's storage goes whole (the shell drops it), not region by region.
            let kept = |s: &SubspaceId| {
                now.config()
                    .schema
                    .subspaces
                    .get(s.get())
                    .is_some_and(|s| s.is_written())
            };
            for subspace in before.config().schema.subspace_ids().filter(kept) {
                for r in 0..before.config().replicas[subspace.get()].len() {
                    let location = (subspace, RegionIndex(r as u32));
                    if before.keeps(self.me, location) && !now.keeps(self.me, location) {
                        let (space, region) = (now.name().to_owned(), location.1);
                        self.outputs.writes.push(StoreWrite::ClearRegion {
                            space,
                            subspace,
                            region,
                        });
                    }
                }
            }
            // Key regions split off since `before` that this server does not keep: storage
            // moved into them the keys of a region it kept then (and may have left since,
            // in a configuration it skipped).
            let key_regions = |rt: &SpaceRuntime| rt.config().replicas[SubspaceId::KEY.get()].len();
            for r in key_regions(before)..key_regions(now) {
                let region = RegionIndex(r as u32);
                if !now.keeps(self.me, (SubspaceId::KEY, region)) {
                    self.outputs.writes.push(StoreWrite::ClearRegion {
                        space: now.name().to_owned(),
                        subspace: SubspaceId::KEY,
                        region,
                    });
                }
            }
        }
        // Writes to a dropped space fail; its chains stop here.
        let gone: Vec<(u64, Value)> = self
            .keys
            .keys()
            .filter(|(space, _)| !spaces.contains_key(space))
            .cloned()
            .collect();
        for key in gone {
            let state = self.keys.remove(&key).expect("listed above");
            self.forget_logs(state.pending.values().filter_map(|p| p.log).collect());
            // The space is gone: no read of it waits for anything.
            self.outputs.settle_reads(key.0, &key.1, Version(u64::MAX));
            let error = || {
                Err(ErrorReply::new(
                    Status::UnknownSpace,
                    "the space was removed",
                ))
            };
            let clients = state
                .in_flight
                .into_values()
                .flatten()
                .chain(state.held.into_iter().map(|(c, _)| c))
                .chain(state.deferred.into_iter().map(|(_, c, _)| c));
            for client in clients {
                self.outputs.replies.push((client, error()));
            }
        }
        // A server that holds no region (failed, removed) is sent nothing more, and what it
        // was sent is not retransmitted. Links keep their state, though: a link's numbering
        // must go on where it was if that server comes back.
        self.members = config
            .spaces
            .iter()
            .flat_map(|s| s.replicas.iter().flatten().flatten().copied())
            .collect();
        self.names = config
            .spaces
            .iter()
            .map(|s| (s.schema.name.clone(), s.id))
            .collect();
        for (id, now) in &spaces {
            if let Some(before) = self.spaces.get(id).cloned() {
                self.follow_key_splits(*id, &before, now);
            }
        }
        self.spaces = spaces;
        self.config = config;
        let keys: Vec<(u64, Value)> = self.keys.keys().cloned().collect();
        for key in keys {
            self.hand_over(&key);
        }
        self.install_transfers();
        self.install_backfills();
    }

    /// After a configuration change: drops what was pending at regions this server lost, and
    /// moves the point leader's part of `key` to this server, or away from it.
    fn hand_over(&mut self, key: &(u64, Value)) {
        let rt = self.spaces[&key.0].clone();
        let me = self.me;
        let state = self.keys.get_mut(key).expect("a key with state");
        let home = rt.key_location(&key.1);
        let (dropped, settled) =
            drop_pending(&mut state.pending, |location| !rt.holds(me, location), home);
        if let Some(version) = settled {
            self.outputs.settle_reads(key.0, &key.1, version);
        }
        state.applied.retain(|location, _| rt.holds(me, *location));
        state
            .delayed
            .retain(|(_, u)| rt.holds(me, (u.subspace, u.region)));
        let leads = rt.point_leader(&key.1).ok() == Some(me);
        let was_leading =
            state.latest.is_some() || !state.in_flight.is_empty() || !state.held.is_empty();
        if leads {
            // Everything pending at the key region here is in flight: this server's own writes,
            // or those of a removed point leader before it (the key region's replicas come
            // first on every chain, so they hold every update any later hop holds).
            let mut newest = None;
            for ((_, version), p) in state
                .pending
                .range((home, Version::NONE)..=(home, Version(u64::MAX)))
            {
                state.in_flight.entry(*version).or_insert(None);
                newest = Some((*version, p.update.new.clone()));
            }
            if let Some((version, new)) = newest {
                state.issued = state.issued.max(version);
                if state
                    .latest
                    .as_ref()
                    .is_none_or(|l| l.as_ref().is_none_or(|l| l.version < version))
                {
                    state.latest = Some(new.map(|object| StoredObject { version, object }));
                }
                let last = &state.pending[&(home, version)].update;
                if rt.is_destructive(last) {
                    state.blocked_by = Some(version);
                }
            }
            self.clock = self.clock.max(state.issued);
        } else if was_leading {
            // Another server leads the key now. Writes not ordered yet were not applied: they
            // may be sent again; those in flight may or may not complete.
            let epoch = self.config.epoch;
            let moved = || {
                ErrorReply::new(
                    Status::StaleEpoch,
                    format!("the key has another point leader in epoch {epoch}; retry"),
                )
            };
            let unknown = || {
                ErrorReply::new(Status::Timeout, "the key's point leader changed while the write was in flight: it may or may not apply")
            };
            for (_, client) in std::mem::take(&mut state.in_flight) {
                if let Some(c) = client {
                    self.outputs.replies.push((c, Err(unknown())));
                }
            }
            for (c, _) in std::mem::take(&mut state.held) {
                self.outputs.replies.push((c, Err(moved())));
            }
            for (_, c, _) in std::mem::take(&mut state.deferred) {
                self.outputs.replies.push((c, Err(moved())));
            }
            state.latest = None;
            state.blocked_by = None;
            state.draining = false;
        }
        self.forget_logs(dropped);
    }
}
