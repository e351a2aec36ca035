//! `Store::region_entries`, the source side of a state transfer: a region read chunk by chunk
//! yields exactly the region's objects, each once, in storage-key order, whatever the chunk
//! size, and resumes correctly while writes go on between chunks.

mod common;

use common::{all_regions, open, people, person, put, tessellation};
use tessera_geometry::{interleave, key_region, point, RegionIndex};
use tessera_storage::{ObjectWrite, RegionChunk, StorageError, Store, StoredObject};
use tessera_types::{Object, SpaceSchema, SubspaceId, Value, Version};

fn key_of(object: &Object) -> &str {
    match object.key() {
        Value::String(s) => s.as_str().expect("text keys"),
        other => panic!("people keys are strings, not {other:?}"),
    }
}

/// The bytes an entry's value takes, from the documented value layout
/// `version (u64 BE) | postcard(Object)`.
fn value_bytes(stored: &StoredObject) -> usize {
    8 + postcard::to_allocvec(&stored.object).unwrap().len()
}

/// The objects of `region` of `subspace` among `objects`, in the documented storage-key order:
/// by key bytes in the key subspace, by (Z-value of the point, key bytes) in the others.
fn expected_region(
    schema: &SpaceSchema,
    subspace: usize,
    region: RegionIndex,
    objects: &[StoredObject],
) -> Vec<StoredObject> {
    let id = SubspaceId(subspace as u16);
    let t = tessellation(schema, subspace);
    let mut found: Vec<(Vec<u8>, StoredObject)> = objects
        .iter()
        .filter(|o| t.region_of(&point(schema, id, &o.object).expect("typed")) == region)
        .map(|o| {
            let mut order = if subspace == 0 {
                vec![]
            } else {
                interleave(&point(schema, id, &o.object).expect("typed"))
            };
            order.extend_from_slice(key_of(&o.object).as_bytes());
            (order, o.clone())
        })
        .collect();
    found.sort_by(|x, y| x.0.cmp(&y.0));
    found.into_iter().map(|(_, o)| o).collect()
}

/// Reads a whole region chunk by chunk, checking what every chunk promises: `next` is `None`
/// only on the last chunk; a chunk is empty only when the region is; a chunk stops at the
/// first entry that brings its values to `max_bytes`, and only stops early at the region's end.
fn read_region(
    store: &Store,
    space: &str,
    subspace: usize,
    region: RegionIndex,
    max_bytes: usize,
) -> Vec<StoredObject> {
    let mut all = Vec::new();
    let mut cursor: Option<Vec<u8>> = None;
    for calls in 0.. {
        let RegionChunk { entries, next } = store
            .region_entries(
                space,
                SubspaceId(subspace as u16),
                region,
                cursor.as_deref(),
                max_bytes,
            )
            .unwrap();
        let sizes: Vec<usize> = entries.iter().map(value_bytes).collect();
        let total: usize = sizes.iter().sum();
        let before_last = total - sizes.last().copied().unwrap_or(0);
        assert!(
            !entries.is_empty() || (calls == 0 && next.is_none()),
            "only an empty region gives an empty chunk"
        );
        assert!(
            entries.len() <= 1 || before_last < max_bytes,
            "the chunk went on past its budget ({before_last} of {max_bytes} bytes before its last entry)"
        );
        all.extend(entries);
        match next {
            Some(next) => {
                assert!(
                    total >= max_bytes,
                    "a chunk ends early only at the region's end"
                );
                assert!(
                    cursor.as_ref().is_none_or(|c| next > *c),
                    "the cursor moves forward"
                );
                cursor = Some(next);
            }
            None => break,
        }
    }
    all
}

/// 3,000 objects spread over every region of every subspace of the people space.
fn populate(store: &Store, schema: &SpaceSchema) -> Vec<StoredObject> {
    let objects: Vec<StoredObject> = (0..3000u64)
        .map(|i| {
            // Multiplicative hashing spreads a and b over the whole int axis.
            let a = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) as i64;
            let b = i.wrapping_mul(0xC2B2_AE3D_27D4_EB4F) as i64;
            StoredObject {
                version: Version(i + 1),
                object: person(&format!("k{i}"), a, b, &format!("s{}", i % 400)),
            }
        })
        .collect();
    for batch in objects.chunks(500) {
        let writes: Vec<ObjectWrite> = batch
            .iter()
            .map(|o| put(&schema.name, None, o.version.0, o.object.clone()))
            .collect();
        store.commit(&writes).unwrap();
    }
    objects
}

