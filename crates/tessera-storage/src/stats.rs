//! What the store counts since `open`: the live counters and the snapshot `Store::stats` takes.

use std::sync::atomic::AtomicU64;

/// Counters since `open`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Storage entries searches placed against their boxes: in the box, out of it (each then
    /// followed by a seek), and past its end (which ends the box).
    pub keys_scanned: u64,
    /// Storage entries searches read past while seeking by reading on
    /// (`search::SEEK_BY_READING_MAX`), not placed.
    pub keys_passed: u64,
    /// Scans of the LSM tree that searches opened: one per search, and one per seek that
    /// reading on did not finish (`search::SEEK_BY_READING_MAX`).
    pub scans_opened: u64,
    pub searches: u64,
    /// Non-empty `commit` calls that succeeded, and the object writes they held.
    pub commits: u64,
    pub object_writes: u64,
    /// Subspace entries those commits stored or removed (each entry once per commit): what a
    /// commit cost the engine, whatever the object writes it was asked for.
    pub entries_written: u64,
    /// Approximate number of stored objects, over all spaces.
    pub objects_count_estimate: u64,
    /// Bytes in the keyspaces' active memtables (fjall's estimate): the write buffers not yet
    /// sealed (see "Memory" in the crate's documentation).
    pub memtable_bytes: u64,
    /// Sorted runs in the keyspaces' tables (each of level 0's tables, and each deeper level
    /// holding any): a search's scan merges them and seeks in each ([`merge_worth_it`](crate::merge_worth_it)).
    pub sorted_runs: u64,
}

/// The live counters behind [`StoreStats`], bumped as the store works.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) keys_scanned: AtomicU64,
    pub(crate) keys_passed: AtomicU64,
    pub(crate) scans_opened: AtomicU64,
    pub(crate) searches: AtomicU64,
    pub(crate) commits: AtomicU64,
    pub(crate) object_writes: AtomicU64,
    pub(crate) entries_written: AtomicU64,
}
