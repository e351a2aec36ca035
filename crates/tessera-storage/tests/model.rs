//! The store against a `BTreeMap` model: random commits of puts and deletes, with objects moving
//! between regions and Z-positions, then `get` and box searches compared with the model.

mod common;

use std::collections::BTreeMap;

use common::{all_regions, people, person, put};
use proptest::prelude::*;
use tessera_geometry::{coordinate, point, RegionIndex, Tessellation};
use tessera_storage::{FsyncPolicy, ObjectWrite, Store, StoreOptions, StoredObject};
use tessera_types::{SpaceSchema, SubspaceId, Value};

#[derive(Clone, Debug)]
enum Op {
    Put { key: u8, a: i64, b: i64, s: u8 },
    Delete { key: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..16, -6i64..6, -6i64..6, 0u8..3).prop_map(|(key, a, b, s)| Op::Put { key, a, b, s }),
        1 => (0u8..16).prop_map(|key| Op::Delete { key }),
    ]
}

fn open(dir: &std::path::Path) -> Store {
    Store::open(
        dir,
        StoreOptions {
            fsync: FsyncPolicy::Never,
            cache_bytes: 4 << 20,
        },
    )
    .unwrap()
}

fn sorted(mut objects: Vec<StoredObject>) -> Vec<StoredObject> {
    objects.sort_by(|x, y| x.object.key().cmp(y.object.key()));
    objects
}

