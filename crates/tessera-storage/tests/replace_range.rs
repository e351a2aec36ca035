//! `ObjectWrite::ReplaceRange`, the target side of a state transfer into a region that may hold
//! stale data: against a `BTreeMap` model of the region in the documented storage-key order, a
//! chunk leaves its range holding exactly its entries and the kept ones, touches nothing
//! outside it, and writes exactly the entries that differ. And the figure it exists for: a
//! region of 20,000 objects of which 1 % changed costs a catch-up about 1 % of a full
//! transfer's writes.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{all_regions, open, people, person, put, tessellation};
use proptest::prelude::*;
use tessera_geometry::{interleave, point, RegionIndex};
use tessera_storage::{ObjectWrite, RegionChunk, StorageError, Store, StoredObject};
use tessera_types::{Object, SpaceSchema, SubspaceId, Value, Version};

const SPACE: &str = "people";

/// An object's region in `subspace` and its storage key there, from the documented layout:
/// `region (u32 BE) | key bytes` in the key subspace, `region | Z-value of the point | key
/// bytes` in the others (people keys are strings: their bytes).
fn place(schema: &SpaceSchema, subspace: usize, object: &Object) -> (RegionIndex, Vec<u8>) {
    let p = point(schema, SubspaceId(subspace as u16), object).expect("typed");
    let region = tessellation(schema, subspace).region_of(&p);
    let mut key = region.0.to_be_bytes().to_vec();
    if subspace != 0 {
        key.extend_from_slice(&interleave(&p));
    }
    match object.key() {
        Value::String(s) => key.extend_from_slice(s.as_bytes()),
        other => panic!("people keys are strings, not {other:?}"),
    }
    (region, key)
}

/// Every region of every subspace, read whole.
fn snapshot(store: &Store, schema: &SpaceSchema) -> Vec<Vec<StoredObject>> {
    (0..schema.subspaces.len())
        .flat_map(|s| all_regions(schema, s).into_iter().map(move |r| (s, r)))
        .map(|(s, r)| {
            let chunk = store
                .region_entries(SPACE, SubspaceId(s as u16), r, None, usize::MAX)
                .unwrap();
            assert!(chunk.next.is_none());
            chunk.entries
        })
        .collect()
}

/// A small object of key `k{key}`: `a` picks its region in subspace 1 (negative or not), `b`
/// and `s` its place there and its bytes.
fn object(key: u8, a: i8, b: i8, s: u8) -> Object {
    person(&format!("k{key}"), a as i64, b as i64, &format!("s{s}"))
}

#[derive(Clone, Debug)]
struct Case {
    /// What the target stores: per key, an object and its version.
    stored: BTreeMap<u8, (i8, i8, u8, u64)>,
    /// What the source has: per key likewise (the chunk carries those in the range).
    source: BTreeMap<u8, (i8, i8, u8, u64)>,
    /// Keys kept, each with a version: the target's own (the chain wrote it) or another.
    keep: BTreeMap<u8, Option<u64>>,
    subspace: usize,
    /// The range's bounds, as indexes into the sorted keys of the region (`None`: open).
    after: Option<usize>,
    through: Option<usize>,
}

fn objects() -> impl Strategy<Value = BTreeMap<u8, (i8, i8, u8, u64)>> {
    proptest::collection::btree_map(0u8..16, (-3i8..3, -3i8..3, 0u8..2, 1u64..4), 0..14)
}

fn case() -> impl Strategy<Value = Case> {
    (
        objects(),
        objects(),
        proptest::collection::btree_map(0u8..16, proptest::option::of(1u64..4), 0..6),
        0usize..2,
        proptest::option::of(0usize..40),
        proptest::option::of(0usize..40),
    )
        .prop_map(|(stored, source, keep, subspace, after, through)| Case {
            stored,
            source,
            keep,
            subspace,
            after,
            through,
        })
}

fn stored_object(key: u8, &(a, b, s, version): &(i8, i8, u8, u64)) -> StoredObject {
    StoredObject {
        version: Version(version),
        object: object(key, a, b, s),
    }
}

