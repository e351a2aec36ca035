//! An ordered space's key region split in two: pending updates, last versions and tombstones
//! follow their keys into the new region.

use tessera_geometry::RegionIndex;
use tessera_types::{Epoch, SubspaceId, Value};

use super::space::Location;
use super::space::SpaceRuntime;
use super::Replica;

impl Replica {
    /// A key region of space `id` split between `before` and `now` (`SpaceChange::
    /// SplitKeyRegion`): the keys that moved to the new region are known there from now on.
    /// Storage moved their committed entries already (the shell alters storage before it
    /// installs); here their pending updates, last versions and tombstones follow. A chain
    /// message built before the split may name either region for keys now in the other, so
    /// both regions count as held from the split's epoch: older messages for them are
    /// dropped, and their senders send them again in a later configuration
    /// (`resend_stalled`, or at once if their next hop changed).
    pub(super) fn follow_key_splits(&mut self, id: u64, before: &SpaceRuntime, now: &SpaceRuntime) {
        let (old, new) = (
            &before.tessellations()[SubspaceId::KEY.get()],
            &now.tessellations()[SubspaceId::KEY.get()],
        );
        if old == new {
            return;
        }
        let home = |key: &Value, location: Location| -> Location {
            if location.0 == SubspaceId::KEY {
                now.key_location(key)
            } else {
                location
            }
        };
        for ((space, key), state) in self.keys.iter_mut() {
            if *space != id {
                continue;
            }
            state.pending = std::mem::take(&mut state.pending)
                .into_iter()
                .map(|((location, version), mut p)| {
                    p.update.region = home(key, (p.update.subspace, p.update.region)).1;
                    ((home(key, location), version), p)
                })
                .collect();
            state.applied = std::mem::take(&mut state.applied)
                .into_iter()
                .map(|(location, version)| (home(key, location), version))
                .collect();
            for (_, u) in state.delayed.iter_mut() {
                u.region = home(key, (u.subspace, u.region)).1;
            }
        }
        self.tombstones = std::mem::take(&mut self.tombstones)
            .into_iter()
            .map(|((space, key, location), version)| {
                let at = if space == id {
                    home(&key, location)
                } else {
                    location
                };
                ((space, key, at), version)
            })
            .collect();
        for (_, (space, key, location), _) in self.tombstone_expiry.iter_mut() {
            if *space == id {
                *location = home(key, *location);
            }
        }
        // Both regions of each split since `before` are held, for chain messages, from the
        // split's epoch (a later start, by a transfer, stays); one built before it may name
        // either region for keys now in the other.
        let splits = &now.config().schema.key_splits;
        let first_new = before.config().schema.key_splits.len().min(splits.len());
        for (i, split) in splits.iter().enumerate().skip(first_new) {
            // Split `i` made region `partitions + i`.
            let new_region = RegionIndex(now.config().schema.partitions + i as u32);
            for region in [RegionIndex(split.region), new_region] {
                let since = self
                    .held_since
                    .entry((id, (SubspaceId::KEY, region)))
                    .or_insert(Epoch(split.epoch));
                *since = (*since).max(Epoch(split.epoch));
            }
        }
    }
}
