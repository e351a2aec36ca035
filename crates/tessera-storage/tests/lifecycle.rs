//! The catalog and the data survive a restart; dropped spaces do not; errors are typed.

mod common;

use common::{all_regions, people, person, put};
use tessera_storage::{FsyncPolicy, ObjectWrite, StorageError, Store, StoreOptions};
use tessera_types::{SubspaceId, Value};

fn count(
    store: &Store,
    space: &str,
    subspace: u16,
    regions: &[tessera_geometry::RegionIndex],
    d: usize,
) -> usize {
    store
        .search(
            space,
            SubspaceId(subspace),
            regions,
            &vec![0; d],
            &vec![u64::MAX; d],
        )
        .unwrap()
        .map(Result::unwrap)
        .count()
}

#[test]
fn reopen_recovers_catalog_and_data_and_forgets_dropped_spaces() {
    for fsync in [
        FsyncPolicy::Always,
        FsyncPolicy::Periodic { interval_ms: 5 },
        FsyncPolicy::Never,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions {
            fsync,
            ..StoreOptions::default()
        };
        let (p, q) = (people("people", 8), people("other", 3));
        {
            let store = Store::open(dir.path(), options.clone()).unwrap();
            store.create_space(&p).unwrap();
            store.create_space(&q).unwrap();
            let writes: Vec<_> = (0..200)
                .map(|i| put("people", None, 7, person(&format!("k{i}"), i, -i, "s")))
                .collect();
            store.commit(&writes).unwrap();
            store
                .commit(&[put("other", None, 1, person("x", 1, 2, "y"))])
                .unwrap();
        }
        {
            let store = Store::open(dir.path(), options.clone()).unwrap();
            let mut names: Vec<String> = store.spaces().into_iter().map(|s| s.name).collect();
            names.sort();
            assert_eq!(names, ["other", "people"]);
            assert_eq!(
                store
                    .spaces()
                    .into_iter()
                    .find(|s| s.name == "people")
                    .unwrap(),
                p
            );
            for i in 0..200 {
                let got = store
                    .get("people", &Value::from(format!("k{i}").as_str()))
                    .unwrap()
                    .unwrap();
                assert_eq!(
                    (got.version.0, got.object),
                    (7, person(&format!("k{i}"), i, -i, "s"))
                );
            }
            for (subspace, d) in [(0, 1), (1, 2), (2, 1)] {
                assert_eq!(
                    count(
                        &store,
                        "people",
                        subspace,
                        &all_regions(&p, subspace as usize),
                        d
                    ),
                    200
                );
            }
            store.drop_space("people").unwrap();
            assert_eq!(
                store
                    .get("people", &Value::from("k1"))
                    .unwrap_err()
                    .to_string(),
                "unknown space \"people\""
            );
        }
        let store = Store::open(dir.path(), options).unwrap();
        assert_eq!(store.spaces(), vec![q.clone()]);
        assert!(store.get("other", &Value::from("x")).unwrap().is_some());
        // Re-creating the dropped space gives an empty one.
        store.create_space(&p).unwrap();
        assert_eq!(store.get("people", &Value::from("k1")).unwrap(), None);
        assert_eq!(count(&store, "people", 1, &all_regions(&p, 1), 2), 0);
    }
}

