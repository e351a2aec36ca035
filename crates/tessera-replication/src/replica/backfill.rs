//! Backfills: a point leader rewrites every object of a key region through its chain, so a
//! subspace being built gets its copy of each.

use std::collections::{BTreeMap, BTreeSet};

use tessera_geometry::RegionIndex;
use tessera_protocol::BackfillRef;
use tessera_types::{SubspaceId, Value};

use super::io::ClientId;
use super::io::CommittedReader;
use super::space::SpaceRuntime;
use super::state::{Backfill, KeyState};
use super::{Replica, BACKFILL_CHUNK_BYTES, BACKFILL_WINDOW};
use crate::write::KeyWrite;

impl Replica {
    /// Starts and forgets backfills as the configuration's builds and point leaders say: this
    /// server backfills each key region it leads that the build under way has not recorded
    /// done. One that goes on keeps its progress; one this server stops leading is dropped
    /// (its rewrites in flight end as any write of a deposed leader does), and the new leader
    /// starts it over. A new one first rewrites the keys with unfinished work here: an update
    /// ordered before the build has no hop in the new subspace, and storage does not show
    /// what is not committed yet. Every other key's last update before the build is in
    /// storage (the shell commits what is pending before it installs a configuration), where
    /// the backfill's reads find it.
    pub(super) fn install_backfills(&mut self) {
        let mut backfills = BTreeMap::new();
        for space in &self.config.spaces {
            let Some(build) = &space.build else { continue };
            let rt = &self.spaces[&space.id];
            for (r, set) in space.replicas[SubspaceId::KEY.get()].iter().enumerate() {
                let region = RegionIndex(r as u32);
                if set.first() != Some(&self.me) || build.done.binary_search(&region.0).is_ok() {
                    continue;
                }
                let key = (space.id, region);
                let backfill = match self.backfills.remove(&key) {
                    Some(b) if (b.since, b.subspace) == (build.since, build.subspace) => b,
                    _ => Backfill {
                        since: build.since,
                        subspace: build.subspace,
                        queue: self
                            .keys
                            .keys()
                            .filter(|(s, k)| {
                                *s == space.id && rt.key_location(k) == (SubspaceId::KEY, region)
                            })
                            .map(|(_, k)| k.clone())
                            .collect(),
                        cursor: None,
                        scanned: false,
                        outstanding: BTreeSet::new(),
                        reported: false,
                    },
                };
                backfills.insert(key, backfill);
            }
        }
        self.backfills = backfills;
    }

    /// Moves the backfills of the key regions this server leads along, once a tick: keeps at
    /// most [`BACKFILL_WINDOW`] rewrites under way in all, taking keys from the queue and,
    /// when it is empty, from the region's next chunk in storage (paced with the transfers);
    /// reports a region once it has read all of it and every rewrite has committed.
    pub(super) fn pump_backfills(&mut self, store: &impl CommittedReader) {
        let keys = &self.keys;
        for ((space, _), b) in self.backfills.iter_mut() {
            b.outstanding.retain(|k| {
                keys.get(&(*space, k.clone()))
                    .is_some_and(KeyState::rewrite_under_way)
            });
        }
        // The window is the server's, not each region's: every rewrite of every region goes
        // through the same few chains when the data is skewed (all of a subspace in one
        // region), and a window per region flooded them until resends piled up without end.
        let mut under_way: usize = self.backfills.values().map(|b| b.outstanding.len()).sum();
        let regions: Vec<(u64, RegionIndex)> = self.backfills.keys().copied().collect();
        for (space, region) in regions {
            let Some(rt) = self.spaces.get(&space).cloned() else {
                continue;
            };
            loop {
                let b = self
                    .backfills
                    .get_mut(&(space, region))
                    .expect("listed above");
                if under_way >= BACKFILL_WINDOW {
                    break;
                }
                if let Some(key) = b.queue.pop_front() {
                    let before = b.outstanding.len();
                    self.rewrite(&rt, region, key, store);
                    let b = self.backfills.get(&(space, region)).expect("listed above");
                    under_way += b.outstanding.len() - before;
                    continue;
                }
                // A backfill copies the space's objects, as a transfer copies a region's: it
                // must not starve the live load either (`Replica::set_transfer_rate`).
                if b.scanned || self.transfer_budget == 0 {
                    break;
                }
                let max_bytes = BACKFILL_CHUNK_BYTES.min(self.transfer_budget);
                self.transfer_budget -= max_bytes;
                let chunk = match store.region_entries(
                    rt.name(),
                    SubspaceId::KEY,
                    region,
                    b.cursor.as_deref(),
                    max_bytes,
                ) {
                    Ok(chunk) => chunk,
                    Err(e) => {
                        tracing::error!(error = %e, "reading a key region to backfill; trying again later");
                        break;
                    }
                };
                b.scanned = chunk.next.is_none();
                b.cursor = chunk.next;
                b.queue
                    .extend(chunk.entries.into_iter().map(|e| e.object.key().clone()));
            }
            let b = self
                .backfills
                .get_mut(&(space, region))
                .expect("listed above");
            if b.scanned && b.queue.is_empty() && b.outstanding.is_empty() && !b.reported {
                b.reported = true;
                self.outputs.backfills_done.push(BackfillRef {
                    space,
                    subspace: b.subspace,
                    region: region.0,
                    since: b.since,
                });
            }
        }
    }

    /// Rewrites `key`'s object through its chain (see [`KeyWrite::Rewrite`]), as part of the
    /// backfill of `region`, and remembers it until it commits.
    fn rewrite(
        &mut self,
        rt: &SpaceRuntime,
        region: RegionIndex,
        key: Value,
        store: &impl CommittedReader,
    ) {
        let write = KeyWrite::Rewrite { key: key.clone() };
        self.on_write(ClientId::BACKFILL, rt.name(), write, store);
        let under_way = self
            .keys
            .get(&(rt.config().id, key.clone()))
            .is_some_and(KeyState::rewrite_under_way);
        if under_way {
            if let Some(b) = self.backfills.get_mut(&(rt.config().id, region)) {
                b.outstanding.insert(key);
            }
        }
    }
}