/// The write `case` makes, with the region it is for and the model's region afterwards (by
/// storage key), and how many entries differ.
fn write_and_model(
    schema: &SpaceSchema,
    case: &Case,
) -> (
    ObjectWrite,
    RegionIndex,
    BTreeMap<Vec<u8>, StoredObject>,
    usize,
) {
    let sub = case.subspace;
    // The region of the first stored object, or region 0.
    let region = case.stored.iter().next().map_or(RegionIndex(0), |(k, o)| {
        place(schema, sub, &stored_object(*k, o).object).0
    });
    let in_region = |objects: &BTreeMap<u8, (i8, i8, u8, u64)>| -> BTreeMap<Vec<u8>, StoredObject> {
        objects
            .iter()
            .map(|(k, o)| stored_object(*k, o))
            .filter_map(|o| {
                let (r, key) = place(schema, sub, &o.object);
                (r == region).then_some((key, o))
            })
            .collect()
    };
    let mut model = in_region(&case.stored);
    let source = in_region(&case.source);
    let keys: Vec<&Vec<u8>> = model
        .keys()
        .chain(source.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let bound = |i: Option<usize>| i.and_then(|i| keys.get(i).map(|k| (*k).clone()));
    let (mut after, mut through) = (bound(case.after), bound(case.through));
    if let (Some(a), Some(t)) = (&after, &through) {
        if a >= t {
            (after, through) = (None, None);
        }
    }
    let inside = |key: &Vec<u8>| {
        after.as_ref().is_none_or(|a| key > a) && through.as_ref().is_none_or(|t| key <= t)
    };
    let entries: BTreeMap<Vec<u8>, StoredObject> =
        source.into_iter().filter(|(k, _)| inside(k)).collect();
    let keep: Vec<(Value, Version)> = case
        .keep
        .iter()
        .map(|(k, v)| {
            let version = v.or(case.stored.get(k).map(|o| o.3)).unwrap_or(1);
            (Value::from(format!("k{k}")), Version(version))
        })
        .collect();
    let kept = |o: &StoredObject| keep.contains(&(o.object.key().clone(), o.version));
    // In the range: the chunk's entries, and what was there if it is kept.
    let before = model.clone();
    model.retain(|key, o| !inside(key) || entries.contains_key(key) || kept(o));
    model.extend(entries.iter().map(|(k, o)| (k.clone(), o.clone())));
    let places: BTreeSet<&Vec<u8>> = before.keys().chain(model.keys()).collect();
    let differing = places
        .into_iter()
        .filter(|k| before.get(*k) != model.get(*k))
        .count();
    let write = ObjectWrite::ReplaceRange {
        space: SPACE.to_owned(),
        subspace: SubspaceId(sub as u16),
        region,
        after,
        through,
        entries: entries.into_values().collect(),
        keep,
    };
    (write, region, model, differing)
}

fn load(store: &Store, objects: &BTreeMap<u8, (i8, i8, u8, u64)>) {
    let writes: Vec<ObjectWrite> = objects
        .iter()
        .map(|(k, o)| {
            let o = stored_object(*k, o);
            put(SPACE, None, o.version.0, o.object)
        })
        .collect();
    store.commit(&writes).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// The region ends as the model says, nothing else changes, and the store wrote exactly
    /// the entries that differ.
    #[test]
    fn a_chunk_writes_only_what_differs(case in case()) {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let schema = people(SPACE, 2);
        store.create_space(&schema).unwrap();
        load(&store, &case.stored);
        let before = snapshot(&store, &schema);
        let (write, region, model, differing) = write_and_model(&schema, &case);
        let written = store.stats().entries_written;
        store.commit(&[write]).unwrap();
        prop_assert_eq!(store.stats().entries_written - written, differing as u64);
        let after = snapshot(&store, &schema);
        let regions = all_regions(&schema, case.subspace).len();
        let at = if case.subspace == 0 { 0 } else { all_regions(&schema, 0).len() } + region.0 as usize;
        for (i, (was, is)) in before.iter().zip(&after).enumerate() {
            if i == at {
                prop_assert_eq!(is, &model.values().cloned().collect::<Vec<_>>());
            } else {
                prop_assert_eq!(was, is, "region {} of {} changed", i, regions);
            }
        }
    }

    /// A chunk reads the region as the batch left it: committed after other writes in one
    /// batch, it makes what it makes committed after them in batches of their own.
    #[test]
    fn a_chunk_sees_the_writes_before_it_in_its_batch(case in case(), earlier in objects()) {
        let schema = people(SPACE, 2);
        let (write, _, _, _) = write_and_model(&schema, &case);
        let first: Vec<ObjectWrite> = earlier
            .iter()
            .map(|(k, o)| {
                let old = case.stored.get(k).map(|s| stored_object(*k, s).object);
                put(SPACE, old, 10 + o.3, stored_object(*k, o).object)
            })
            .collect();
        let together: Vec<ObjectWrite> = first.iter().cloned().chain([write.clone()]).collect();
        let run = |batches: &[&[ObjectWrite]]| {
            let dir = tempfile::tempdir().unwrap();
            let store = open(dir.path());
            store.create_space(&schema).unwrap();
            load(&store, &case.stored);
            for batch in batches {
                store.commit(batch).unwrap();
            }
            snapshot(&store, &schema)
        };
        let apart = run(&[&first, std::slice::from_ref(&write)]);
        prop_assert_eq!(run(&[&together]), apart);
    }
}

/// A chunk that does not fit is refused whole, and nothing is written: a range outside its
/// region, or backwards; an entry outside the range; a kept key of another type.
#[test]
fn a_chunk_that_does_not_fit_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let schema = people(SPACE, 2);
    store.create_space(&schema).unwrap();
    let stored = BTreeMap::from([(1, (1, 1, 0, 1)), (2, (2, 2, 0, 1)), (3, (-1, 0, 0, 1))]);
    load(&store, &stored);
    let before = snapshot(&store, &schema);
    let o = |k| stored_object(k, &stored[&k]);
    let (region, k1) = place(&schema, 1, &o(1).object);
    let (_, k2) = place(&schema, 1, &o(2).object);
    let (low, high) = (k1.clone().min(k2.clone()), k1.max(k2));
    let other_region = (region.0 ^ 1).to_be_bytes().to_vec();
    let chunk = |after, through, entries, keep| ObjectWrite::ReplaceRange {
        space: SPACE.to_owned(),
        subspace: SubspaceId(1),
        region,
        after,
        through,
        entries,
        keep,
    };
    let bad = [
        chunk(Some(other_region.clone()), None, vec![], vec![]),
        chunk(None, Some(other_region), vec![], vec![]),
        chunk(Some(high.clone()), Some(low.clone()), vec![], vec![]),
        chunk(Some(high.clone()), Some(high.clone()), vec![], vec![]),
        chunk(Some(low.clone()), Some(high.clone()), vec![o(3)], vec![]),
        chunk(None, None, vec![], vec![(Value::Int(1), Version(1))]),
    ];
    for write in bad {
        let refused = store.commit(std::slice::from_ref(&write));
        assert!(
            matches!(refused, Err(StorageError::Invalid(_))),
            "{write:?}: {refused:?}"
        );
    }
    assert_eq!(snapshot(&store, &schema), before);
}