#[test]
fn errors_are_typed_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    store.commit(&[]).unwrap();
    let p = people("people", 4);
    store.create_space(&p).unwrap();
    assert!(matches!(store.create_space(&p), Err(StorageError::SpaceExists(n)) if n == "people"));
    assert!(
        matches!(store.get("nope", &Value::from("k")), Err(StorageError::UnknownSpace(n)) if n == "nope")
    );
    assert!(matches!(
        store.search("nope", SubspaceId(0), &[], &[0], &[1]),
        Err(StorageError::UnknownSpace(_))
    ));
    assert!(matches!(
        store.drop_space("nope"),
        Err(StorageError::UnknownSpace(_))
    ));
    // A batch naming an unknown space writes none of its writes.
    let ok = put("people", None, 1, person("a", 1, 1, "s"));
    assert!(matches!(
        store.commit(&[ok.clone(), put("nope", None, 1, person("b", 1, 1, "s"))]),
        Err(StorageError::UnknownSpace(_))
    ));
    assert_eq!(store.get("people", &Value::from("a")).unwrap(), None);
    // Malformed requests.
    assert!(matches!(
        store.get("people", &Value::Int(3)),
        Err(StorageError::Invalid(_))
    ));
    assert!(matches!(
        store.search("people", SubspaceId(9), &[], &[0], &[1]),
        Err(StorageError::Invalid(_))
    ));
    assert!(matches!(
        store.search("people", SubspaceId(1), &[], &[0], &[1]),
        Err(StorageError::Invalid(_))
    ));
    assert!(matches!(
        store.search(
            "people",
            SubspaceId(0),
            &[tessera_geometry::RegionIndex(99)],
            &[0],
            &[1]
        ),
        Err(StorageError::Invalid(_))
    ));
    let wrong_shape = tessera_types::Object {
        values: vec![Value::from("c")],
    };
    assert!(matches!(
        store.commit(&[put("people", None, 1, wrong_shape)]),
        Err(StorageError::Invalid(_))
    ));
    let moved_key = put(
        "people",
        Some(person("a", 1, 1, "s")),
        2,
        person("z", 1, 1, "s"),
    );
    assert!(matches!(
        store.commit(&[moved_key]),
        Err(StorageError::Invalid(_))
    ));
    assert!(matches!(
        store.commit(&[put("people", None, 0, person("a", 1, 1, "s"))]),
        Err(StorageError::Invalid(_))
    ));
    // An empty box, or no regions, finds nothing.
    store.commit(&[ok]).unwrap();
    assert_eq!(
        store
            .search(
                "people",
                SubspaceId(1),
                &all_regions(&p, 1),
                &[5, 5],
                &[4, 9]
            )
            .unwrap()
            .count(),
        0
    );
    assert_eq!(
        store
            .search("people", SubspaceId(1), &[], &[0, 0], &[u64::MAX; 2])
            .unwrap()
            .count(),
        0
    );
    store
        .commit(&[ObjectWrite::Delete {
            space: "people".into(),
            old: person("a", 1, 1, "s"),
        }])
        .unwrap();
    assert_eq!(store.get("people", &Value::from("a")).unwrap(), None);
    let stats = store.stats();
    assert_eq!((stats.commits, stats.object_writes), (2, 2));
}

#[test]
fn store_and_search_iter_are_shareable() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Store>();
    send::<tessera_storage::SearchIter>();
}

/// A chain hop writes one subspace only: the other subspaces of that server stay as they were,
/// and a relocation's two hops (remove from the old entry, insert at the new) compose.
#[test]
fn entry_writes_touch_one_subspace() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let schema = people("p", 4);
    store.create_space(&schema).unwrap();
    let entry = |subspace,
                 remove: Option<tessera_types::Object>,
                 insert: Option<(u64, tessera_types::Object)>| {
        ObjectWrite::Entry {
            space: "p".into(),
            subspace: SubspaceId(subspace),
            remove,
            insert: insert.map(|(v, object)| tessera_storage::StoredObject {
                version: tessera_types::Version(v),
                object,
            }),
        }
    };
    let (a, b) = (person("k", 1, 2, "x"), person("k", -5, 2, "y"));
    store
        .commit(&[entry(1, None, Some((1, a.clone())))])
        .unwrap();
    assert_eq!(
        store.get("p", &Value::from("k")).unwrap(),
        None,
        "the key subspace is untouched"
    );
    assert_eq!(count(&store, "p", 1, &all_regions(&schema, 1), 2), 1);
    assert_eq!(count(&store, "p", 2, &all_regions(&schema, 2), 1), 0);
    // The new region's hop inserts, then the old region's hop removes.
    store
        .commit(&[entry(1, None, Some((2, b.clone())))])
        .unwrap();
    assert_eq!(
        count(&store, "p", 1, &all_regions(&schema, 1), 2),
        2,
        "both committed for a moment"
    );
    store.commit(&[entry(1, Some(a), None)]).unwrap();
    let left: Vec<_> = store
        .search(
            "p",
            SubspaceId(1),
            &all_regions(&schema, 1),
            &[0, 0],
            &[u64::MAX, u64::MAX],
        )
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(left.len(), 1);
    assert_eq!((left[0].version.0, &left[0].object), (2, &b));
    let bad = store.commit(&[entry(9, None, Some((3, b)))]);
    assert!(matches!(bad, Err(StorageError::Invalid(_))), "{bad:?}");
}

