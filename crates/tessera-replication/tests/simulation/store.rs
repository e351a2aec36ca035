//! Each server's disk: a model store of committed entries and pending-update records, placed
//! by the geometry of the configuration it installed, and what a restart recovers.

use std::collections::{BTreeMap, BTreeSet};

use tessera_geometry::{point, RegionIndex, Tessellation};
use tessera_protocol::{ErrorReply, Status};
use tessera_replication::replica::RegionChunk;
use tessera_replication::{CommittedReader, EntryWrite, LogId, StoreWrite};
use tessera_types::{KeySplit, Object, SpaceSchema, StoredObject, SubspaceId, Value, Version};

/// A server's committed entries: (subspace, region, point, key) -> object. Keyed by the point
/// as the real store is, so a removal that names the wrong old object leaves a stale entry.
#[derive(Default, Clone)]
pub(crate) struct ModelStore {
    pub(crate) entries: BTreeMap<(u16, u32, Vec<u64>, Value), StoredObject>,
    /// The log of updates pending at the server's hops (`StoreWrite::Log`): id -> (version,
    /// the commit it will make).
    pub(crate) log: BTreeMap<LogId, (Version, EntryWrite)>,
}

impl ModelStore {
    /// What storage does when key regions were split between the geometries `from` and `to`
    /// (`Store::alter_space`, before the replica installs the configuration): in each key
    /// region whose range changed, the entries whose key `to` puts in another region move
    /// there, all at once. Returns how many moved.
    pub(crate) fn follow_key_splits(&mut self, from: &Geometry, to: &Geometry) -> u64 {
        let (before, after) = (&from.tessellations[0], &to.tessellations[0]);
        let changed: BTreeSet<u32> = (0..before.regions_count())
            .filter(|&r| before.key_range(RegionIndex(r)) != after.key_range(RegionIndex(r)))
            .collect();
        let moving: Vec<(u16, u32, Vec<u64>, Value)> = self
            .entries
            .keys()
            .filter(|(s, r, _, k)| *s == 0 && changed.contains(r) && to.key_region(k).0 != *r)
            .cloned()
            .collect();
        for entry in &moving {
            let object = self.entries.remove(entry).expect("listed above");
            let (subspace, _, point, key) = entry.clone();
            let region = to.key_region(&key).0;
            let twice = self.entries.insert((subspace, region, point, key), object);
            assert!(
                twice.is_none(),
                "a key moved by a split was in its new region already: {entry:?}"
            );
        }
        moving.len() as u64
    }
}

/// The space's geometry in a configuration: the tessellations, which change only where key
/// regions split (replica sets change with every configuration; they are not here). Its schema
/// has every subspace the run has added so far (added or re-cut: a subspace's id and cuts
/// never change, so an older configuration's subspaces are among them), and the
/// configuration's key splits.
pub(crate) struct Geometry {
    pub(crate) schema: SpaceSchema,
    pub(crate) tessellations: Vec<Tessellation>,
}

impl Geometry {
    /// The geometry of the configurations whose space has `key_splits`; `full` is the space's
    /// schema with every subspace it may have.
    pub(crate) fn new(full: &SpaceSchema, key_splits: &[KeySplit]) -> Geometry {
        let mut schema = full.clone();
        schema.key_splits = key_splits.to_vec();
        Geometry {
            tessellations: tessera_geometry::tessellations(&schema),
            schema,
        }
    }

    /// `None` where the object is not placed (a document outside its formula's subspaces).
    pub(crate) fn entry(
        &self,
        subspace: SubspaceId,
        o: &Object,
    ) -> Option<(u16, u32, Vec<u64>, Value)> {
        let p = point(&self.schema, subspace, o)?;
        let t = &self.tessellations[subspace.get()];
        let r = tessera_geometry::region_of_point(subspace, t, o.key(), &p);
        Some((subspace.0, r.0, p, o.key().clone()))
    }

    pub(crate) fn key_region(&self, key: &Value) -> RegionIndex {
        tessera_geometry::key_region(&self.tessellations[0], key)
    }
}

pub(crate) struct Reader<'a> {
    pub(crate) store: &'a ModelStore,
    pub(crate) geometry: &'a Geometry,
}

