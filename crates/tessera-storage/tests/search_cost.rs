//! A search reads the cells its box crosses, not the region: BIGMIN seeks over the rest.

mod common;

use common::{people, person, put};
use tessera_geometry::{coordinate, RegionIndex};
use tessera_storage::{FsyncPolicy, Store, StoreOptions};
use tessera_types::{SubspaceId, Value};

#[test]
fn fixed_point_search_reads_only_its_matches() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        StoreOptions {
            fsync: FsyncPolicy::Never,
            cache_bytes: 8 << 20,
        },
    )
    .unwrap();
    // One partition: all 10 000 objects share region 0 of subspace (a, b).
    store.create_space(&people("grid", 1)).unwrap();
    let objects: Vec<_> = (0..10_000i64)
        .map(|i| {
            put(
                "grid",
                None,
                1,
                person(&format!("k{i}"), i % 100, i / 100, "s"),
            )
        })
        .collect();
    for chunk in objects.chunks(1000) {
        store.commit(chunk).unwrap();
    }
    let c = |i: i64| coordinate(&Value::Int(i));
    let search = |lo: &[u64], hi: &[u64]| -> (Vec<Value>, u64) {
        let before = store.stats().keys_scanned;
        let found: Vec<Value> = store
            .search("grid", SubspaceId(1), &[RegionIndex(0)], lo, hi)
            .unwrap()
            .map(|o| o.unwrap().object.key().clone())
            .collect();
        (found, store.stats().keys_scanned - before)
    };

    let (found, scanned) = search(&[c(37), c(42)], &[c(37), c(42)]);
    assert_eq!(found, vec![Value::from("k4237")]);
    assert!(
        scanned <= 2,
        "a fixed point reads its match (and at most one more), read {scanned}"
    );

    // Fixing one dimension: 100 matches; the scan seeks over the other 9 900 objects.
    let (found, scanned) = search(&[c(37), 0], &[c(37), u64::MAX]);
    assert_eq!(found.len(), 100);
    assert!(
        scanned <= 2 * 100 + 2,
        "read {scanned} entries for 100 matches"
    );

    // A small box: 3 × 4 matches.
    let (found, scanned) = search(&[c(10), c(20)], &[c(12), c(23)]);
    assert_eq!(found.len(), 12);
    assert!(
        scanned <= 2 * 12 + 2,
        "read {scanned} entries for 12 matches"
    );

    // The full box reads everything.
    let (found, scanned) = search(&[0, 0], &[u64::MAX, u64::MAX]);
    assert_eq!(found.len(), 10_000);
    assert_eq!(scanned, 10_000);
}
