//! Write buffers stay bounded under a long write load: the store seals every memtable at
//! `MEMTABLE_ROTATE_BYTES` itself (see there for the fjall deadlock this avoids), and what was
//! sealed is flushed and still read back after a restart; a memtable that writes stopped filling
//! is sealed too, so searches read it from tables; and a keyspace writes stopped reaching, its
//! runs above the bottom one holding a good share of it, is merged into one run.

mod common;

use common::{people, person, put};
use std::time::{Duration, Instant};

use tessera_storage::{
    FsyncPolicy, Store, StoreOptions, MEMTABLE_BYTES_MAX, MEMTABLE_ROTATE_BYTES, QUIET_PERIOD,
    QUIET_SEAL_MIN_BYTES,
};
use tessera_types::Value;

/// The people space has three keyspaces: the key subspace, `a, b` and `s`.
const KEYSPACES: u64 = 3;
const _: () = assert!(MEMTABLE_ROTATE_BYTES < MEMTABLE_BYTES_MAX);

#[test]
fn memtables_are_sealed_before_fjalls_threshold_and_their_data_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        fsync: FsyncPolicy::Never,
        ..StoreOptions::default()
    };
    let schema = people("p", 4);
    // ~40 MiB of entries over the three keyspaces, in commits of 64 objects of ~700 bytes: each
    // keyspace's memtable crosses the rotation size about twice.
    let filler = "x".repeat(600);
    let objects = 320 * 64u64;
    {
        let store = Store::open(dir.path(), options.clone()).unwrap();
        store.create_space(&schema).unwrap();
        let mut most = 0;
        for batch in 0..objects / 64 {
            let writes: Vec<_> = (0..64)
                .map(|i| {
                    let n = batch * 64 + i;
                    let s = format!("{n:08}{filler}");
                    put(
                        "p",
                        None,
                        1,
                        person(&format!("k{n}"), n as i64, -(n as i64), &s),
                    )
                })
                .collect();
            store.commit(&writes).unwrap();
            let stats = store.stats();
            most = most.max(stats.memtable_bytes);
            // Every keyspace's active memtable is below the rotation size after a commit (each
            // commit adds far less than fjall's threshold minus it), so fjall never sees one
            // past its own threshold.
            assert!(
                stats.memtable_bytes < KEYSPACES * MEMTABLE_ROTATE_BYTES,
                "after commit {batch}: {} bytes in active memtables",
                stats.memtable_bytes
            );
        }
        // The load did fill the memtables up to the rotation size (the bound was tested).
        assert!(
            most > 2 * MEMTABLE_ROTATE_BYTES,
            "memtables never filled: at most {most} bytes"
        );
    }
    // What was sealed was flushed (or is replayed from the journal): every object is there.
    let store = Store::open(dir.path(), options).unwrap();
    for n in (0..objects).step_by(997).chain([objects - 1]) {
        let got = store.get("p", &Value::from(format!("k{n}"))).unwrap();
        let got = got.unwrap_or_else(|| panic!("k{n} lost"));
        assert_eq!(got.object.values[1], Value::Int(n as i64));
    }
}

#[test]
fn a_memtable_writes_stopped_filling_is_sealed_and_its_objects_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    store.create_space(&people("p", 4)).unwrap();
    // ~1.4 MiB per keyspace: above the quiet-sealing minimum, below the rotation size.
    let filler = "x".repeat(600);
    let objects = 2_000u64;
    for batch in 0..objects / 100 {
        let writes: Vec<_> = (0..100)
            .map(|i| {
                let n = batch * 100 + i;
                put("p", None, 1, person(&format!("k{n}"), n as i64, 0, &filler))
            })
            .collect();
        store.commit(&writes).unwrap();
    }
    let filled = store.stats().memtable_bytes;
    assert!(
        (KEYSPACES * QUIET_SEAL_MIN_BYTES..KEYSPACES * MEMTABLE_ROTATE_BYTES).contains(&filled),
        "{filled} bytes in memtables: the test does not test quiet sealing"
    );
    // No more writes: within a few periods every memtable is sealed (and a new, empty one
    // takes its place).
    wait_for(&store, 10, "memtables not sealed without writes", |s| {
        s.stats().memtable_bytes < QUIET_SEAL_MIN_BYTES
    });
    for n in (0..objects).step_by(97) {
        let got = store.get("p", &Value::from(format!("k{n}"))).unwrap();
        assert_eq!(got.unwrap().object.values[1], Value::Int(n as i64), "k{n}");
    }
}

/// Waits up to `periods` quiet periods for `done`, or fails saying `what`.
fn wait_for(store: &Store, periods: u32, what: &str, done: impl Fn(&Store) -> bool) {
    let deadline = Instant::now() + QUIET_PERIOD * periods;
    while !done(store) {
        assert!(Instant::now() < deadline, "{what}: {:?}", store.stats());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_quiet_keyspace_with_its_data_in_several_runs_is_merged_and_its_objects_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    store.create_space(&people("p", 4)).unwrap();
    // Two loads of ~1.4 MiB per keyspace, each sealed and flushed once writes stop: two
    // tables per keyspace, each about half of it, overlapping (the keys interleave).
    let filler = "x".repeat(600);
    for load in 0..2u64 {
        for batch in 0..20u64 {
            let writes: Vec<_> = (0..100)
                .map(|i| {
                    let n = 2 * (batch * 100 + i) + load;
                    put("p", None, 1, person(&format!("k{n}"), n as i64, 0, &filler))
                })
                .collect();
            store.commit(&writes).unwrap();
        }
        if load == 0 {
            wait_for(&store, 10, "the first load was not sealed", |s| {
                s.stats().memtable_bytes < QUIET_SEAL_MIN_BYTES
            });
        }
    }
    // Sealed, flushed, then merged: one sorted run per keyspace.
    wait_for(&store, 20, "the quiet keyspaces were not merged", |s| {
        let stats = s.stats();
        stats.memtable_bytes < QUIET_SEAL_MIN_BYTES && stats.sorted_runs == KEYSPACES
    });
    for n in (0..4_000).step_by(97) {
        let got = store.get("p", &Value::from(format!("k{n}"))).unwrap();
        assert_eq!(got.unwrap().object.values[1], Value::Int(n as i64), "k{n}");
    }
}
