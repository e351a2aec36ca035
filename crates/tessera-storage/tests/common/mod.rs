//! Shared test fixtures: a small space and its objects.
#![allow(dead_code)]

use tessera_geometry::Tessellation;
use tessera_storage::{FsyncPolicy, ObjectWrite, Store, StoreOptions, StoredObject};
use tessera_types::{Attribute, AttributeType, Object, SpaceSchema, Value, Version};

/// `space people key string id attributes int a, int b, string s subspace a, b subspace s`.
pub fn people(name: &str, partitions: u32) -> SpaceSchema {
    let attr = |name: &str, ty| Attribute::new(name.to_owned(), ty);
    SpaceSchema::new(
        name,
        attr("id", AttributeType::STRING),
        vec![
            attr("a", AttributeType::INT),
            attr("b", AttributeType::INT),
            attr("s", AttributeType::STRING),
        ],
        vec![vec!["a".into(), "b".into()], vec!["s".into()]],
        partitions,
        0,
    )
    .expect("valid schema")
}

pub fn person(key: &str, a: i64, b: i64, s: &str) -> Object {
    Object {
        values: vec![
            Value::from(key),
            Value::Int(a),
            Value::Int(b),
            Value::from(s),
        ],
    }
}

pub fn put(space: &str, old: Option<Object>, version: u64, new: Object) -> ObjectWrite {
    ObjectWrite::Put {
        space: space.to_owned(),
        old,
        new: StoredObject {
            version: Version(version),
            object: new,
        },
    }
}

pub fn all_regions(schema: &SpaceSchema, subspace: usize) -> Vec<tessera_geometry::RegionIndex> {
    (0..tessellation(schema, subspace).regions_count())
        .map(tessera_geometry::RegionIndex)
        .collect()
}

/// The tessellation of `subspace` of `schema` (its default, equal cuts).
pub fn tessellation(schema: &SpaceSchema, subspace: usize) -> Tessellation {
    Tessellation::new(
        schema.subspaces[subspace].dimensions.len(),
        schema.partitions,
    )
}

/// A store in `dir` that never fsyncs (the tests do not crash it), with a small cache.
pub fn open(dir: &std::path::Path) -> Store {
    Store::open(
        dir,
        StoreOptions {
            fsync: FsyncPolicy::Never,
            cache_bytes: 4 << 20,
        },
    )
    .unwrap()
}
