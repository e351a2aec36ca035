//! What fjall costs per entry a scan reads, from a memtable and from tables: the measurement
//! behind `seal_quiet_memtables` (crates/tessera-storage/src/lib.rs).
//!
//! `cargo run --release -p tessera-storage --example scan_cost -- DIR` (DIR is emptied): puts
//! 100 000 entries shaped like subspace entries (a region, a Z-value, a key; 70-byte values)
//! into one keyspace, then reads 2 000 scans of 1 000 entries from random places while they
//! are in the memtable, after a flush, after a major compaction, and with 20 000 more in a new
//! memtable. Prints nanoseconds per entry read. Pin it (`taskset -c 1`) on a quiet machine.

use std::time::Instant;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, Readable};

const ENTRIES: u64 = 100_000;
const SCANS: u64 = 2_000;
const SCAN_ENTRIES: usize = 1_000;

/// Entry `i`'s key: a region (one of 64), a Z-value, the object's key.
fn key(i: u64) -> Vec<u8> {
    let mut k = vec![0u8, (i % 64) as u8];
    k.extend_from_slice(&(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20).to_be_bytes());
    k.extend_from_slice(format!("p{i}").as_bytes());
    k
}

fn measure(db: &Database, keyspace: &Keyspace, state: &str) {
    let snapshot = db.snapshot();
    let mut read = 0u64;
    let started = Instant::now();
    for scan in 0..SCANS {
        let start = key(scan.wrapping_mul(7919) % ENTRIES);
        for guard in snapshot.range(keyspace, start..).take(SCAN_ENTRIES) {
            let (k, v) = guard.into_inner().expect("read");
            read += u64::from(!k.is_empty() && !v.is_empty());
        }
    }
    let ns = started.elapsed().as_nanos() as f64 / read as f64;
    println!("{state}: {ns:.0} ns per entry");
}

fn main() -> Result<(), fjall::Error> {
    let dir = std::env::args().nth(1).expect("usage: scan_cost DIR");
    let _ = std::fs::remove_dir_all(&dir);
    let db = Database::builder(&dir).cache_size(256 << 20).open()?;
    let keyspace = db.keyspace("s", || {
        KeyspaceCreateOptions::default().max_memtable_size(64 << 20)
    })?;
    for i in 0..ENTRIES {
        keyspace.insert(key(i), [7u8; 70])?;
    }
    measure(&db, &keyspace, "in the memtable");
    keyspace.rotate_memtable_and_wait()?;
    measure(&db, &keyspace, "flushed to a table");
    keyspace.major_compact()?;
    measure(&db, &keyspace, "compacted");
    for i in 0..ENTRIES / 5 {
        keyspace.insert(key(i * 5), [8u8; 70])?;
    }
    measure(
        &db,
        &keyspace,
        "compacted, a fifth rewritten into a new memtable",
    );
    Ok(())
}