#[test]
fn chunks_of_any_size_yield_each_object_of_the_region_once_in_storage_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let schema = people("people", 8);
    store.create_space(&schema).unwrap();
    let objects = populate(&store, &schema);
    // Another space with the same layout must not leak into this one's regions.
    store.create_space(&people("other", 8)).unwrap();
    store
        .commit(&[put("other", None, 1, person("k1", 1, 2, "s1"))])
        .unwrap();

    for subspace in 0..schema.subspaces.len() {
        let mut seen = 0;
        for region in all_regions(&schema, subspace) {
            let expected = expected_region(&schema, subspace, region, &objects);
            assert!(
                expected.len() > 100,
                "subspace {subspace} region {}: a spread that tests something ({} objects)",
                region.0,
                expected.len()
            );
            seen += expected.len();
            // 0 and 1: less than one object; 200: a few objects; the rest: one chunk.
            for max_bytes in [0, 1, 200, 4096, usize::MAX] {
                let got = read_region(&store, "people", subspace, region, max_bytes);
                assert_eq!(
                    got, expected,
                    "subspace {subspace} region {} max_bytes {max_bytes}",
                    region.0
                );
            }
        }
        assert_eq!(seen, objects.len(), "the regions partition the objects");
    }
}

#[test]
fn a_budget_smaller_than_one_object_returns_one_entry_per_call() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let schema = people("people", 4);
    store.create_space(&schema).unwrap();
    let writes: Vec<ObjectWrite> = (0..50)
        .map(|i| put("people", None, 1, person(&format!("k{i}"), i, i, "s")))
        .collect();
    store.commit(&writes).unwrap();
    let region = key_region(&tessellation(&schema, 0), &Value::from("k0"));
    let mut cursor: Option<Vec<u8>> = None;
    let mut keys = Vec::new();
    loop {
        let chunk = store
            .region_entries("people", SubspaceId::KEY, region, cursor.as_deref(), 1)
            .unwrap();
        assert_eq!(chunk.entries.len(), 1);
        keys.push(key_of(&chunk.entries[0].object).to_owned());
        match chunk.next {
            Some(next) => {
                assert!(cursor.is_none_or(|c| next > c), "the cursor moves forward");
                cursor = Some(next);
            }
            None => break,
        }
    }
    let mut expected: Vec<String> = (0..50)
        .map(|i| format!("k{i}"))
        .filter(|k| key_region(&tessellation(&schema, 0), &Value::from(k.as_str())) == region)
        .collect();
    expected.sort();
    assert_eq!(keys, expected);
}

#[test]
fn an_empty_region_is_one_empty_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let schema = people("people", 4);
    store.create_space(&schema).unwrap();
    for subspace in 0..schema.subspaces.len() {
        for region in all_regions(&schema, subspace) {
            let chunk = store
                .region_entries("people", SubspaceId(subspace as u16), region, None, 0)
                .unwrap();
            assert_eq!(
                chunk,
                RegionChunk {
                    entries: vec![],
                    next: None
                }
            );
        }
    }
    // One object: its region holds it, every other region of the subspace is empty.
    let object = person("only", 3, -3, "x");
    store
        .commit(&[put("people", None, 5, object.clone())])
        .unwrap();
    let t = tessellation(&schema, 1);
    let home = t.region_of(&point(&schema, SubspaceId(1), &object).expect("typed"));
    for region in all_regions(&schema, 1) {
        let chunk = store
            .region_entries("people", SubspaceId(1), region, None, usize::MAX)
            .unwrap();
        let expected = if region == home {
            vec![StoredObject {
                version: Version(5),
                object: object.clone(),
            }]
        } else {
            vec![]
        };
        assert_eq!(
            chunk,
            RegionChunk {
                entries: expected,
                next: None
            }
        );
    }
}

/// Keys `{prefix}{i}` that land in `region` of the key subspace.
fn keys_in(schema: &SpaceSchema, region: RegionIndex, prefix: &str, n: usize) -> Vec<String> {
    let t = tessellation(schema, 0);
    (0..)
        .map(|i| format!("{prefix}{i:04}"))
        .filter(|k| key_region(&t, &Value::from(k.as_str())) == region)
        .take(n)
        .collect()
}

