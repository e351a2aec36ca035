//! A space of the installed configuration as the replica uses it: its tessellations, chains,
//! the locations this server holds, and the storage writes of a commit.

use std::collections::BTreeSet;
use std::ops::Deref;

use tessera_geometry::{chain_for_update, point, ChainHop, RegionIndex, ReplicaMap};
use tessera_protocol::{ErrorReply, SpaceConfig, SpaceMap};
use tessera_types::{
    Object, ServerId, Shape, StoredObject, SubspaceId, SubspaceState, Value, DOCUMENT_INDEX,
    FORMULA_INDEX,
};

use super::io::{CommittedReader, EntryWrite};
use crate::message::ChainUpdate;

/// A space of the configuration with its tessellations, and the shapes it may store.
pub(super) struct SpaceRuntime {
    pub(super) map: SpaceMap,
    /// A dynamic space's shapes whose documents may be stored (`SpaceConfig::shapes`, ready).
    shapes: BTreeSet<Shape>,
}

/// A space's runtime is its map, plus the shapes it may store.
impl Deref for SpaceRuntime {
    type Target = SpaceMap;

    fn deref(&self) -> &SpaceMap {
        &self.map
    }
}

impl ReplicaMap for SpaceRuntime {
    fn replicas(&self, subspace: SubspaceId, region: RegionIndex) -> &[ServerId] {
        self.config().replicas_of(subspace, region)
    }
}

impl SpaceRuntime {
    pub(super) fn new(config: SpaceConfig) -> SpaceRuntime {
        SpaceRuntime {
            shapes: config
                .shapes
                .iter()
                .zip(&config.shape_entries)
                .filter(|(_, e)| e.ready)
                .map(|(s, _)| s.clone())
                .collect(),
            map: SpaceMap::new(config),
        }
    }

    /// The shape of `object`'s document when the space is dynamic and has not registered it,
    /// or not made it ready: such a document may not be stored yet, or a search planned from
    /// the registered shapes, or answered by a server that does not know it, would miss it.
    pub(super) fn unknown_shape(&self, object: Option<&Object>) -> Option<Shape> {
        if !self.config().schema.is_dynamic() {
            return None;
        }
        let object = object?;
        let (Value::Document(d), Value::String(formula)) =
            (object.get(DOCUMENT_INDEX), object.get(FORMULA_INDEX))
        else {
            return None;
        };
        // Formula ids are text (validated when written); other bytes name no formula.
        let shape = d.shape_in(formula.as_str()?);
        (!self.shapes.contains(&shape)).then_some(shape)
    }

    pub(super) fn chain(&self, u: &ChainUpdate) -> Vec<ChainHop> {
        chain_for_update(
            &self.config().schema,
            self.tessellations(),
            self,
            u.old.as_ref(),
            u.new.as_ref(),
        )
    }

    pub(super) fn key_location(&self, key: &Value) -> Location {
        (SubspaceId::KEY, self.key_region(key))
    }

    /// Whether `me` is in the replica set of `location` (none: a dropped subspace has no
    /// regions).
    pub(super) fn holds(&self, me: ServerId, (subspace, region): Location) -> bool {
        self.config().holds(subspace, region, me)
    }

    /// Whether `me`'s storage keeps `location`: it holds it, or rests there and comes back to
    /// it (`SpaceConfig::keeps`).
    pub(super) fn keeps(&self, me: ServerId, (subspace, region): Location) -> bool {
        self.config().keeps(subspace, region, me)
    }

    /// Whether `subspace` is being built: it does not hold every object yet.
    pub(super) fn building(&self, subspace: SubspaceId) -> bool {
        self.config().schema.subspace(subspace).state == SubspaceState::Building
    }

    /// Whether `u` moves the object out of a region of some subspace, or deletes it.
    pub(super) fn is_destructive(&self, u: &ChainUpdate) -> bool {
        match (&u.old, &u.new) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some(o), Some(n)) => self.config().schema.written_subspaces().skip(1).any(|s| {
                // Leaving a subspace (a document changing formula) is moving out too;
                // entering one is not.
                let from = self.region_of(s, o);
                from.is_some() && from != self.region_of(s, n)
            }),
        }
    }

    pub(super) fn in_location(
        &self,
        (subspace, region): Location,
        object: Option<&Object>,
    ) -> bool {
        object.is_some_and(|o| self.region_of(subspace, o) == Some(region))
    }

    /// The storage write that commits `u` at `location`. It removes the old object's entry
    /// only where the new one does not replace it (same key, same point): the write is also
    /// the hop's log record ([`StoreWrite::Log`]), so it carries no object it need not.
    pub(super) fn commit_write(&self, location: Location, u: &ChainUpdate) -> EntryWrite {
        let replaced = |old: &Object| {
            u.new.as_ref().is_some_and(|new| {
                self.in_location(location, Some(new))
                    && (location.0 == SubspaceId::KEY
                        || point(&self.config().schema, location.0, old)
                            == point(&self.config().schema, location.0, new))
            })
        };
        let remove = u
            .old
            .as_ref()
            .filter(|o| self.in_location(location, Some(o)) && !replaced(o))
            .cloned();
        let insert = u
            .new
            .as_ref()
            .filter(|o| self.in_location(location, Some(o)))
            .map(|o| StoredObject {
                version: u.version,
                object: o.clone(),
            });
        assert!(
            remove.is_some() || insert.is_some(),
            "a hop holds the old or the new object"
        );
        EntryWrite {
            space: self.name().to_owned(),
            subspace: location.0,
            remove,
            insert,
        }
    }

    /// Whether storage shows `u` applied (and so committed) at `location`, for an update sent
    /// again after a chain repair to a hop that has forgotten the key. For a hop that holds
    /// the new object: its entry has `u`'s version or a later one; or, if neither the new nor
    /// the old object's entry is there (a later update moved the object within the region),
    /// the key's entry anywhere in the region does (a scan of the region: rare, and only on
    /// this path). For a hop that only removes (a destructive update, issued once every
    /// earlier update of the key had committed, so the entry it removes was there when it was
    /// issued): that entry is gone, or was written again by a later update. Not for a region
    /// a transfer is filling, whose storage may hold entries of an earlier membership (the
    /// replica asks what the chain did there instead).
    pub(super) fn applied_in_store(
        &self,
        location: Location,
        u: &ChainUpdate,
        store: &impl CommittedReader,
    ) -> Result<bool, ErrorReply> {
        let (subspace, region) = location;
        let old_here = u
            .old
            .as_ref()
            .filter(|o| self.in_location(location, Some(o)));
        let Some(new) = u
            .new
            .as_ref()
            .filter(|n| self.in_location(location, Some(n)))
        else {
            let old = old_here.expect("a hop holds the old object when it does not hold the new");
            return Ok(store
                .entry_version(self.name(), subspace, old)?
                .is_none_or(|v| v > u.version));
        };
        if store
            .entry_version(self.name(), subspace, new)?
            .is_some_and(|v| v >= u.version)
        {
            return Ok(true);
        }
        if let Some(old) = old_here {
            if let Some(v) = store.entry_version(self.name(), subspace, old)? {
                return Ok(v > u.version);
            }
        }
        Ok(store
            .region_entry_version(self.name(), subspace, region, u.key())?
            .is_some_and(|v| v >= u.version))
    }
}

/// A region of a subspace: where one hop of a chain keeps its copy.
pub(super) type Location = (SubspaceId, RegionIndex);