impl CommittedReader for Reader<'_> {
    fn get(&self, _space: &str, key: &Value) -> Result<Option<StoredObject>, ErrorReply> {
        let region = self.geometry.key_region(key);
        Ok(self
            .store
            .entries
            .range((0, region.0, Vec::new(), Value::Int(i64::MIN))..)
            .take_while(|((s, r, _, _), _)| *s == 0 && *r == region.0)
            .find(|((_, _, _, k), _)| k == key)
            .map(|(_, o)| o.clone()))
    }

    fn region_entry_version(
        &self,
        _space: &str,
        subspace: SubspaceId,
        region: RegionIndex,
        key: &Value,
    ) -> Result<Option<Version>, ErrorReply> {
        Ok(self
            .store
            .entries
            .iter()
            .find(|((s, r, _, k), _)| (*s, *r) == (subspace.0, region.0) && k == key)
            .map(|(_, o)| o.version))
    }

    fn entry_version(
        &self,
        _space: &str,
        subspace: SubspaceId,
        object: &Object,
    ) -> Result<Option<Version>, ErrorReply> {
        Ok(self
            .geometry
            .entry(subspace, object)
            .and_then(|e| self.store.entries.get(&e))
            .map(|o| o.version))
    }

    /// Up to three entries a chunk (small chunks: many interleavings with chain traffic); the
    /// cursor is the last entry's (point, key).
    fn region_entries(
        &self,
        space: &str,
        subspace: SubspaceId,
        region: RegionIndex,
        after: Option<&[u8]>,
        _max_bytes: usize,
    ) -> Result<RegionChunk, ErrorReply> {
        if space != "t" {
            return Ok(RegionChunk::default()); // the other spaces stay empty
        }
        let after: Option<(Vec<u64>, Value)> =
            after.map(|a| postcard::from_bytes(a).expect("a cursor this reader made"));
        let mut entries = self
            .store
            .entries
            .iter()
            .filter(|((s, r, p, k), _)| {
                (*s, *r) == (subspace.0, region.0)
                    && after.as_ref().is_none_or(|(ap, ak)| (p, k) > (ap, ak))
            })
            .map(|((_, _, p, k), o)| ((p.clone(), k.clone()), o.clone()));
        let chunk: Vec<_> = entries.by_ref().take(3).collect();
        let next = match (entries.next(), chunk.last()) {
            (Some(_), Some((cursor, _))) => Some(postcard::to_allocvec(cursor).expect("encodes")),
            _ => None,
        };
        Ok(RegionChunk {
            entries: chunk.into_iter().map(|(_, o)| o).collect(),
            next,
        })
    }

    fn check_chunk(
        &self,
        space: &str,
        subspace: SubspaceId,
        region: RegionIndex,
        range: (Option<&[u8]>, Option<&[u8]>),
        entries: &[StoredObject],
    ) -> Result<(), ErrorReply> {
        let (after, through) = Self::chunk_range(range)?;
        if space != "t" {
            return Ok(()); // the other spaces stay empty
        }
        let range = Range {
            subspace: subspace.0,
            region: region.0,
            after,
            through,
        };
        let fits = |e: &StoredObject| {
            self.geometry
                .entry(subspace, &e.object)
                .is_some_and(|at| range.holds(&at))
        };
        match entries.iter().find(|e| !fits(e)) {
            Some(e) => Err(ErrorReply::new(
                Status::Malformed,
                format!("{e:?} outside its chunk's range"),
            )),
            None => Ok(()),
        }
    }
}

impl Reader<'_> {
    /// A chunk's positions, decoded, when they are this model's, in order.
    fn chunk_range(
        range: (Option<&[u8]>, Option<&[u8]>),
    ) -> Result<(Option<Place>, Option<Place>), ErrorReply> {
        let decode = |bytes: &[u8]| {
            postcard::from_bytes::<Place>(bytes)
                .map_err(|e| ErrorReply::new(Status::Malformed, format!("a position: {e}")))
        };
        let after = range.0.map(decode).transpose()?;
        let through = range.1.map(decode).transpose()?;
        if let (Some(a), Some(t)) = (&after, &through) {
            if a >= t {
                return Err(ErrorReply::new(Status::Malformed, "a range backwards"));
            }
        }
        Ok((after, through))
    }
}