/// A server that stops holding a region clears it: every entry of that region of that subspace
/// goes, nothing else does; and a key's entry is found by key within a region, whatever its point.
#[test]
fn clear_region_removes_one_region_and_region_entry_version_finds_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let schema = people("people", 8);
    store.create_space(&schema).unwrap();
    let writes: Vec<_> = (0..300)
        .map(|i| {
            put(
                "people",
                None,
                3,
                person(&format!("k{i}"), i * 1_000_000_000_000_000, -i, "s"),
            )
        })
        .collect();
    store.commit(&writes).unwrap();
    let regions = all_regions(&schema, 1);
    let d = schema.subspaces[1].dimensions.len();
    let per_region: Vec<usize> = regions
        .iter()
        .map(|r| count(&store, "people", 1, &[*r], d))
        .collect();
    assert_eq!(per_region.iter().sum::<usize>(), 300);
    let (cleared, _) = per_region
        .iter()
        .enumerate()
        .max_by_key(|(_, n)| **n)
        .unwrap();
    assert!(
        per_region[cleared] > 0,
        "the region to clear holds something"
    );

    // Found by key in its region, wherever its point; not in another region.
    let inside = store
        .search(
            "people",
            SubspaceId(1),
            &[regions[cleared]],
            &vec![0; d],
            &vec![u64::MAX; d],
        )
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let key = inside.object.key().clone();
    assert_eq!(
        store
            .region_entry_version("people", SubspaceId(1), regions[cleared], &key)
            .unwrap(),
        Some(inside.version)
    );
    let elsewhere = regions[(cleared + 1) % regions.len()];
    assert_eq!(
        store
            .region_entry_version("people", SubspaceId(1), elsewhere, &key)
            .unwrap(),
        None
    );

    store
        .commit(&[ObjectWrite::ClearRegion {
            space: "people".into(),
            subspace: SubspaceId(1),
            region: regions[cleared],
        }])
        .unwrap();
    for (i, r) in regions.iter().enumerate() {
        let expected = if i == cleared { 0 } else { per_region[i] };
        assert_eq!(count(&store, "people", 1, &[*r], d), expected, "region {i}");
    }
    assert_eq!(
        count(&store, "people", 0, &all_regions(&schema, 0), 1),
        300,
        "the key subspace is untouched"
    );
    assert_eq!(
        store
            .region_entry_version("people", SubspaceId(1), regions[cleared], &key)
            .unwrap(),
        None
    );
    // A region that does not exist is refused, and nothing changes.
    let bad = ObjectWrite::ClearRegion {
        space: "people".into(),
        subspace: SubspaceId(1),
        region: tessera_geometry::RegionIndex(9999),
    };
    assert!(matches!(
        store.commit(&[bad]),
        Err(StorageError::Invalid(_))
    ));
    assert_eq!(count(&store, "people", 0, &all_regions(&schema, 0), 1), 300);
}