fn search_all(
    store: &Store,
    schema: &SpaceSchema,
    subspace: usize,
    regions: &[RegionIndex],
    lo: &[u64],
    hi: &[u64],
) -> Vec<StoredObject> {
    store
        .search(&schema.name, SubspaceId(subspace as u16), regions, lo, hi)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Applies `commits` to the store and the model; returns the model.
fn run(store: &Store, schema: &SpaceSchema, commits: &[Vec<Op>]) -> BTreeMap<Value, StoredObject> {
    run_checking(store, schema, commits, |_| Ok(())).unwrap()
}

/// [`run`], calling `check` after each commit.
fn run_checking(
    store: &Store,
    schema: &SpaceSchema,
    commits: &[Vec<Op>],
    mut check: impl FnMut(&Store) -> Result<(), TestCaseError>,
) -> Result<BTreeMap<Value, StoredObject>, TestCaseError> {
    let mut model: BTreeMap<Value, StoredObject> = BTreeMap::new();
    for ops in commits {
        let mut writes = Vec::new();
        for op in ops {
            match *op {
                Op::Put { key, a, b, s } => {
                    let key = format!("k{key}");
                    let old = model.get(&Value::from(key.as_str())).cloned();
                    let version = old.as_ref().map_or(1, |o| o.version.0 + 1);
                    let new = person(&key, a, b, &format!("s{s}"));
                    writes.push(put(
                        &schema.name,
                        old.map(|o| o.object),
                        version,
                        new.clone(),
                    ));
                    model.insert(
                        Value::from(key.as_str()),
                        StoredObject {
                            version: tessera_types::Version(version),
                            object: new,
                        },
                    );
                }
                Op::Delete { key } => {
                    if let Some(old) = model.remove(&Value::from(format!("k{key}").as_str())) {
                        writes.push(ObjectWrite::Delete {
                            space: schema.name.clone(),
                            old: old.object,
                        });
                    }
                }
            }
        }
        store.commit(&writes).unwrap();
        check(store)?;
    }
    Ok(model)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A key's version in a region, as `region_entry_version` keeps it across commits (objects
    /// moving within and between regions, deletes), equals what a scan of the region finds.
    #[test]
    fn region_entry_versions_follow_commits(commits in proptest::collection::vec(proptest::collection::vec(op(), 1..5), 1..25),
                                            partitions in prop_oneof![Just(1u32), Just(4), Just(9)]) {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let schema = people("people", partitions);
        store.create_space(&schema).unwrap();
        run_checking(&store, &schema, &commits, |store| {
            for subspace in 0..schema.subspaces.len() {
                let d = schema.subspaces[subspace].dimensions.len();
                for region in all_regions(&schema, subspace) {
                    let scanned = search_all(store, &schema, subspace, &[region], &vec![0; d], &vec![u64::MAX; d]);
                    for k in 0..16 {
                        let key = Value::from(format!("k{k}").as_str());
                        let found = scanned.iter().find(|o| *o.object.key() == key).map(|o| o.version);
                        let kept = store.region_entry_version("people", SubspaceId(subspace as u16), region, &key).unwrap();
                        prop_assert_eq!(kept, found, "subspace {} region {} key {}", subspace, region.0, k);
                    }
                }
            }
            Ok(())
        })?;
    }

    #[test]
    fn engine_matches_model(commits in proptest::collection::vec(proptest::collection::vec(op(), 1..5), 1..25),
                            partitions in prop_oneof![Just(1u32), Just(4), Just(9)]) {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let schema = people("people", partitions);
        store.create_space(&schema).unwrap();
        let model = run(&store, &schema, &commits);
        for k in 0..16 {
            let key = Value::from(format!("k{k}").as_str());
            prop_assert_eq!(store.get("people", &key).unwrap(), model.get(&key).cloned());
        }
        // A full-box search of every subspace returns each object exactly once.
        let expected: Vec<StoredObject> = model.values().cloned().collect();
        for subspace in 0..schema.subspaces.len() {
            let d = schema.subspaces[subspace].dimensions.len();
            let got = search_all(&store, &schema, subspace, &all_regions(&schema, subspace), &vec![0; d], &vec![u64::MAX; d]);
            prop_assert_eq!(sorted(got), expected.clone(), "subspace {}", subspace);
        }
    }

    #[test]
    fn box_search_matches_brute_force(commits in proptest::collection::vec(proptest::collection::vec(op(), 1..5), 1..25),
                                      a in (-7i64..7, -7i64..7), b in (-7i64..7, -7i64..7),
                                      region_mask in any::<u16>(), partitions in prop_oneof![Just(1u32), Just(4), Just(16)]) {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let schema = people("people", partitions);
        store.create_space(&schema).unwrap();
        let model = run(&store, &schema, &commits);
        let (a_lo, a_hi, b_lo, b_hi) = (a.0.min(a.1), a.0.max(a.1), b.0.min(b.1), b.0.max(b.1));
        let c = |i: i64| coordinate(&Value::Int(i));
        let (lo, hi) = (vec![c(a_lo), c(b_lo)], vec![c(a_hi), c(b_hi)]);
        let tessellation = Tessellation::new(2, partitions);
        let regions: Vec<RegionIndex> = all_regions(&schema, 1).into_iter().filter(|r| region_mask & (1 << (r.0 % 16)) != 0).collect();
        let got = search_all(&store, &schema, 1, &regions, &lo, &hi);
        let expected: Vec<StoredObject> = model.values().filter(|o| {
            let (Value::Int(x), Value::Int(y)) = (&o.object.values[1], &o.object.values[2]) else { unreachable!() };
            (a_lo..=a_hi).contains(x) && (b_lo..=b_hi).contains(y)
                && regions.contains(&tessellation.region_of(&point(&schema, SubspaceId(1), &o.object).expect("typed")))
        }).cloned().collect();
        prop_assert_eq!(sorted(got), expected);
    }

    /// Several boxes at once (a dynamic space's search reads one per shape), overlapping or
    /// not, over chosen regions: every object in some box comes, and at most once per box
    /// holding it.
    #[test]
    fn several_boxes_find_what_each_would(commits in proptest::collection::vec(proptest::collection::vec(op(), 1..5), 1..25),
                                          boxes in proptest::collection::vec(((-7i64..7, -7i64..7), (-7i64..7, -7i64..7)), 1..4),
                                          region_mask in any::<u16>(), partitions in prop_oneof![Just(1u32), Just(4), Just(16)]) {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let schema = people("people", partitions);
        store.create_space(&schema).unwrap();
        let model = run(&store, &schema, &commits);
        let c = |i: i64| coordinate(&Value::Int(i));
        let ranges: Vec<[(i64, i64); 2]> = boxes.iter().map(|(a, b)| [(a.0.min(a.1), a.0.max(a.1)), (b.0.min(b.1), b.0.max(b.1))]).collect();
        let search_boxes: Vec<tessera_geometry::SearchBox> = ranges.iter().map(|r| tessera_geometry::SearchBox {
            ranges: r.iter().map(|&(lo, hi)| (c(lo), c(hi))).collect(),
        }).collect();
        let tessellation = Tessellation::new(2, partitions);
        let regions: Vec<RegionIndex> = all_regions(&schema, 1).into_iter().filter(|r| region_mask & (1 << (r.0 % 16)) != 0).collect();
        let mut got: BTreeMap<Value, usize> = BTreeMap::new();
        for o in store.search_boxes(&schema.name, SubspaceId(1), &regions, &search_boxes).unwrap() {
            *got.entry(o.unwrap().object.key().clone()).or_default() += 1;
        }
        for o in model.values() {
            let (Value::Int(x), Value::Int(y)) = (&o.object.values[1], &o.object.values[2]) else { unreachable!() };
            let holding = ranges.iter().filter(|r| (r[0].0..=r[0].1).contains(x) && (r[1].0..=r[1].1).contains(y)).count();
            let in_regions = regions.contains(&tessellation.region_of(&point(&schema, SubspaceId(1), &o.object).expect("typed")));
            let n = got.remove(o.object.key()).unwrap_or(0);
            if in_regions && holding > 0 {
                prop_assert!((1..=holding).contains(&n), "{:?} came {} times, in {} boxes", o.object.key(), n, holding);
            } else {
                prop_assert_eq!(n, 0, "{:?} is in no box read", o.object.key());
            }
        }
        prop_assert!(got.is_empty(), "found objects the model does not have: {:?}", got);
    }
}

#[test]
fn one_commit_may_write_a_key_several_times() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let schema = people("people", 4);
    store.create_space(&schema).unwrap();
    let (v1, v2, v3) = (
        person("k", 1, 1, "x"),
        person("k", -5, 3, "y"),
        person("k", 1, 1, "x"),
    );
    store
        .commit(&[
            put("people", None, 1, v1.clone()),
            put("people", Some(v1), 2, v2.clone()),
            put("people", Some(v2.clone()), 3, v3.clone()),
        ])
        .unwrap();
    let got = store.get("people", &Value::from("k")).unwrap().unwrap();
    assert_eq!((got.version.0, &got.object), (3, &v3));
    for subspace in 1..3 {
        let d = schema.subspaces[subspace].dimensions.len();
        let found = search_all(
            &store,
            &schema,
            subspace,
            &all_regions(&schema, subspace),
            &vec![0; d],
            &vec![u64::MAX; d],
        );
        assert_eq!(found.len(), 1, "subspace {subspace} holds k once");
        assert_eq!(found[0].object, v3);
    }
    store
        .commit(&[
            put("people", Some(v3.clone()), 4, v2.clone()),
            ObjectWrite::Delete {
                space: "people".into(),
                old: v2,
            },
        ])
        .unwrap();
    assert_eq!(store.get("people", &Value::from("k")).unwrap(), None);
    assert_eq!(
        search_all(
            &store,
            &schema,
            1,
            &all_regions(&schema, 1),
            &[0, 0],
            &[u64::MAX, u64::MAX]
        ),
        vec![]
    );
}