/// A transfer reads a region while the chain goes on writing it: a write behind the cursor is
/// not read (the chain forwards it), one ahead is read as it stands when its chunk is read.
#[test]
fn writes_between_chunks_are_read_only_ahead_of_the_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let schema = people("people", 4);
    store.create_space(&schema).unwrap();
    let region = RegionIndex(2);
    // In the key subspace, a region's entries are in key order: "a…" < "m…" < "z…".
    let initial = keys_in(&schema, region, "m", 40);
    let writes: Vec<ObjectWrite> = initial
        .iter()
        .map(|k| put("people", None, 1, person(k, 0, 0, "s")))
        .collect();
    store.commit(&writes).unwrap();
    // Elsewhere in the space, so not part of the region.
    store
        .commit(&[put(
            "people",
            None,
            1,
            person(&keys_in(&schema, RegionIndex(1), "m", 1)[0], 0, 0, "s"),
        )])
        .unwrap();

    let first = store
        .region_entries("people", SubspaceId::KEY, region, None, 1)
        .unwrap();
    assert_eq!(first.entries.len(), 1);
    assert_eq!(key_of(&first.entries[0].object), initial[0]);
    let cursor = first.next.clone().expect("more to read");

    let behind = keys_in(&schema, region, "a", 1).remove(0);
    let ahead = keys_in(&schema, region, "z", 1).remove(0);
    let (updated, deleted) = (&initial[10], &initial[20]);
    store
        .commit(&[
            put("people", None, 1, person(&behind, 0, 0, "s")),
            put("people", None, 1, person(&ahead, 0, 0, "s")),
            put(
                "people",
                Some(person(updated, 0, 0, "s")),
                2,
                person(updated, 7, 7, "t"),
            ),
            ObjectWrite::Delete {
                space: "people".into(),
                old: person(deleted, 0, 0, "s"),
            },
        ])
        .unwrap();

    let mut got: Vec<StoredObject> = first.entries;
    let mut cursor = Some(cursor);
    while let Some(after) = cursor {
        let chunk = store
            .region_entries("people", SubspaceId::KEY, region, Some(&after), 300)
            .unwrap();
        got.extend(chunk.entries);
        assert!(
            chunk.next.as_ref().is_none_or(|n| *n > after),
            "the cursor moves forward"
        );
        cursor = chunk.next;
    }
    let mut expected: Vec<StoredObject> = initial
        .iter()
        .filter(|k| *k != deleted)
        .map(|k| StoredObject {
            version: Version(1),
            object: person(k, 0, 0, "s"),
        })
        .collect();
    expected[10] = StoredObject {
        version: Version(2),
        object: person(updated, 7, 7, "t"),
    };
    expected.push(StoredObject {
        version: Version(1),
        object: person(&ahead, 0, 0, "s"),
    });
    assert_eq!(got, expected);
}

#[test]
fn bad_requests_are_refused_with_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let schema = people("people", 4);
    store.create_space(&schema).unwrap();
    let writes: Vec<ObjectWrite> = (0..40)
        .map(|i| put("people", None, 1, person(&format!("k{i}"), i, i, "s")))
        .collect();
    store.commit(&writes).unwrap();
    let read = |subspace: u16, region: u32, after: Option<&[u8]>| {
        store.region_entries(
            "people",
            SubspaceId(subspace),
            RegionIndex(region),
            after,
            1,
        )
    };
    // A cursor from region `home` of the key subspace.
    let key_regions = all_regions(&schema, 0).len() as u32;
    let (home, cursor) = (0..key_regions)
        .find_map(|r| read(0, r, None).unwrap().next.map(|c| (r, c)))
        .expect("some region holds two objects");
    let other = (home + 1) % key_regions;
    assert!(matches!(
        read(0, other, Some(&cursor)),
        Err(StorageError::Invalid(_))
    ));
    assert!(matches!(
        read(0, home, Some(&[])),
        Err(StorageError::Invalid(_))
    ));
    assert!(matches!(
        read(0, home, Some(&cursor[..2])),
        Err(StorageError::Invalid(_))
    ));
    assert!(read(0, home, Some(&cursor)).is_ok());
    let regions = all_regions(&schema, 1).len() as u32;
    assert!(matches!(
        read(1, regions, None),
        Err(StorageError::Invalid(_))
    ));
    assert!(matches!(read(9, 0, None), Err(StorageError::Invalid(_))));
    assert!(matches!(
        store.region_entries("nope", SubspaceId::KEY, RegionIndex(0), None, 1),
        Err(StorageError::UnknownSpace(n)) if n == "nope"
    ));
}