/// Objects `k0`.. of `count` at version 1 (a stride spreads `a` and `b` over their axes), but
/// where `changed` gives object `i` another version (0: absent; above 1: `a` moved too).
fn region_objects(count: u64, changed: impl Fn(u64) -> Option<u64>) -> Vec<StoredObject> {
    (0..count)
        .filter_map(|i| {
            let version = changed(i).unwrap_or(1);
            (version > 0).then(|| {
                let a = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) as i64 + version as i64;
                let b = i.wrapping_mul(0xC2B2_AE3D_27D4_EB4F) as i64;
                StoredObject {
                    version: Version(version),
                    object: person(&format!("k{i}"), a, b, &format!("s{}", i % 400)),
                }
            })
        })
        .collect()
}

fn fill(store: &Store, objects: &[StoredObject]) {
    for batch in objects.chunks(1000) {
        let writes: Vec<ObjectWrite> = batch
            .iter()
            .map(|o| put(SPACE, None, o.version.0, o.object.clone()))
            .collect();
        store.commit(&writes).unwrap();
    }
}

/// The source's region `region` of `subspace`, as a transfer streams it (256 KiB chunks).
fn chunks(
    store: &Store,
    subspace: SubspaceId,
    region: RegionIndex,
) -> Vec<(Option<Vec<u8>>, RegionChunk)> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let chunk = store
            .region_entries(SPACE, subspace, region, cursor.as_deref(), 256 * 1024)
            .unwrap();
        let next = chunk.next.clone();
        out.push((cursor, chunk));
        match next {
            Some(next) => cursor = Some(next),
            None => return out,
        }
    }
}