/// `alter_space` adds an empty subspace (written from then on) and drops one (its entries
/// gone, writes and searches to it refused, nothing of it left after a restart), keeping the
/// rest; a change that is not an alteration is refused and changes nothing.
#[test]
fn alter_space_adds_and_drops_subspaces_durably() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions::default();
    let p = people("people", 4);
    let mut altered = p.clone();
    let dims = altered.subspace_dimensions(&["b".into()]).unwrap();
    altered.subspaces.push(tessera_types::Subspace {
        dimensions: dims,
        state: tessera_types::SubspaceState::Building,
        overlay: None,
        tags: None,
        cuts: None,
    });
    altered.subspaces[2].state = tessera_types::SubspaceState::Dropped;
    {
        let store = Store::open(dir.path(), options.clone()).unwrap();
        store.create_space(&p).unwrap();
        let writes: Vec<_> = (0..50)
            .map(|i| put("people", None, 3, person(&format!("k{i}"), i, -i, "s")))
            .collect();
        store.commit(&writes).unwrap();
        // Not an alteration: a subspace's dimensions change.
        let mut wrong = p.clone();
        wrong.subspaces[1].dimensions.reverse();
        assert!(matches!(
            store.alter_space(&wrong),
            Err(StorageError::Invalid(_))
        ));
        assert!(matches!(
            store.alter_space(&people("nobody", 4)),
            Err(StorageError::UnknownSpace(_))
        ));
        assert_eq!(store.spaces(), vec![p.clone()]);

        store.alter_space(&altered).unwrap();
        assert_eq!(count(&store, "people", 3, &all_regions(&altered, 3), 1), 0);
        assert_eq!(count(&store, "people", 1, &all_regions(&p, 1), 2), 50);
        assert!(store
            .search(
                "people",
                SubspaceId(2),
                &all_regions(&p, 2),
                &[0],
                &[u64::MAX]
            )
            .is_err());
        // New writes reach the new subspace and skip the dropped one.
        store
            .commit(&[put("people", None, 4, person("new", 1, 2, "t"))])
            .unwrap();
        assert_eq!(count(&store, "people", 3, &all_regions(&altered, 3), 1), 1);
    }
    let store = Store::open(dir.path(), options).unwrap();
    assert_eq!(store.spaces(), vec![altered.clone()]);
    assert_eq!(count(&store, "people", 3, &all_regions(&altered, 3), 1), 1);
    assert_eq!(count(&store, "people", 1, &all_regions(&p, 1), 2), 51);
    assert!(store
        .search(
            "people",
            SubspaceId(2),
            &all_regions(&p, 2),
            &[0],
            &[u64::MAX]
        )
        .is_err());
}

/// Splitting an ordered space's key region moves exactly the keys from the split key up to
/// the new region, durably and in one batch with the schema: every key is found by `get`
/// afterwards, each region holds its range, and a restart keeps it so. Splits other than the
/// ones made are refused and change nothing; the last ones taken back move the keys back.
#[test]
fn splitting_a_key_region_moves_the_keys_above_the_split() {
    use tessera_geometry::RegionIndex;
    use tessera_types::{KeySplit, Placement};
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions::default();
    let ordered = people("people", 2)
        .with_placement(Placement::Ordered { domain: None })
        .unwrap();
    let keys: Vec<String> = (0..50).map(|i| format!("tweet:00{i:04}")).collect();
    let mut split = ordered.clone();
    split.key_splits.push(KeySplit {
        region: 0,
        at: Value::from("tweet:000025"),
        epoch: 2,
    });
    let region_keys = |store: &Store, r: u32| -> Vec<String> {
        let chunk = store
            .region_entries("people", SubspaceId::KEY, RegionIndex(r), None, usize::MAX)
            .unwrap();
        let mut keys: Vec<String> = chunk
            .entries
            .iter()
            .map(|e| e.object.key().to_string().trim_matches('"').to_owned())
            .collect();
        keys.sort();
        keys
    };
    {
        let store = Store::open(dir.path(), options.clone()).unwrap();
        store.create_space(&ordered).unwrap();
        put_people(&store, &keys);
        // Every key starts below the middle of the axis (`t` < 0x80): all in region 0. They
        // share their first 8 bytes, one coordinate, and split apart all the same.
        assert_eq!(region_keys(&store, 0), keys);
        // Its load, and where it would split: the middle key.
        assert_eq!(
            store.key_region_load("people", RegionIndex(0)).unwrap(),
            (50, Some(Value::from("tweet:000025")))
        );
        assert_eq!(
            store.key_region_load("people", RegionIndex(1)).unwrap(),
            (0, None)
        );
        assert!(store.key_region_load("people", RegionIndex(2)).is_err());
        store.alter_space(&split).unwrap();
        assert_eq!(
            store.key_region_load("people", RegionIndex(2)).unwrap(),
            (25, Some(Value::from("tweet:000037")))
        );
        assert_eq!(region_keys(&store, 0), keys[..25]);
        assert_eq!(region_keys(&store, 2), keys[25..]);
        assert!(region_keys(&store, 1).is_empty());
        for (i, k) in keys.iter().enumerate() {
            let got = store.get("people", &Value::from(k.as_str())).unwrap();
            assert_eq!(
                got.map(|s| s.object.values[1].clone()),
                Some(Value::Int(i as i64))
            );
        }
        // Other splits than those made are not an alteration.
        let mut other = ordered.clone();
        other.key_splits.push(KeySplit {
            region: 0,
            at: Value::from("tweet:000010"),
            epoch: 2,
        });
        assert!(matches!(
            store.alter_space(&other),
            Err(StorageError::Invalid(_))
        ));
        assert_eq!(store.spaces(), vec![split.clone()]);
        // Taking the last split back (a restart returning to the configuration persisted
        // before it) moves the keys back, and splitting again moves them again.
        store.alter_space(&ordered).unwrap();
        assert_eq!(region_keys(&store, 0), keys);
        assert!(store
            .region_entries("people", SubspaceId::KEY, RegionIndex(2), None, usize::MAX)
            .is_err());
        store.alter_space(&split).unwrap();
        assert_eq!(region_keys(&store, 2), keys[25..]);
    }
    let store = Store::open(dir.path(), options).unwrap();
    assert_eq!(store.spaces(), vec![split]);
    assert_eq!(region_keys(&store, 2), keys[25..]);
    assert_eq!(
        store
            .get("people", &Value::from("tweet:000049"))
            .unwrap()
            .map(|s| s.version.0),
        Some(3)
    );
}