/// Applies a write of space `t`; the other spaces (configuration changes only) get no writes
/// but the clearing of regions and transfers of nothing, which this store, holding `t`
/// alone, ignores.
pub(crate) fn apply(store: &mut ModelStore, geometry: &Geometry, w: &StoreWrite) {
    let entry = match w {
        StoreWrite::Entry { entry, retires } => {
            if let Some(id) = retires {
                let record = store.log.remove(id);
                assert!(
                    record.is_some_and(|(_, logged)| logged == *entry),
                    "a commit retires the record of its own update: {w:?}"
                );
            }
            entry
        }
        StoreWrite::Log { id, version, entry } => {
            assert!(entry.space == "t", "only space t is written: {w:?}");
            let twice = store.log.insert(*id, (*version, entry.clone()));
            assert!(twice.is_none(), "log ids are not reused: {w:?}");
            return;
        }
        StoreWrite::Unlog(id) => {
            assert!(
                store.log.remove(id).is_some(),
                "only a record is removed: {w:?}"
            );
            return;
        }
        StoreWrite::ClearRegion {
            space,
            subspace,
            region,
        } => {
            if space == "t" {
                store
                    .entries
                    .retain(|(s, r, _, _), _| (*s, *r) != (subspace.0, region.0));
            }
            return;
        }
        StoreWrite::ReplaceRange {
            space,
            subspace,
            region,
            after,
            through,
            entries,
            keep,
        } => {
            if space == "t" {
                let range = Range {
                    subspace: subspace.0,
                    region: region.0,
                    after: after.as_deref().map(cursor),
                    through: through.as_deref().map(cursor),
                };
                replace_range(store, geometry, &range, entries, keep);
            }
            return;
        }
    };
    apply_entry(store, geometry, entry);
}

/// A place in a region as this model's cursors name it: (point, key).
type Place = (Vec<u64>, Value);

/// A cursor [`Reader::region_entries`] made.
fn cursor(bytes: &[u8]) -> Place {
    postcard::from_bytes(bytes).expect("a cursor this model made")
}

/// The places (`after`, `through`] of a region of a subspace (`None`: from its start, to its
/// end).
struct Range {
    subspace: u16,
    region: u32,
    after: Option<Place>,
    through: Option<Place>,
}

impl Range {
    fn holds(&self, (s, r, p, k): &(u16, u32, Vec<u64>, Value)) -> bool {
        let place = (p.clone(), k.clone());
        (*s, *r) == (self.subspace, self.region)
            && self.after.as_ref().is_none_or(|a| place > *a)
            && self.through.as_ref().is_none_or(|t| place <= *t)
    }
}

/// What `Store::commit` does with `ObjectWrite::ReplaceRange`, as its documentation says:
/// within the range, the entries become exactly the chunk's, plus those stored that are
/// exactly a kept (key, version).
fn replace_range(
    store: &mut ModelStore,
    geometry: &Geometry,
    range: &Range,
    entries: &[StoredObject],
    keep: &[(Value, Version)],
) {
    let chunk: BTreeMap<(u16, u32, Vec<u64>, Value), &StoredObject> = entries
        .iter()
        .map(|e| {
            let at = geometry
                .entry(SubspaceId(range.subspace), &e.object)
                .expect("a transfer entry is placed");
            assert!(
                range.holds(&at),
                "a transfer entry outside its chunk's range: {e:?}"
            );
            (at, e)
        })
        .collect();
    store.entries.retain(|at, o| {
        !range.holds(at)
            || chunk.get(at).is_some_and(|e| **e == *o)
            || (!chunk.contains_key(at) && keep.contains(&(at.3.clone(), o.version)))
    });
    for (at, e) in chunk {
        store.entries.insert(at, e.clone());
    }
}

/// What `Store::open` does with the log after a crash: commits every record, in version order,
/// and empties it.
pub(crate) fn recover_log(store: &mut ModelStore, geometry: &Geometry) {
    let mut records: Vec<(Version, LogId, EntryWrite)> = std::mem::take(&mut store.log)
        .into_iter()
        .map(|(id, (version, entry))| (version, id, entry))
        .collect();
    records.sort_by_key(|(version, id, _)| (*version, *id));
    for (_, _, entry) in records {
        apply_entry(store, geometry, &entry);
    }
}

fn apply_entry(store: &mut ModelStore, geometry: &Geometry, entry: &EntryWrite) {
    assert!(entry.space == "t", "only space t is written: {entry:?}");
    let EntryWrite {
        subspace,
        remove,
        insert,
        ..
    } = entry;
    if let Some(old) = remove {
        // Removing what is not there is allowed (an update committed again after a failure),
        // but never removes another version's entry: the key is at that point or absent.
        if let Some(e) = geometry.entry(*subspace, old) {
            store.entries.remove(&e);
        }
    }
    if let Some(new) = insert {
        let e = geometry.entry(*subspace, &new.object);
        let e = e.expect("a hop stores an object only where it is placed");
        store.entries.insert(e, new.clone());
    }
}