/// Entries written to bring the target's region `region` of `subspace` to the source's, by
/// a catch-up (each chunk a `ReplaceRange`) or a full transfer (the region cleared, then every
/// entry stored); the region ends as the source's either way.
fn transfer(
    source: &Store,
    target: &Store,
    subspace: SubspaceId,
    region: RegionIndex,
    catch_up: bool,
) -> u64 {
    let written = target.stats().entries_written;
    if !catch_up {
        target
            .commit(&[ObjectWrite::ClearRegion {
                space: SPACE.to_owned(),
                subspace,
                region,
            }])
            .unwrap();
    }
    for (after, chunk) in chunks(source, subspace, region) {
        let writes = if catch_up {
            vec![ObjectWrite::ReplaceRange {
                space: SPACE.to_owned(),
                subspace,
                region,
                after,
                through: chunk.next,
                entries: chunk.entries,
                keep: vec![],
            }]
        } else {
            chunk
                .entries
                .into_iter()
                .map(|e| ObjectWrite::Entry {
                    space: SPACE.to_owned(),
                    subspace,
                    remove: None,
                    insert: Some(e),
                })
                .collect()
        };
        target.commit(&writes).unwrap();
    }
    let read = |store: &Store| {
        store
            .region_entries(SPACE, subspace, region, None, usize::MAX)
            .unwrap()
    };
    assert_eq!(
        read(target),
        read(source),
        "the target holds the source's region"
    );
    target.stats().entries_written - written
}

/// The figure: 20,000 objects in one region, of which 1 % changed while the target was away
/// (70 updated, moving in subspace 1, 65 deleted, 65 created). A catch-up writes each change
/// (an updated object that moved costs its old entry's removal and its new entry), a full
/// transfer the whole region and the removal of what was there.
#[test]
fn a_catch_up_of_a_region_writes_only_what_changed() {
    const OBJECTS: u64 = 20_000;
    let schema = people(SPACE, 1);
    // Per object number: its version at the source; 0: absent.
    let at_source = |i: u64| match i % 100 {
        0 if i.is_multiple_of(300) => Some(0),
        0 if i % 300 == 100 => Some(2),
        _ => None,
    };
    let at_target = |i: u64| (i % 300 == 200).then_some(0);
    let dirs = [(); 3].map(|_| tempfile::tempdir().unwrap());
    let stores: Vec<Store> = dirs.iter().map(|d| open(d.path())).collect();
    for store in &stores {
        store.create_space(&schema).unwrap();
    }
    fill(&stores[0], &region_objects(OBJECTS, at_source));
    fill(&stores[1], &region_objects(OBJECTS, at_target));
    fill(&stores[2], &region_objects(OBJECTS, at_target));
    let changed = (0..OBJECTS)
        .filter(|&i| at_source(i).is_some() || at_target(i).is_some())
        .count();
    for subspace in [SubspaceId(0), SubspaceId(1)] {
        let region = RegionIndex(0);
        let catch_up = transfer(&stores[0], &stores[1], subspace, region, true);
        let full = transfer(&stores[0], &stores[2], subspace, region, false);
        eprintln!(
            "subspace {}: {OBJECTS} objects, {changed} changed: a catch-up wrote {catch_up} entries, a full transfer {full}",
            subspace.0
        );
        let moved = (0..OBJECTS).filter(|&i| at_source(i) == Some(2)).count() as u64;
        let expected = changed as u64 + if subspace.0 == 0 { 0 } else { moved };
        assert_eq!(catch_up, expected);
        assert!(full >= 2 * (OBJECTS - changed as u64));
    }
}