/// Splits between keys of one coordinate (they share their first 8 bytes) whose region keeps
/// its bounds in coordinates: the third split below narrows a region that already starts and
/// ends inside one coordinate, and its keys above the split move all the same.
#[test]
fn splits_inside_one_coordinate_move_their_keys() {
    use tessera_geometry::RegionIndex;
    use tessera_types::{KeySplit, Placement};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let mut schema = people("people", 2)
        .with_placement(Placement::Ordered { domain: None })
        .unwrap();
    store.create_space(&schema).unwrap();
    let keys: Vec<String> = (0..50).map(|i| format!("tweet:00{i:04}")).collect();
    put_people(&store, &keys);
    let region_keys = |r: u32| -> usize {
        store
            .region_entries("people", SubspaceId::KEY, RegionIndex(r), None, usize::MAX)
            .unwrap()
            .entries
            .len()
    };
    // (region split, at key number) and then the keys each region holds: region 2 holds
    // 25..50, then 25..37, then 25..31.
    let steps = [
        ((0, 25), [25, 0, 25]),
        ((2, 37), [25, 0, 12]),
        ((2, 31), [25, 0, 6]),
    ];
    for (epoch, ((region, at), held)) in steps.into_iter().enumerate() {
        schema.key_splits.push(KeySplit {
            region,
            at: Value::from(keys[at].as_str()),
            epoch: epoch as u64 + 2,
        });
        store.alter_space(&schema).unwrap();
        assert_eq!([region_keys(0), region_keys(1), region_keys(2)], held);
    }
    assert_eq!((region_keys(3), region_keys(4)), (13, 6));
    for (i, k) in keys.iter().enumerate() {
        let got = store.get("people", &Value::from(k.as_str())).unwrap();
        assert_eq!(
            got.map(|s| s.object.values[1].clone()),
            Some(Value::Int(i as i64))
        );
    }
}

/// Puts person `keys[i]` with `a = i` into space "people", at version 3, in one commit.
fn put_people(store: &Store, keys: &[String]) {
    let writes: Vec<_> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| put("people", None, 3, person(k, i as i64, 0, "s")))
        .collect();
    store.commit(&writes).unwrap();
}