/// A dynamic space's pointer overlay stores the stub (key, formula, the overlay's properties)
/// at the entry where the document lies; a copy overlay the whole document; a delete removes
/// both; and the stub travels through `region_entries` as stored.
#[test]
fn a_pointer_overlay_stores_stubs_where_copies_would_lie() {
    use tessera_types::{
        parse_space, DocValue, Document, Formula, FormulaSpec, Subspace, FORMULA_INDEX,
    };
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let mut schema =
        parse_space("space papers dynamic key id dimensions 4 create 8 partitions").unwrap();
    let spec = FormulaSpec::parse(Some("f"), &["&year,venue.name", "title"]).unwrap();
    let (pointer, copy) = (
        SubspaceId(schema.subspaces.len() as u16),
        SubspaceId(schema.subspaces.len() as u16 + 1),
    );
    for o in &spec.overlays {
        schema.subspaces.push(Subspace::overlay(o.clone()));
    }
    schema.formulas.push(Formula {
        id: "f".into(),
        overlays: vec![pointer, copy],
    });
    store.create_space(&schema).unwrap();
    let property = |name: &str, v: DocValue| (name.to_owned(), v);
    let venue = DocValue::Object(
        [
            property("name", DocValue::String("SOSP".into())),
            property("city", DocValue::String("Stevenson".into())),
        ]
        .into_iter()
        .collect(),
    );
    let document = Document::new(
        [
            property("title", DocValue::String("Dynamo".into())),
            property("year", DocValue::Int(2007)),
            property("venue", venue),
            property("pages", DocValue::Int(16)),
        ]
        .into_iter()
        .collect(),
    );
    let object = Object {
        values: vec![
            Value::from("p1"),
            Value::Document(document.clone()),
            Value::from("f"),
        ],
    };
    let stored = StoredObject {
        version: Version(1),
        object: object.clone(),
    };
    store
        .commit(&[ObjectWrite::Put {
            space: "papers".into(),
            old: None,
            new: stored,
        }])
        .unwrap();
    let tessellations = tessera_geometry::tessellations(&schema);
    let entries_of = |subspace: SubspaceId| -> Vec<StoredObject> {
        let t = &tessellations[subspace.get()];
        (0..t.regions_count())
            .flat_map(|r| {
                store
                    .region_entries("papers", subspace, RegionIndex(r), None, usize::MAX)
                    .unwrap()
                    .entries
            })
            .collect()
    };
    // The stub, written out by hand: year and venue.name, not venue.city, title or pages.
    let stub = Document::new(
        [
            property("year", DocValue::Int(2007)),
            property(
                "venue",
                DocValue::Object(
                    [property("name", DocValue::String("SOSP".into()))]
                        .into_iter()
                        .collect(),
                ),
            ),
        ]
        .into_iter()
        .collect(),
    );
    let in_pointer = entries_of(pointer);
    assert_eq!(in_pointer.len(), 1);
    assert_eq!(in_pointer[0].version, Version(1));
    assert_eq!(in_pointer[0].object.key(), &Value::from("p1"));
    assert_eq!(in_pointer[0].object.values[1], Value::Document(stub));
    assert_eq!(in_pointer[0].object.get(FORMULA_INDEX), &Value::from("f"));
    assert_eq!(entries_of(copy)[0].object, object);
    assert_eq!(
        store
            .get("papers", &Value::from("p1"))
            .unwrap()
            .unwrap()
            .object,
        object
    );
    // A stub written back as a transfer writes it lands on the same entry, unchanged.
    store
        .commit(&[ObjectWrite::Entry {
            space: "papers".into(),
            subspace: pointer,
            remove: None,
            insert: Some(in_pointer[0].clone()),
        }])
        .unwrap();
    assert_eq!(entries_of(pointer), in_pointer);
    store
        .commit(&[ObjectWrite::Delete {
            space: "papers".into(),
            old: object,
        }])
        .unwrap();
    assert!(entries_of(pointer).is_empty() && entries_of(copy).is_empty());
}

/// `Store::region_counts` (the console's shading): each region's count is the number of objects
/// whose point lies in it, for every subspace, other spaces apart; a delete lowers it.
#[test]
fn region_counts_are_the_objects_whose_points_lie_in_each_region() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let schema = people("people", 8);
    store.create_space(&schema).unwrap();
    let mut objects = populate(&store, &schema);
    store.create_space(&people("other", 8)).unwrap();
    store
        .commit(&[put("other", None, 1, person("k1", 1, 2, "s1"))])
        .unwrap();
    let expected = |objects: &[StoredObject], subspace: usize| -> Vec<u64> {
        all_regions(&schema, subspace)
            .into_iter()
            .map(|r| expected_region(&schema, subspace, r, objects).len() as u64)
            .collect()
    };
    for subspace in 0..schema.subspaces.len() {
        let counts = store
            .region_counts("people", SubspaceId(subspace as u16))
            .unwrap();
        assert_eq!(counts, expected(&objects, subspace), "subspace {subspace}");
        assert_eq!(counts.iter().sum::<u64>(), objects.len() as u64);
    }
    let gone = objects.remove(17);
    store
        .commit(&[ObjectWrite::Delete {
            space: "people".into(),
            old: gone.object,
        }])
        .unwrap();
    for subspace in 0..schema.subspaces.len() {
        let counts = store
            .region_counts("people", SubspaceId(subspace as u16))
            .unwrap();
        assert_eq!(counts, expected(&objects, subspace), "subspace {subspace}");
    }
    assert!(matches!(
        store.region_counts("nobody", SubspaceId(0)),
        Err(StorageError::UnknownSpace(_))
    ));
}
