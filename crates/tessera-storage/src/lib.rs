//! A Tessera server's durable store (docs/design.md §7), on the LSM engine `fjall` 3.
//!
//! # Layout
//!
//! One fjall database per server. Inside it:
//! * the keyspace `catalog` maps a space name to `[CATALOG_FORMAT] | postcard(SpaceSchema)`;
//! * the keyspace `log` holds a hop's log of pending updates ([`ObjectWrite::Log`]): a record
//!   id (u64 BE) maps to `[LOG_FORMAT] | postcard(LogRecord)`, the commit the update will make;
//! * one keyspace per (space, subspace), named `s{space}_{n}` (`n` the subspace number; space
//!   names are at most 128 bytes of `[A-Za-z0-9_]`, so names stay far below fjall's 255 and the
//!   last `_` separates them unambiguously). Every object has exactly one entry in every
//!   subspace keyspace of its space:
//!   * key subspace (n = 0): `region (u32 BE) | canonical key bytes`, so `get` is one point
//!     lookup: hash the key, find its region, look up;
//!   * other subspaces: `region (u32 BE) | zorder::interleave(point) | canonical key bytes`, so
//!     within a region the entries are in Z-order of their points;
//!   * the value is `version (u64 BE) | postcard(Object)`: the full object everywhere, so a
//!     search never needs a second read, except in a dynamic space's *pointer* overlays,
//!     which store the stub `SpaceSchema::stub_in` cuts from it (same entry key; a search
//!     there reads the documents by key afterwards). Byte formats are in [`codec`].
//!
//! A [`Store::search`] for the box `[lo, hi]` scans, in each requested region, the Z-range from
//! `interleave(lo')` to `interleave(hi')` (the box clipped to the region); whenever an entry's
//! point is outside the box it seeks straight to `next_in_box` (BIGMIN), so the entries read
//! grow with the matches and the box's boundary, not with the region's size
//! ([`StoreStats::keys_scanned`] counts them). The key subspace has no Z part: a search there
//! reads the whole of each region it is asked for (key-hash boxes are whole regions in practice).
//!
//! [`Store::region_entries`] reads a region whole, in storage-key order, a chunk per call with
//! the last storage key as the cursor: what a state transfer's source streams to a new replica.
//! Its target writes each chunk with [`ObjectWrite::ReplaceRange`] over the same range of
//! storage keys, which writes only the entries that differ from what the region holds there
//! (a server back from a short stop still holds most of it).
//!
//! # Durability contract
//!
//! * [`Store::commit`] applies all its writes in one fjall batch across keyspaces: after a crash
//!   either all of them are there or none. With [`FsyncPolicy::Always`] (the default) the journal
//!   is fdatasynced (`PersistMode::SyncData`: the data and the file size, which is all an append
//!   needs) before `commit` returns, so every acknowledged write survives `kill -9` and power loss.
//!   `Periodic` fsyncs from a background thread every `interval_ms` (a power loss may lose the last
//!   interval; a process crash loses nothing, since every batch is handed to the OS before `commit`
//!   returns); `Never` only hands batches to the OS.
//! * [`Store::commit_buffered`] writes the same batch without an fsync: it is readable at once
//!   and durable with the next fsynced commit (the journal keeps batches in order, and a crash
//!   keeps a prefix of them). A chain's hop uses it for commits whose update is durable in the
//!   log already ([`ObjectWrite::Log`]).
//! * The log: [`Store::open`] commits every record it finds, in version order, and removes
//!   them, in one fsynced batch, before it returns (records of spaces or subspaces that are
//!   gone are only removed). A record is removed in the batch of its commit, so a record found
//!   is an update whose commit did not reach the disk, and every later batch was lost with it.
//! * [`Store::create_space`], [`Store::alter_space`] and [`Store::drop_space`] are fsynced
//!   before they return, whatever the policy. A crash between creating a space's keyspaces and
//!   its catalog entry (or between removing the entry and the keyspaces) leaves keyspaces no
//!   catalog entry names: `open` deletes them.
//! * After any failed write or fsync the store is *poisoned*: every later write returns
//!   [`StorageError::Poisoned`] until the process restarts and recovers from the journal
//!   (after a failed fsync the page cache's state is unknown: see fjall's `Error::Poisoned`).
//!   Reads keep working.
//! * The store trusts `ObjectWrite::Put::old` / `Delete::old` to be the stored object (the point
//!   leader's order guarantees it); a wrong `old` would leave a stale subspace entry.
//!
//! # Memory
//!
//! RSS ≈ `cache_bytes` (fjall's block cache, which also holds index and filter blocks; default
//! 64 MiB) + write buffers + fixed overhead (a few MiB: threads, file descriptors, catalog).
//! Write buffers: each keyspace's memtable is sealed at [`MEMTABLE_ROTATE_BYTES`] (6 MiB, by
//! `commit` itself: see there why), writers wait while a keyspace has 4 sealed memtables waiting
//! for their flush, and the journal is capped at [`JOURNAL_BYTES_MAX`] (64 MiB, fjall's
//! minimum): past it, fjall flushes the memtables that pin the oldest journal, so unflushed data
//! stays around 64 MiB whatever the number of spaces. A memtable that writes stopped filling is
//! sealed within a few seconds all the same (`seal_quiet_memtables`): searches read tables
//! faster than memtables. Background work runs on [`WORKER_THREADS`] fjall threads, plus the
//! store's own: one that seals quiet memtables, and one fsync thread under `Periodic`.

#![forbid(unsafe_code)]

pub mod codec;
pub mod encoded;
mod error;
mod replace;
mod search;
mod stats;
mod versions;

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use fjall::{AbstractTree, Database, Keyspace, KeyspaceCreateOptions, PersistMode, Readable};
use tessera_geometry::{key_region, ordered_key_position, RegionIndex, SearchBox, Tessellation};
use tessera_types::{Object, SpaceSchema, SubspaceId, Value, Version};

pub use error::StorageError;
use search::RegionBox;
pub use search::{EncodedObject, SearchIter, SEEK_BY_READING_MAX};
pub use stats::StoreStats;

use stats::Counters;
use versions::RegionVersions;

/// Memtable size at which fjall would seal a keyspace's memtable and flush it (stored with the
/// keyspace when it is created). The store seals it itself before that, at
/// [`MEMTABLE_ROTATE_BYTES`].
pub const MEMTABLE_BYTES_MAX: u64 = 8 * 1024 * 1024;
/// Memtable size at which [`Store::commit`] seals a keyspace's memtable itself, before fjall's
/// own threshold ([`MEMTABLE_BYTES_MAX`]) is reached.
///
/// Why: past that threshold fjall 3.1 asks its workers to rotate the memtable on *every* write
/// (a `try_send` on their bounded queue of 1 000), and a worker that then rotates sends the flush
/// to that same queue with a blocking `send`. Under a long write load with the single worker busy
/// compacting, the queue fills with rotation requests, the worker blocks on its own queue for
/// ever, and nothing is flushed again: the memtable and the journal grow without bound (seen here
/// at 10 M objects: 2.8 GB of RSS and a 1.5 GB journal, growing; upstream: fjall-rs/fjall#323).
/// Rotating here, on the committing thread, keeps every memtable below fjall's threshold unless
/// one commit adds more than the difference, and then it is rotated right after that commit.
/// Memory stays bounded: fjall halts writers while a keyspace has 4 sealed memtables queued.
pub const MEMTABLE_ROTATE_BYTES: u64 = MEMTABLE_BYTES_MAX * 3 / 4;
/// Journal size past which fjall flushes the oldest memtables (fjall's minimum, 64 MiB).
pub const JOURNAL_BYTES_MAX: u64 = 64 * 1024 * 1024;
/// fjall flush and compaction threads. One: with two or more, fjall 3.1's worker 0 hands every
/// compaction request back to the queue while another worker is busy, and receives it again at
/// once — a busy loop that took about 15% of a core under YCSB A (docs/benchmarks.md). One
/// worker flushes and compacts in turn, which is plenty for the two cores the reference
/// machine has.
pub const WORKER_THREADS: usize = 1;
/// How often the store looks for quiet memtables to seal (`seal_quiet_memtables`).
pub const QUIET_PERIOD: Duration = Duration::from_secs(1);
/// Memtables smaller than this are left to fill (`seal_quiet_memtables`): their entries are
/// few, and sealing them would make many small tables.
pub const QUIET_SEAL_MIN_BYTES: u64 = 256 * 1024;
/// A quiet keyspace is merged into one sorted run once its runs above the bottom one hold at
/// least 1/this of its bytes ([`merge_worth_it`]), so a merge rewrites at most this many times
/// the bytes written since the last.
pub const QUIET_MERGE_SHARE: u64 = 8;
/// Default block cache.
pub const CACHE_BYTES_DEFAULT: u64 = 64 * 1024 * 1024;

const CATALOG: &str = "catalog";
const LOG: &str = "log";
/// Format byte leading every log record.
const LOG_FORMAT: u8 = 1;
/// Format byte leading every catalog value. 2: subspaces carry their state (serving, being
/// built, dropped). A data directory of format 1 is refused, not misread.
const CATALOG_FORMAT: u8 = 5;

const _: () = assert!(MEMTABLE_BYTES_MAX < JOURNAL_BYTES_MAX);
// `s{space}_{n}` must fit fjall's 255-byte keyspace names.
const _: () = assert!(1 + tessera_types::constants::NAME_BYTES_MAX + 1 + 5 <= 255);

/// When commits are fsynced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// Every `commit()` is fsynced before it returns.
    #[default]
    Always,
    /// A background thread fsyncs every `interval_ms`.
    Periodic { interval_ms: u64 },
    /// Never fsync explicitly (batches still reach the OS before `commit` returns).
    Never,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    pub fsync: FsyncPolicy,
    /// The engine's block cache, in bytes.
    pub cache_bytes: u64,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            fsync: FsyncPolicy::Always,
            cache_bytes: CACHE_BYTES_DEFAULT,
        }
    }
}

pub use tessera_types::StoredObject;

/// A chunk of a region's entries ([`Store::region_entries`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionChunk {
    /// Committed entries of the region, in storage-key order.
    pub entries: Vec<StoredObject>,
    /// The cursor to resume after: the storage key of the last of `entries`, an opaque value
    /// to pass back as `after`. `None` when no entry of the region follows them.
    pub next: Option<Vec<u8>>,
}

/// One key's change. The store derives every subspace entry from the old and new objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObjectWrite {
    /// Store `new`, replacing `old` (the currently stored object of that key, if any).
    Put {
        space: String,
        old: Option<Object>,
        new: StoredObject,
    },
    /// Remove `old`, the currently stored object of its key.
    Delete { space: String, old: Object },
    /// A change to ONE subspace, for a server that owns only some regions of a space (a hop of
    /// a value-dependent chain): remove the entry of `remove` and/or store `insert`. Both name
    /// the same key. A relocation's old-region hop only removes, its new-region hop only inserts.
    Entry {
        space: String,
        subspace: SubspaceId,
        remove: Option<Object>,
        insert: Option<StoredObject>,
    },
    /// Remove every committed entry of `region` of `subspace`: the server no longer keeps the
    /// region. Entries written earlier in the same batch are not seen (clear before writing).
    ClearRegion {
        space: String,
        subspace: SubspaceId,
        region: RegionIndex,
    },
    /// A chunk of a state transfer into `region` of `subspace`, written over what the region
    /// may hold already (a server back from a short stop): within the range of storage keys
    /// (`after`, `through`] of the region (`after` `None`: from its first key; `through`
    /// `None`: to its last), every entry that is not one of `entries` is removed, unless it is
    /// exactly a `(key, version)` of `keep` (the chain wrote it here); each of `entries` is
    /// written unless its place holds it already, byte for byte. Unchanged entries cost no
    /// write. The region is read as the batch has left it so far (the writes before this one
    /// count). `after` and `through` are storage keys of the region (a chunk's cursors,
    /// [`RegionChunk::next`]), in that order; every entry must lie in the range.
    ReplaceRange {
        space: String,
        subspace: SubspaceId,
        region: RegionIndex,
        after: Option<Vec<u8>>,
        through: Option<Vec<u8>>,
        entries: Vec<StoredObject>,
        keep: Vec<(Value, Version)>,
    },
    /// Record under `id`, in the log, an [`ObjectWrite::Entry`] to commit later (an update
    /// pending at a chain's hop), with its version. Nothing else changes until it is committed
    /// by an `Entry` and removed by an [`ObjectWrite::Unlog`] in one batch, or committed by
    /// [`Store::open`] after a crash. Checked as the `Entry` would be.
    Log {
        id: u64,
        version: Version,
        space: String,
        subspace: SubspaceId,
        remove: Option<Object>,
        insert: Option<StoredObject>,
    },
    /// Remove the log record `id` (absent: nothing happens).
    Unlog { id: u64 },
}

/// A record of the log, as stored: borrowed from its `ObjectWrite::Log` to be written (no
/// copy of the objects on a hop's hot path), owned when read back.
#[derive(serde::Serialize, serde::Deserialize)]
struct LogRecord<'a> {
    version: Version,
    space: Cow<'a, str>,
    subspace: SubspaceId,
    remove: Option<Cow<'a, Object>>,
    insert: Option<Cow<'a, StoredObject>>,
}

/// A space's schema with its tessellations and keyspace handles, one per subspace (none for a
/// dropped subspace: its storage is gone).
struct Space {
    schema: SpaceSchema,
    tessellations: Vec<Tessellation>,
    keyspaces: Vec<Option<Keyspace>>,
}

impl Space {
    /// The keyspace and the tessellation of `subspace`, or why there is none.
    fn subspace(&self, subspace: SubspaceId) -> Result<(&Keyspace, &Tessellation), StorageError> {
        let n = subspace.get();
        match (self.keyspaces.get(n), self.tessellations.get(n)) {
            (Some(Some(k)), Some(t)) => Ok((k, t)),
            _ => Err(StorageError::Invalid(format!(
                "{:?} has no subspace {n}",
                self.schema.name
            ))),
        }
    }

    /// [`Space::subspace`], for an operation on its region `region`, or why it has none.
    fn region(
        &self,
        subspace: SubspaceId,
        region: RegionIndex,
    ) -> Result<(&Keyspace, &Tessellation), StorageError> {
        let (keyspace, tessellation) = self.subspace(subspace)?;
        if region.0 >= tessellation.regions_count() {
            return Err(StorageError::Invalid(format!(
                "subspace {} has no region {}",
                subspace.get(),
                region.0
            )));
        }
        Ok((keyspace, tessellation))
    }
}

/// A background thread of the store that runs a task every period until the store is
/// dropped: the periodic fsync, the sealing of quiet memtables.
struct Ticker {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

/// The spaces a store holds, by name: shared with its [`Ticker`]s.
type Spaces = Arc<RwLock<BTreeMap<String, Arc<Space>>>>;

/// A server's durable store. `Send + Sync`: share it through an `Arc`.
pub struct Store {
    db: Database,
    catalog: Keyspace,
    /// Updates pending at this server's hops ([`ObjectWrite::Log`]).
    log: Keyspace,
    spaces: Spaces,
    poisoned: Arc<AtomicBool>,
    counters: Arc<Counters>,
    fsync: FsyncPolicy,
    /// The periodic fsync (under [`FsyncPolicy::Periodic`]) and [`seal_quiet_memtables`].
    tickers: Vec<Ticker>,
    /// The versions of the keys of regions hops asked about ([`versions`]).
    versions: RegionVersions,
}

/// A space's catalog entry: the format byte, then its schema.
fn catalog_value(schema: &SpaceSchema) -> Vec<u8> {
    let mut value = vec![CATALOG_FORMAT];
    postcard::to_io(schema, &mut value).expect("writing to a Vec cannot fail");
    value
}

fn keyspace_name(space: &str, subspace: usize) -> String {
    format!("s{space}_{subspace}")
}

fn keyspace_options() -> KeyspaceCreateOptions {
    KeyspaceCreateOptions::default().max_memtable_size(MEMTABLE_BYTES_MAX)
}

impl Store {
    /// Opens the store in `dir`, creating it if needed, recovering it otherwise (the catalog, the
    /// data, and the removal of keyspaces that no catalog entry names).
    pub fn open(dir: &Path, options: StoreOptions) -> Result<Store, StorageError> {
        let db = Database::builder(dir)
            .cache_size(options.cache_bytes)
            .worker_threads(WORKER_THREADS)
            .max_journaling_size(JOURNAL_BYTES_MAX)
            .open()
            .map_err(|e| match e {
                fjall::Error::Locked => StorageError::InUse(dir.to_owned()),
                e => e.into(),
            })?;
        let catalog = db.keyspace(CATALOG, KeyspaceCreateOptions::default)?;
        let log = db.keyspace(LOG, keyspace_options)?;
        let mut spaces = BTreeMap::new();
        for guard in catalog.iter() {
            let (name, value) = guard.into_inner()?;
            let schema = decode_schema(&value)?;
            if schema.name.as_bytes() != &*name {
                return Err(StorageError::Corrupt(format!(
                    "catalog entry {name:?} holds space {:?}",
                    schema.name
                )));
            }
            let space = open_space(&db, schema)?;
            spaces.insert(space.schema.name.clone(), Arc::new(space));
        }
        let expected: Vec<String> = spaces
            .values()
            .flat_map(|s: &Arc<Space>| {
                (0..s.keyspaces.len())
                    .filter(|n| s.keyspaces[*n].is_some())
                    .map(|n| keyspace_name(&s.schema.name, n))
            })
            .collect();
        for name in db.list_keyspace_names() {
            let name: &str = &name;
            if name != CATALOG && name != LOG && !expected.iter().any(|e| e == name) {
                let orphan = db.keyspace(name, KeyspaceCreateOptions::default)?;
                db.delete_keyspace(orphan)?;
            }
        }
        let poisoned = Arc::new(AtomicBool::new(false));
        let spaces: Spaces = Arc::new(RwLock::new(spaces));
        let mut tickers = vec![start_sealer(spaces.clone(), log.clone(), poisoned.clone())];
        if let FsyncPolicy::Periodic { interval_ms } = options.fsync {
            let (db, poisoned) = (db.clone(), poisoned.clone());
            let period = Duration::from_millis(interval_ms.max(1));
            tickers.push(start_ticker("tessera-fsync", period, move || {
                if !poisoned.load(Ordering::Acquire) && db.persist(PersistMode::SyncAll).is_err() {
                    poisoned.store(true, Ordering::Release);
                }
            }));
        }
        let store = Store {
            db,
            catalog,
            log,
            spaces,
            poisoned,
            counters: Arc::default(),
            fsync: options.fsync,
            tickers,
            versions: RegionVersions::default(),
        };
        store.recover_log()?;
        Ok(store)
    }

    /// Commits every record of the log, in version order, and empties it (see the durability
    /// contract above). Returns how many records were committed.
    fn recover_log(&self) -> Result<usize, StorageError> {
        let mut records = Vec::new();
        for guard in self.log.iter() {
            let (id, value) = guard.into_inner()?;
            let record = match value.split_first() {
                Some((&LOG_FORMAT, rest)) => postcard::from_bytes::<LogRecord>(rest)
                    .map_err(|e| StorageError::Corrupt(format!("log record: {e}")))?,
                _ => {
                    return Err(StorageError::Corrupt(
                        "log record of an unknown format".into(),
                    ))
                }
            };
            let id = <[u8; 8]>::try_from(&*id)
                .map_err(|_| StorageError::Corrupt("log record id".into()))?;
            records.push((record.version, u64::from_be_bytes(id), record));
        }
        if records.is_empty() {
            return Ok(0);
        }
        records.sort_by_key(|(version, id, _)| (*version, *id));
        let spaces = self.spaces.read().expect("lock").clone();
        let mut writes = Vec::with_capacity(2 * records.len());
        let mut committed = 0;
        for (_, id, r) in records {
            let exists = spaces
                .get(&*r.space)
                .is_some_and(|s| s.subspace(r.subspace).is_ok());
            if exists {
                committed += 1;
                writes.push(ObjectWrite::Entry {
                    space: r.space.into_owned(),
                    subspace: r.subspace,
                    remove: r.remove.map(Cow::into_owned),
                    insert: r.insert.map(Cow::into_owned),
                });
            }
            writes.push(ObjectWrite::Unlog { id });
        }
        self.write(&writes, PersistMode::SyncAll)?;
        Ok(committed)
    }

    /// The catalog: every space's schema, by name.
    pub fn spaces(&self) -> Vec<SpaceSchema> {
        self.spaces
            .read()
            .expect("lock")
            .values()
            .map(|s| s.schema.clone())
            .collect()
    }

    /// Creates a space; durable (fsynced) before it returns.
    pub fn create_space(&self, schema: &SpaceSchema) -> Result<(), StorageError> {
        self.check_writable()?;
        if !tessera_types::schema::is_valid_name(&schema.name) || schema.subspaces.is_empty() {
            return Err(StorageError::Invalid(format!(
                "not a valid schema: {:?}",
                schema.name
            )));
        }
        let mut spaces = self.spaces.write().expect("lock");
        if spaces.contains_key(&schema.name) {
            return Err(StorageError::SpaceExists(schema.name.clone()));
        }
        let space = self.poison_on_error(open_space(&self.db, schema.clone()))?;
        assert!(
            space
                .keyspaces
                .iter()
                .flatten()
                .all(|k| k.approximate_len() == 0),
            "a new space starts empty"
        );
        self.write_catalog_entry(schema)?;
        spaces.insert(schema.name.clone(), Arc::new(space));
        Ok(())
    }

    /// Changes a space's subspaces to `schema`'s (`tessera alter-space`): a subspace it adds
    /// (a new id) gets an empty keyspace, one it drops loses its keyspace and all its entries;
    /// the others are kept as they are. A split of an ordered space's key region
    /// (`SpaceSchema::key_splits`) moves the key subspace's entries of the keys that leave the
    /// region to the new one, in the batch that records the schema; splits taken back (the
    /// last ones) move them back. Durable before it returns.
    /// Subspace ids are stable: the subspaces the space has keep their dimensions, and
    /// `schema` lists them all.
    pub fn alter_space(&self, schema: &SpaceSchema) -> Result<(), StorageError> {
        self.check_writable()?;
        let mut spaces = self.spaces.write().expect("lock");
        let old = spaces
            .get(&schema.name)
            .ok_or_else(|| StorageError::UnknownSpace(schema.name.clone()))?
            .clone();
        let kept = old.schema.subspaces.len() <= schema.subspaces.len()
            && old
                .schema
                .subspaces
                .iter()
                .zip(&schema.subspaces)
                .all(|(a, b)| {
                    a.dimensions == b.dimensions
                        && a.cuts == b.cuts
                        && (a.is_written() || !b.is_written())
                })
            && old.schema.attributes == schema.attributes
            && old.schema.partitions == schema.partitions
            && old.schema.placement == schema.placement
            // Splits added, or (a restart bringing storage back to the configuration it
            // persisted before a split it did not finish installing) taken back.
            && (schema.key_splits.starts_with(&old.schema.key_splits)
                || old.schema.key_splits.starts_with(&schema.key_splits));
        let tessellations = tessera_geometry::tessellations(schema);
        // Every split applies (the geometry leaves out one that does not).
        let splits_apply = !schema.keys_ordered()
            || tessellations[0].regions_count() as usize
                == schema.partitions as usize + schema.key_splits.len();
        if !kept || !splits_apply {
            return Err(StorageError::Invalid(format!(
                "space {:?}: an alteration only adds subspaces, drops them or splits key regions",
                schema.name
            )));
        }
        let mut keyspaces = Vec::with_capacity(schema.subspaces.len());
        let mut dropped = Vec::new();
        for (n, subspace) in schema.subspaces.iter().enumerate() {
            let before = old.keyspaces.get(n).cloned().flatten();
            keyspaces.push(match (subspace.is_written(), before) {
                (true, Some(k)) => Some(k),
                (true, None) => Some(
                    self.poison_on_error(
                        self.db
                            .keyspace(&keyspace_name(&schema.name, n), keyspace_options),
                    )?,
                ),
                (false, before) => {
                    dropped.extend(before);
                    None
                }
            });
        }
        let mut batch = self.db.batch().durability(Some(PersistMode::SyncAll));
        if let Some(Some(keys)) = keyspaces.first() {
            self.move_split_keys(&old, &tessellations[0], keys, &mut batch)?;
        }
        batch.insert(&self.catalog, schema.name.as_bytes(), catalog_value(schema));
        self.poison_on_error(batch.commit())?;
        spaces.insert(
            schema.name.clone(),
            Arc::new(Space {
                schema: schema.clone(),
                tessellations,
                keyspaces,
            }),
        );
        // Key splits move key entries between regions; dropped subspaces go.
        self.versions.forget_space(&schema.name);
        // Searches already running on a dropped subspace finish on their snapshot.
        for keyspace in dropped {
            self.poison_on_error(self.db.delete_keyspace(keyspace))?;
        }
        Ok(())
    }

    /// Adds to `batch` the moves of the key subspace's entries whose key region differs
    /// under `keys` (the key subspace's tessellation after splits added or taken back) from
    /// `old`'s: each region whose range changed or that is gone is read whole, and an entry
    /// that now belongs to another region is removed and written under that region's prefix.
    fn move_split_keys(
        &self,
        old: &Space,
        keys: &Tessellation,
        keyspace: &Keyspace,
        batch: &mut fjall::OwnedWriteBatch,
    ) -> Result<(), StorageError> {
        let before = &old.tessellations[0];
        let snapshot = self.db.snapshot();
        for r in 0..before.regions_count() {
            let region = RegionIndex(r);
            if r < keys.regions_count() && before.key_range(region) == keys.key_range(region) {
                continue;
            }
            let prefix = codec::region_prefix(region);
            let end = match search::successor(prefix.to_vec()) {
                Some(end) => Bound::Excluded(end),
                None => Bound::Unbounded,
            };
            for guard in snapshot.range(keyspace, (Bound::Included(prefix.to_vec()), end)) {
                let (entry, value) = guard.into_inner()?;
                let stored = codec::decode_value(&value)?;
                let now = key_region(keys, stored.object.key());
                if now != region {
                    let mut moved = codec::region_prefix(now).to_vec();
                    moved.extend_from_slice(&entry[codec::REGION_BYTES..]);
                    batch.remove(keyspace, entry);
                    batch.insert(keyspace, moved, value);
                }
            }
        }
        Ok(())
    }

    /// Records `schema` in the catalog, fsynced.
    fn write_catalog_entry(&self, schema: &SpaceSchema) -> Result<(), StorageError> {
        let mut batch = self.db.batch().durability(Some(PersistMode::SyncAll));
        batch.insert(&self.catalog, schema.name.as_bytes(), catalog_value(schema));
        self.poison_on_error(batch.commit())
    }

    /// Removes a space's catalog entry and all its data; durable before it returns. Searches
    /// already running on the space finish on their snapshot.
    pub fn drop_space(&self, name: &str) -> Result<(), StorageError> {
        self.check_writable()?;
        let mut spaces = self.spaces.write().expect("lock");
        let space = spaces
            .get(name)
            .ok_or_else(|| StorageError::UnknownSpace(name.to_owned()))?
            .clone();
        let mut batch = self.db.batch().durability(Some(PersistMode::SyncAll));
        batch.remove(&self.catalog, name.as_bytes());
        self.poison_on_error(batch.commit())?;
        spaces.remove(name);
        self.versions.forget_space(name);
        for keyspace in space.keyspaces.iter().flatten() {
            self.poison_on_error(self.db.delete_keyspace(keyspace.clone()))?;
        }
        Ok(())
    }

    /// The stored object of `key` in `space`, if any.
    pub fn get(&self, space: &str, key: &Value) -> Result<Option<StoredObject>, StorageError> {
        let space = self.space(space)?;
        if key.primitive_type() != Some(space.schema.key_type()) {
            return Err(StorageError::Invalid(format!(
                "key {key} is a {}, the key of {:?} is a {}",
                key.kind_name(),
                space.schema.name,
                space.schema.key_type()
            )));
        }
        let region = key_region(&space.tessellations[0], key);
        let mut storage_key = codec::region_prefix(region).to_vec();
        storage_key.extend_from_slice(&codec::key_bytes(key));
        let Some(bytes) = space.subspace(SubspaceId::KEY)?.0.get(&storage_key)? else {
            return Ok(None);
        };
        let stored = codec::decode_value(&bytes)?;
        if stored.object.key() != key || !stored.object.conforms_to(&space.schema) {
            return Err(StorageError::Corrupt(format!(
                "entry of key {key} holds {:?}",
                stored.object
            )));
        }
        Ok(Some(stored))
    }

    /// The version of the entry that stores exactly `object` (its key at its point) in
    /// `subspace`, if this store holds one. A chain hop uses it to tell whether the update
    /// that produced `object` has committed here.
    pub fn entry_version(
        &self,
        space: &str,
        subspace: SubspaceId,
        object: &Object,
    ) -> Result<Option<Version>, StorageError> {
        let space = self.space(space)?;
        let (keyspace, tessellation) = space.subspace(subspace)?;
        if !object.conforms_to(&space.schema) {
            return Err(StorageError::Invalid(format!(
                "object {object:?} does not fit the schema"
            )));
        }
        let Some(entry) = codec::entry_key(&space.schema, subspace, tessellation, object) else {
            return Ok(None);
        };
        let Some(bytes) = keyspace.get(entry)? else {
            return Ok(None);
        };
        let stored = codec::decode_value(&bytes)?;
        Ok((stored.object.key() == object.key()).then_some(stored.version))
    }

    /// The version of `key`'s entry in `region` of `subspace`, wherever its point: a scan of
    /// the region, for the rare question of a chain hop that forgot a key (see
    /// tessera-replication's `applied_in_store`).
    pub fn region_entry_version(
        &self,
        space: &str,
        subspace: SubspaceId,
        region: RegionIndex,
        key: &Value,
    ) -> Result<Option<Version>, StorageError> {
        let held = self.space(space)?;
        let (keyspace, tessellation) = held.region(subspace, region)?;
        let key_at = key_offset(subspace, tessellation);
        let scan = || -> Result<HashMap<Vec<u8>, Version>, StorageError> {
            let mut versions = HashMap::new();
            for guard in self
                .db
                .snapshot()
                .prefix(keyspace, codec::region_prefix(region))
            {
                let (entry, value) = guard.into_inner()?;
                let key_bytes = entry.get(key_at..).unwrap_or_default().to_vec();
                versions.insert(key_bytes, codec::value_version(&value)?);
            }
            Ok(versions)
        };
        let at = (space.to_owned(), subspace.get(), region.0);
        self.versions.lookup(at, &codec::key_bytes(key), scan)
    }

    /// How many objects key region `region` of `space` holds, and where to split it so that its
    /// halves hold about as many: the first key from the middle one up whose position
    /// (`tessera_geometry::KeyPosition`) lies above its smallest key's, so both halves hold keys
    /// (`None` when there is none: fewer than two keys). Reads the region whole, in key order (its
    /// entries are: `region | key bytes`, and key bytes keep the order of an ordered key axis).
    pub fn key_region_load(
        &self,
        space: &str,
        region: RegionIndex,
    ) -> Result<(u64, Option<Value>), StorageError> {
        let space = self.space(space)?;
        let (keyspace, _) = space.region(SubspaceId::KEY, region)?;
        let prefix = codec::region_prefix(region);
        let end = match search::successor(prefix.to_vec()) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        let range = (Bound::Included(prefix.to_vec()), end);
        let snapshot = self.db.snapshot();
        let mut objects = 0u64;
        let mut first = None;
        for guard in snapshot.range(keyspace, range.clone()) {
            if first.is_none() {
                let stored = codec::decode_value(&guard.value()?)?;
                first = Some(ordered_key_position(stored.object.key()));
            } else {
                guard.key()?;
            }
            objects += 1;
        }
        let Some(first) = first else {
            return Ok((0, None));
        };
        let mut split_at = None;
        for guard in snapshot.range(keyspace, range).skip((objects / 2) as usize) {
            let stored = codec::decode_value(&guard.value()?)?;
            let key = stored.object.key();
            if ordered_key_position(key) > first {
                split_at = Some(key.clone());
                break;
            }
        }
        Ok((objects, split_at))
    }

    /// How many entries each region of `subspace` holds in committed state, indexed by region:
    /// one scan of the subspace's keys (an entry's key starts with its region). A region this
    /// store does not hold counts 0.
    pub fn region_counts(
        &self,
        space: &str,
        subspace: SubspaceId,
    ) -> Result<Vec<u64>, StorageError> {
        let space = self.space(space)?;
        let (keyspace, tessellation) = space.subspace(subspace)?;
        let mut counts = vec![0u64; tessellation.regions_count() as usize];
        let snapshot = self.db.snapshot();
        for guard in snapshot.iter(keyspace) {
            let key = guard.key()?;
            let region = key
                .first_chunk::<{ codec::REGION_BYTES }>()
                .map(|prefix| u32::from_be_bytes(*prefix) as usize)
                .filter(|&r| r < counts.len())
                .ok_or_else(|| {
                    StorageError::Corrupt(format!(
                        "entry {key:?} of subspace {} names no region of it",
                        subspace.get()
                    ))
                })?;
            counts[region] += 1;
        }
        Ok(counts)
    }

    /// One chunk of the committed entries of `region` of `subspace`, in storage-key order, for a
    /// state transfer streaming the region to a new replica while writes go on between calls.
    ///
    /// The chunk starts strictly after the storage key `after` (the `next` of the previous
    /// chunk; `None` starts at the region's first entry) and ends once the entries' encoded
    /// values reach `max_bytes`; it holds at least one entry whenever one remains, so a budget
    /// smaller than an object still makes progress. Each call reads one snapshot: an entry
    /// committed between calls is returned by a later chunk if its storage key is past the
    /// cursor, and not at all if it is behind it (a transfer target gets those by the chain).
    pub fn region_entries(
        &self,
        space: &str,
        subspace: SubspaceId,
        region: RegionIndex,
        after: Option<&[u8]>,
        max_bytes: usize,
    ) -> Result<RegionChunk, StorageError> {
        let space = self.space(space)?;
        let n = subspace.get();
        let (keyspace, tessellation) = space.region(subspace, region)?;
        let prefix = codec::region_prefix(region);
        let start = match after {
            None => Bound::Included(prefix.to_vec()),
            Some(cursor) if cursor.starts_with(&prefix) => Bound::Excluded(cursor.to_vec()),
            // Resuming from another region's key would silently skip or repeat entries.
            Some(cursor) => {
                return Err(StorageError::Invalid(format!(
                    "cursor {cursor:?} is not a key of region {} of subspace {n}",
                    region.0
                )))
            }
        };
        let end = match search::successor(prefix.to_vec()) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        let snapshot = self.db.snapshot();
        let mut entries = Vec::new();
        let mut bytes = 0usize;
        let mut last: Option<fjall::Slice> = None;
        for guard in snapshot.range(keyspace, (start, end)) {
            let (key, value) = guard.into_inner()?;
            // Checked only once another entry is known to exist, so `next` is `None` exactly
            // when this chunk ends the region (as of this snapshot).
            if bytes >= max_bytes && !entries.is_empty() {
                return Ok(RegionChunk {
                    entries,
                    next: last.map(|k| k.to_vec()),
                });
            }
            let stored = codec::decode_value(&value)?;
            // The receiver stores the object where its own layout puts it: an object that does
            // not fit the schema, or whose entry is not at this key (so not in this region),
            // must not travel.
            if !stored.object.conforms_to(&space.schema)
                || codec::entry_key(&space.schema, subspace, tessellation, &stored.object)
                    .as_deref()
                    != Some(&*key)
            {
                return Err(StorageError::Corrupt(format!(
                    "entry {key:?} of subspace {n} holds {:?}",
                    stored.object
                )));
            }
            bytes = bytes.saturating_add(value.len());
            entries.push(stored);
            last = Some(key);
        }
        Ok(RegionChunk {
            entries,
            next: None,
        })
    }

    /// Whether a state transfer's chunk fits `space` as an [`ObjectWrite::ReplaceRange`] of
    /// `entries` over (`after`, `through`] of `region` of `subspace` (its range within the
    /// region and in order, its entries fitting the schema and within the range): what a
    /// server checks of a chunk a peer sends before it acts on it, since a write that does not
    /// fit would fail the commit that holds it.
    pub fn check_transfer_chunk(
        &self,
        space: &str,
        subspace: SubspaceId,
        region: RegionIndex,
        (after, through): (Option<&[u8]>, Option<&[u8]>),
        entries: &[StoredObject],
    ) -> Result<(), StorageError> {
        let space = self.space(space)?;
        let chunk = replace::Chunk {
            subspace,
            region,
            after,
            through,
            entries,
            keep: &[],
        };
        replace::check(&space, &chunk)
    }

    /// Applies all `writes` atomically (one engine batch across keyspaces), durable per the fsync
    /// policy before it returns. Later writes of the same storage entry win, so a group commit
    /// may hold several successive writes of one key, each `old` being the previous `new`.
    /// Writes are validated first: on an error nothing is written.
    pub fn commit(&self, writes: &[ObjectWrite]) -> Result<(), StorageError> {
        let mode = match self.fsync {
            FsyncPolicy::Always => PersistMode::SyncData,
            FsyncPolicy::Periodic { .. } | FsyncPolicy::Never => PersistMode::Buffer,
        };
        self.write(writes, mode)
    }

    /// [`Store::commit`] without an fsync: readable at once, durable with the next fsynced
    /// commit or [`Store::sync`] (or the periodic fsync).
    pub fn commit_buffered(&self, writes: &[ObjectWrite]) -> Result<(), StorageError> {
        self.write(writes, PersistMode::Buffer)
    }

    /// Whether each [`Store::commit`] is fsynced ([`FsyncPolicy::Always`]): then a caller that
    /// writes with [`Store::commit_buffered`] makes its writes durable with [`Store::sync`].
    pub fn syncs_commits(&self) -> bool {
        self.fsync == FsyncPolicy::Always
    }

    /// Makes every batch written so far durable (one fdatasync of the journal) under
    /// [`FsyncPolicy::Always`]; under the other policies does nothing (their own fsyncs do).
    /// Safe to call from any thread, beside writers: a batch written while it runs may or may
    /// not be covered.
    pub fn sync(&self) -> Result<(), StorageError> {
        self.check_writable()?;
        if !self.syncs_commits() {
            return Ok(());
        }
        self.poison_on_error(self.db.persist(PersistMode::SyncData))
    }

    fn write(&self, writes: &[ObjectWrite], mode: PersistMode) -> Result<(), StorageError> {
        self.check_writable()?;
        if writes.is_empty() {
            return Ok(());
        }
        let spaces = self.spaces.read().expect("lock");
        // Entries to write, in write order; a later write of the same entry replaces the value.
        let mut pending = Pending::default();
        // Log records to write (`Some`) or remove.
        let mut log: Vec<(u64, Option<fjall::Slice>)> = Vec::new();
        for write in writes {
            let (name, old, new, only) = match write {
                ObjectWrite::Log {
                    id,
                    version,
                    space,
                    subspace,
                    remove,
                    insert,
                } => {
                    checked_space(
                        &spaces,
                        space,
                        remove.as_ref(),
                        insert.as_ref(),
                        Some(*subspace),
                    )?;
                    let record = LogRecord {
                        version: *version,
                        space: Cow::Borrowed(space),
                        subspace: *subspace,
                        remove: remove.as_ref().map(Cow::Borrowed),
                        insert: insert.as_ref().map(Cow::Borrowed),
                    };
                    let mut value = vec![LOG_FORMAT];
                    postcard::to_io(&record, &mut value).expect("writing to a Vec cannot fail");
                    log.push((*id, Some(value.into())));
                    continue;
                }
                ObjectWrite::Unlog { id } => {
                    log.push((*id, None));
                    continue;
                }
                ObjectWrite::Put { space, old, new } => (space, old.as_ref(), Some(new), None),
                ObjectWrite::Delete { space, old } => (space, Some(old), None, None),
                ObjectWrite::Entry {
                    space,
                    subspace,
                    remove,
                    insert,
                } => (space, remove.as_ref(), insert.as_ref(), Some(*subspace)),
                ObjectWrite::ClearRegion {
                    space: name,
                    subspace,
                    region,
                } => {
                    let space = spaces
                        .get(name.as_str())
                        .ok_or_else(|| StorageError::UnknownSpace(name.clone()))?;
                    let n = subspace.get();
                    let (keyspace, _) = space.region(*subspace, *region)?;
                    for guard in keyspace.prefix(codec::region_prefix(*region)) {
                        let key = guard.key()?;
                        pending.set(name, n, keyspace, key.to_vec(), None);
                    }
                    continue;
                }
                ObjectWrite::ReplaceRange {
                    space: name,
                    subspace,
                    region,
                    after,
                    through,
                    entries,
                    keep,
                } => {
                    let space = spaces
                        .get(name.as_str())
                        .ok_or_else(|| StorageError::UnknownSpace(name.clone()))?;
                    let chunk = replace::Chunk {
                        subspace: *subspace,
                        region: *region,
                        after: after.as_deref(),
                        through: through.as_deref(),
                        entries,
                        keep,
                    };
                    replace::replace_range(&mut pending, name, space, &chunk)?;
                    continue;
                }
            };
            let space = checked_space(&spaces, name, old, new, only)?;
            // Encoded once: every subspace entry shares these bytes (a reference-counted slice).
            let value = new.map(|n| fjall::Slice::from(codec::encode_value(n)));
            for (n, (keyspace, tessellation)) in
                space.keyspaces.iter().zip(&space.tessellations).enumerate()
            {
                // A dropped subspace is written no more.
                let Some(keyspace) = keyspace else { continue };
                let subspace = SubspaceId(n as u16);
                if only.is_some_and(|o| o != subspace) {
                    continue;
                }
                let entry_of =
                    |o: &Object| codec::entry_key(&space.schema, subspace, tessellation, o);
                let new_key = new.and_then(|n| entry_of(&n.object));
                if let Some(old_key) = old
                    .and_then(entry_of)
                    .filter(|k| Some(k) != new_key.as_ref())
                {
                    pending.set(name, n, keyspace, old_key, None);
                }
                if let (Some(new_key), Some(new)) = (new_key, new) {
                    debug_assert!(value.is_some() && new.version != Version::NONE);
                    // A pointer overlay stores the stub: the same entry key, less of the value.
                    let value = match new.object.stub_in(&space.schema, subspace) {
                        Some(stub) => {
                            Some(fjall::Slice::from(codec::encode_value(&StoredObject {
                                version: new.version,
                                object: stub,
                            })))
                        }
                        None => value.clone(),
                    };
                    pending.set(name, n, keyspace, new_key, value);
                }
            }
        }
        let kept = self.versions.kept_subspaces();
        let written = (!kept.is_empty()).then(|| written_entries(&spaces, &pending, &kept));
        let mut batch = self.db.batch().durability(Some(mode));
        let mut touched: Vec<&Keyspace> = Vec::new();
        let entries_written = pending.entries.len() as u64;
        for (keyspace, key, value) in pending.entries {
            if !touched.iter().any(|k| std::ptr::eq(*k, keyspace)) {
                touched.push(keyspace);
            }
            match value {
                Some(value) => batch.insert(keyspace, key, value),
                None => batch.remove(keyspace, key),
            }
        }
        if !log.is_empty() {
            touched.push(&self.log);
        }
        for (id, value) in log {
            match value {
                Some(value) => batch.insert(&self.log, id.to_be_bytes().to_vec(), value),
                None => batch.remove(&self.log, id.to_be_bytes().to_vec()),
            }
        }
        self.poison_on_error(batch.commit())?;
        if let Some(written) = &written {
            self.versions.note(written);
        }
        for keyspace in touched {
            rotate_if_full(keyspace)?;
        }
        self.counters.commits.fetch_add(1, Ordering::Relaxed);
        self.counters
            .object_writes
            .fetch_add(writes.len() as u64, Ordering::Relaxed);
        self.counters
            .entries_written
            .fetch_add(entries_written, Ordering::Relaxed);
        Ok(())
    }

    /// Every stored object of `regions` of `subspace` whose point lies in the inclusive box
    /// `[lo, hi]`, read from one consistent snapshot, each once. The caller filters by its
    /// predicates afterwards (string hash collisions, attributes that are not dimensions).
    pub fn search(
        &self,
        space: &str,
        subspace: SubspaceId,
        regions: &[RegionIndex],
        lo: &[u64],
        hi: &[u64],
    ) -> Result<SearchIter, StorageError> {
        if lo.len() != hi.len() {
            return Err(StorageError::Invalid(format!(
                "a box of {} lower and {} upper bounds",
                lo.len(),
                hi.len()
            )));
        }
        let search_box = SearchBox {
            ranges: lo.iter().copied().zip(hi.iter().copied()).collect(),
        };
        self.search_boxes(space, subspace, regions, std::slice::from_ref(&search_box))
    }

    /// Every stored object of `regions` of `subspace` whose point lies in one of `boxes`,
    /// read from one consistent snapshot (a dynamic space's search reads one box per shape).
    /// An object in several overlapping boxes comes once per box: the caller, which filters
    /// anyway, drops repeats.
    pub fn search_boxes(
        &self,
        space: &str,
        subspace: SubspaceId,
        regions: &[RegionIndex],
        boxes: &[SearchBox],
    ) -> Result<SearchIter, StorageError> {
        let space = self.space(space)?;
        let n = subspace.get();
        let (keyspace, tessellation) = space.subspace(subspace)?;
        let d = tessellation.dimensions();
        if let Some(b) = boxes.iter().find(|b| b.dimensions() != d) {
            return Err(StorageError::Invalid(format!(
                "subspace {n} has {d} dimensions, the box {}",
                b.dimensions()
            )));
        }
        if let Some(r) = regions.iter().find(|r| r.0 >= tessellation.regions_count()) {
            return Err(StorageError::Invalid(format!(
                "subspace {n} has no region {}",
                r.0
            )));
        }
        let mut regions = regions.to_vec();
        regions.sort_unstable();
        regions.dedup();
        // Clip each box to each region; drop the pairs that miss.
        let clipped = regions
            .into_iter()
            .flat_map(|region| {
                let bounds = tessellation.region_bounds(region);
                boxes.iter().filter_map(move |b| {
                    let (lo, hi): (Vec<u64>, Vec<u64>) = b
                        .ranges
                        .iter()
                        .zip(&bounds)
                        .map(|(r, b)| (r.0.max(b.0), r.1.min(b.1)))
                        .unzip();
                    lo.iter()
                        .zip(&hi)
                        .all(|(l, h)| l <= h)
                        .then_some(RegionBox { region, lo, hi })
                })
            })
            .collect();
        self.counters.searches.fetch_add(1, Ordering::Relaxed);
        Ok(SearchIter::new(
            self.db.snapshot(),
            keyspace.clone(),
            (subspace == SubspaceId::KEY).then(|| tessellation.clone()),
            clipped,
            self.counters.clone(),
        ))
    }

    /// Approximate number of entries each space holds in each subspace it stores (a subspace's
    /// entries are its copies of the objects of the regions this store holds), by space name.
    pub fn entries_estimate(&self) -> Vec<(String, Vec<(SubspaceId, u64)>)> {
        let spaces = self.spaces.read().expect("lock");
        spaces
            .values()
            .map(|s| {
                let per_subspace = s
                    .keyspaces
                    .iter()
                    .enumerate()
                    .filter_map(|(n, k)| {
                        let k = k.as_ref()?;
                        Some((SubspaceId(n as u16), k.approximate_len() as u64))
                    })
                    .collect();
                (s.schema.name.clone(), per_subspace)
            })
            .collect()
    }

    pub fn stats(&self) -> StoreStats {
        let c = &self.counters;
        let spaces = self.spaces.read().expect("lock");
        let keyspaces = || spaces.values().flat_map(|s| s.keyspaces.iter().flatten());
        StoreStats {
            memtable_bytes: keyspaces().map(|k| k.tree.active_memtable().size()).sum(),
            sorted_runs: keyspaces().map(|k| runs_of(k).runs as u64).sum(),
            keys_scanned: c.keys_scanned.load(Ordering::Relaxed),
            keys_passed: c.keys_passed.load(Ordering::Relaxed),
            scans_opened: c.scans_opened.load(Ordering::Relaxed),
            searches: c.searches.load(Ordering::Relaxed),
            commits: c.commits.load(Ordering::Relaxed),
            object_writes: c.object_writes.load(Ordering::Relaxed),
            entries_written: c.entries_written.load(Ordering::Relaxed),
            objects_count_estimate: spaces
                .values()
                .map(|s| {
                    s.keyspaces[0]
                        .as_ref()
                        .map_or(0, |k| k.approximate_len() as u64)
                })
                .sum(),
        }
    }

    fn space(&self, name: &str) -> Result<Arc<Space>, StorageError> {
        let spaces = self.spaces.read().expect("lock");
        spaces
            .get(name)
            .cloned()
            .ok_or_else(|| StorageError::UnknownSpace(name.to_owned()))
    }

    /// Fails every later write from now on, exactly as after a failed write or fsync (the store
    /// is poisoned): for tests of what runs above the store.
    #[cfg(feature = "fault-injection")]
    #[doc(hidden)]
    pub fn inject_failure(&self) {
        self.poisoned.store(true, Ordering::Release);
    }

    fn check_writable(&self) -> Result<(), StorageError> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(StorageError::Poisoned);
        }
        Ok(())
    }

    /// Poisons the store if `result` is an engine error: its state on disk is unknown.
    fn poison_on_error<T>(&self, result: Result<T, fjall::Error>) -> Result<T, StorageError> {
        result.map_err(|e| {
            self.poisoned.store(true, Ordering::Release);
            StorageError::from(e)
        })
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        for ticker in &mut self.tickers {
            *ticker.stop.0.lock().expect("lock") = true;
            ticker.stop.1.notify_all();
            if let Some(thread) = ticker.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

type PendingEntry<'a> = (&'a Keyspace, Vec<u8>, Option<fjall::Slice>);

/// A commit's storage entries in write order; a later write of an entry replaces its value, so
/// the batch holds each entry once (fjall gives a whole batch one sequence number).
#[derive(Default)]
struct Pending<'a> {
    /// (keyspace, storage key, value or `None` to remove).
    entries: Vec<PendingEntry<'a>>,
    /// (space, subspace, storage key) to its index in `entries`.
    index: HashMap<(&'a str, usize, Vec<u8>), usize>,
}

impl<'a> Pending<'a> {
    fn set(
        &mut self,
        space: &'a str,
        subspace: usize,
        keyspace: &'a Keyspace,
        key: Vec<u8>,
        value: Option<fjall::Slice>,
    ) {
        match self.index.entry((space, subspace, key.clone())) {
            Entry::Occupied(slot) => self.entries[*slot.get()].2 = value,
            Entry::Vacant(slot) => {
                slot.insert(self.entries.len());
                self.entries.push((keyspace, key, value));
            }
        }
    }
}

/// The space named `name`, once the change from `old` to `new` (of one subspace, if `only`)
/// fits it: what `Store::commit` checks of every entry it writes or logs.
fn checked_space<'s>(
    spaces: &'s BTreeMap<String, Arc<Space>>,
    name: &str,
    old: Option<&Object>,
    new: Option<&StoredObject>,
    only: Option<SubspaceId>,
) -> Result<&'s Arc<Space>, StorageError> {
    let space = spaces
        .get(name)
        .ok_or_else(|| StorageError::UnknownSpace(name.to_owned()))?;
    check_write(&space.schema, old, new)?;
    if let Some(only) = only {
        space.subspace(only)?;
    }
    Ok(space)
}

/// Where the key bytes start in an entry of `subspace`: after the region, and after the point
/// but in the key subspace.
fn key_offset(subspace: SubspaceId, tessellation: &Tessellation) -> usize {
    match subspace {
        SubspaceId::KEY => codec::REGION_BYTES,
        _ => codec::REGION_BYTES + 8 * tessellation.dimensions(),
    }
}

/// What a commit of `pending` writes to the subspaces `kept`, as [`RegionVersions::note`]
/// takes it.
fn written_entries(
    spaces: &BTreeMap<String, Arc<Space>>,
    pending: &Pending,
    kept: &[(String, usize)],
) -> Vec<versions::Written> {
    pending
        .index
        .iter()
        .filter(|((space, n, _), _)| kept.iter().any(|(s, k)| s == space && k == n))
        .filter_map(|((space, n, entry), &i)| {
            let tessellation = spaces.get(*space)?.tessellations.get(*n)?;
            let key_at = key_offset(SubspaceId(*n as u16), tessellation);
            let version = match &pending.entries[i].2 {
                Some(value) => Some(codec::value_version(value).ok()?),
                None => None,
            };
            Some(versions::Written {
                space: (*space).to_owned(),
                subspace: *n,
                entry: entry.clone(),
                key_at,
                version,
            })
        })
        .collect()
}

/// Seals `keyspace`'s memtable (queued for a flush) once it holds [`MEMTABLE_ROTATE_BYTES`]:
/// see there for why the store does this rather than fjall.
fn rotate_if_full(keyspace: &Keyspace) -> Result<(), fjall::Error> {
    if keyspace.tree.active_memtable().size() >= MEMTABLE_ROTATE_BYTES {
        keyspace.rotate_memtable()?;
    }
    Ok(())
}

fn open_space(db: &Database, schema: SpaceSchema) -> Result<Space, fjall::Error> {
    let tessellations = tessera_geometry::tessellations(&schema);
    let keyspaces = schema
        .subspaces
        .iter()
        .enumerate()
        .map(|(n, s)| {
            s.is_written()
                .then(|| db.keyspace(&keyspace_name(&schema.name, n), keyspace_options))
                .transpose()
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Space {
        schema,
        tessellations,
        keyspaces,
    })
}

fn decode_schema(bytes: &[u8]) -> Result<SpaceSchema, StorageError> {
    match bytes.split_first() {
        Some((&CATALOG_FORMAT, rest)) => postcard::from_bytes(rest)
            .map_err(|e| StorageError::Corrupt(format!("undecodable catalog entry: {e}"))),
        Some((format, _)) => Err(StorageError::Corrupt(format!(
            "catalog entry of format {format}, this build reads format {CATALOG_FORMAT}: the data directory was written by another version of Tessera"
        ))),
        None => Err(StorageError::Corrupt("empty catalog entry".to_owned())),
    }
}

/// The objects of one write fit the schema and name the same key.
fn check_write(
    schema: &SpaceSchema,
    old: Option<&Object>,
    new: Option<&StoredObject>,
) -> Result<(), StorageError> {
    let invalid = |what: String| {
        Err(StorageError::Invalid(format!(
            "{what} in space {:?}",
            schema.name
        )))
    };
    for o in old.into_iter().chain(new.map(|n| &n.object)) {
        if !o.conforms_to(schema) || o.values.iter().any(Value::contains_nan) {
            return invalid(format!("object {o:?} does not fit the schema"));
        }
    }
    if let (Some(old), Some(new)) = (old, new) {
        if old.key() != new.object.key() {
            return invalid(format!(
                "a put changes key {} into {}",
                old.key(),
                new.object.key()
            ));
        }
    }
    if new.is_some_and(|n| n.version == Version::NONE) {
        return invalid("version 0 names no object".to_owned());
    }
    Ok(())
}

/// Starts a thread named `name` that runs `task` every `period` until the store is dropped.
fn start_ticker(name: &str, period: Duration, mut task: impl FnMut() + Send + 'static) -> Ticker {
    let stop = Arc::new((Mutex::new(false), Condvar::new()));
    let signal = stop.clone();
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let (lock, condvar) = &*signal;
            let mut stopped = lock.lock().expect("lock");
            while !*stopped {
                stopped = condvar.wait_timeout(stopped, period).expect("lock").0;
                if !*stopped {
                    task();
                }
            }
        })
        .expect("spawning a store thread");
    Ticker {
        stop,
        thread: Some(thread),
    }
}

/// Starts the thread that runs [`seal_quiet_memtables`] every [`QUIET_PERIOD`], until the
/// store is poisoned: a seal writes to the journal, whose state on disk is unknown then.
fn start_sealer(spaces: Spaces, log: Keyspace, poisoned: Arc<AtomicBool>) -> Ticker {
    let mut last_sizes = HashMap::new();
    start_ticker("tessera-sealer", QUIET_PERIOD, move || {
        if poisoned.load(Ordering::Acquire) {
            return;
        }
        let spaces = spaces.read().expect("lock").clone();
        let keyspaces: Vec<&Keyspace> = spaces
            .values()
            .flat_map(|s| s.keyspaces.iter().flatten())
            .chain([&log])
            .collect();
        merge_quiet_keyspaces(&keyspaces, &last_sizes);
        seal_quiet_memtables(keyspaces.into_iter(), &mut last_sizes);
    })
}

/// Whether a quiet keyspace is worth merging into one sorted run: it has two runs or more (a
/// search's scan merges and seeks in each) and those above the bottom one hold at least
/// 1/[`QUIET_MERGE_SHARE`] of its bytes. Each byte flushed is rewritten by at most one such
/// merge before it lies in the bottom run, so merges cost at most [`QUIET_MERGE_SHARE`] times
/// the bytes written: a bulk load is merged once after it, a trickle of writes (whose small
/// tables fjall's leveled compaction moves down) never.
pub fn merge_worth_it(runs: usize, upper_bytes: u64, keyspace_bytes: u64) -> bool {
    runs >= 2 && upper_bytes.saturating_mul(QUIET_MERGE_SHARE) >= keyspace_bytes
}

/// A keyspace's tables as sorted runs (see [`merge_worth_it`]).
struct Runs {
    runs: usize,
    /// Bytes in every run but the bottom one.
    upper_bytes: u64,
    bytes: u64,
}

fn runs_of(keyspace: &Keyspace) -> Runs {
    let version = keyspace.tree.current_version();
    let levels: Vec<_> = version.iter_levels().filter(|l| !l.is_empty()).collect();
    let bytes = levels.iter().map(|l| l.size()).sum();
    let bottom = levels
        .last()
        .filter(|l| l.run_count() == 1)
        .map_or(0, |l| l.size());
    Runs {
        runs: levels.iter().map(|l| l.run_count()).sum(),
        upper_bytes: bytes - bottom,
        bytes,
    }
}

/// Merges every keyspace that no write reached for a [`QUIET_PERIOD`] (its active memtable the
/// size `last_sizes` saw, nothing sealed waiting for a flush) and that [`merge_worth_it`], by
/// fjall's major compaction, on this thread.
///
/// Why: after a load, a keyspace's data lies in 2–3 overlapping runs until more writes come;
/// every scan a search opens merges them. Merged, searches cost 21–41 % less server CPU
/// (docs/benchmarks.md, "Merging quiet keyspaces").
fn merge_quiet_keyspaces(keyspaces: &[&Keyspace], last_sizes: &HashMap<String, u64>) {
    for keyspace in keyspaces {
        let tree = &keyspace.tree;
        let size = tree.active_memtable().size();
        let quiet = last_sizes.get(&keyspace.name().to_string()) == Some(&size)
            && size < QUIET_SEAL_MIN_BYTES
            && tree.sealed_memtable_count() == 0;
        if !quiet {
            continue;
        }
        let Runs {
            runs,
            upper_bytes,
            bytes,
        } = runs_of(keyspace);
        if merge_worth_it(runs, upper_bytes, bytes) {
            // A failed merge leaves the tables as they were: searches only read them slower.
            let _ = keyspace.major_compact();
        }
    }
}

/// Seals the memtable of every keyspace that holds at least [`QUIET_SEAL_MIN_BYTES`] in it and
/// grew by less than 1/32 of that over the last [`QUIET_PERIOD`] (`last_sizes`: the sizes seen a
/// period ago, by keyspace name), so fjall flushes it to a table.
///
/// Why: reading an entry from a memtable (a skip list) costs 1.3–1.7 times reading it from a
/// table's block (`examples/scan_cost.rs`: 370–440 against 260–280 ns per entry), and only
/// writes fill a memtable to its sealing size. Once writes stop or slow to a trickle, searches
/// would read the last megabytes written from the skip list for ever. (In `tessera bench -w
/// secondary`, sealing cut the server's CPU per `city = C` search by 28 %: docs/benchmarks.md.)
fn seal_quiet_memtables<'a>(
    keyspaces: impl Iterator<Item = &'a Keyspace>,
    last_sizes: &mut HashMap<String, u64>,
) {
    let mut seen = HashMap::new();
    for keyspace in keyspaces {
        let size = keyspace.tree.active_memtable().size();
        let name = keyspace.name().to_string();
        let before = last_sizes.get(&name).copied().unwrap_or(0);
        if size >= QUIET_SEAL_MIN_BYTES && size.saturating_sub(before) < size / 32 {
            // A failed rotation leaves the memtable where it was: searches only read it slower.
            let _ = keyspace.rotate_memtable();
        }
        seen.insert(name, keyspace.tree.active_memtable().size());
    }
    *last_sizes = seen;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::{Attribute, AttributeType};

    /// A store in `dir` with one space `s` of a key alone, of type `key`.
    fn store_of_keys(dir: &Path, key: AttributeType) -> (Store, SpaceSchema) {
        let store = Store::open(dir, StoreOptions::default()).unwrap();
        let schema = SpaceSchema::new("s", Attribute::new("k", key), vec![], vec![], 4, 0).unwrap();
        store.create_space(&schema).unwrap();
        (store, schema)
    }

    proptest::proptest! {
        /// Whatever the sizes flushed, merges rewrite at most QUIET_MERGE_SHARE times the bytes
        /// flushed. The model: a keyspace of `settled` bytes in its bottom run and upper runs
        /// of flushed tables, which fjall's leveled compaction moves to the bottom at four (not
        /// counted: the bound is on what the merges add); after each flush the keyspace is
        /// quiet and merged if worth it, which rewrites all of it.
        #[test]
        fn merges_rewrite_at_most_a_bounded_multiple_of_what_was_flushed(
            start in 0u64..1 << 40,
            flushes in proptest::collection::vec(1u64..1 << 30, 1..200),
        ) {
            let (mut settled, mut level0, mut flushed, mut rewritten) =
                (start, Vec::<u64>::new(), 0u64, 0u64);
            for bytes in flushes {
                level0.push(bytes);
                flushed += bytes;
                let l0: u64 = level0.iter().sum();
                if merge_worth_it(level0.len(), l0, settled + l0) {
                    rewritten += settled + l0;
                    settled += l0;
                    level0.clear();
                } else if level0.len() >= 4 {
                    settled += l0;
                    level0.clear();
                }
            }
            proptest::prop_assert!(rewritten <= QUIET_MERGE_SHARE * flushed);
        }
    }

    #[test]
    fn a_merge_needs_two_runs_and_an_eighth_of_the_keyspace_above_the_bottom() {
        assert!(!merge_worth_it(1, 100, 100), "one run already");
        assert!(merge_worth_it(2, 100, 100), "a load: everything in level 0");
        assert!(merge_worth_it(2, 100, 800));
        assert!(!merge_worth_it(3, 99, 800), "a trickle's small runs");
    }

    #[test]
    fn a_poisoned_store_refuses_writes_and_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let (store, schema) = store_of_keys(dir.path(), AttributeType::INT);
        let object = Object {
            values: vec![Value::Int(1)],
        };
        let write = ObjectWrite::Put {
            space: "s".into(),
            old: None,
            new: StoredObject {
                version: Version(1),
                object,
            },
        };
        store.commit(std::slice::from_ref(&write)).unwrap();
        // What `poison_on_error` does when the engine fails a write or an fsync.
        assert!(matches!(
            store.poison_on_error::<()>(Err(fjall::Error::Poisoned)),
            Err(StorageError::Poisoned)
        ));
        assert!(matches!(
            store.commit(&[write]),
            Err(StorageError::Poisoned)
        ));
        assert!(matches!(store.commit(&[]), Err(StorageError::Poisoned)));
        assert!(matches!(
            store.create_space(&SpaceSchema {
                name: "t".into(),
                ..schema
            }),
            Err(StorageError::Poisoned)
        ));
        assert!(matches!(store.drop_space("s"), Err(StorageError::Poisoned)));
        assert_eq!(
            store.get("s", &Value::Int(1)).unwrap().unwrap().version,
            Version(1)
        );
        assert_eq!(store.spaces().len(), 1);
    }

    #[test]
    fn a_poisoned_store_seals_no_memtable() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = store_of_keys(dir.path(), AttributeType::STRING);
        // ~600 KiB in the key subspace's memtable: enough to be sealed once quiet.
        let writes: Vec<_> = (0..1_000)
            .map(|n| ObjectWrite::Put {
                space: "s".into(),
                old: None,
                new: StoredObject {
                    version: Version(1),
                    object: Object {
                        values: vec![Value::from(format!("{n:04}{}", "x".repeat(600)))],
                    },
                },
            })
            .collect();
        store.commit(&writes).unwrap();
        let filled = store.stats().memtable_bytes;
        assert!(
            filled >= QUIET_SEAL_MIN_BYTES,
            "only {filled} bytes written"
        );
        let _ = store.poison_on_error::<()>(Err(fjall::Error::Poisoned));
        // A healthy store would have sealed it within two periods (tests/write_buffers.rs).
        std::thread::sleep(QUIET_PERIOD * 4);
        assert_eq!(store.stats().memtable_bytes, filled);
    }

    /// A state transfer must not ship an object that does not belong at its entry: the
    /// receiver would file it elsewhere, and the region would silently differ.
    #[test]
    fn region_entries_refuses_an_entry_that_is_not_where_its_object_belongs() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        let key = Attribute::new("k", AttributeType::INT);
        let schema = SpaceSchema::new("s", key, vec![], vec![], 4, 0).unwrap();
        store.create_space(&schema).unwrap();
        let stored = StoredObject {
            version: Version(1),
            object: Object {
                values: vec![Value::Int(1)],
            },
        };
        let home = key_region(&Tessellation::new(1, 4), &Value::Int(1));
        let elsewhere = RegionIndex((home.0 + 1) % 4);
        let read = |region| store.region_entries("s", SubspaceId::KEY, region, None, 0);
        // Filed under another region's prefix, as a corrupted or misdirected write would.
        let mut wrong = codec::region_prefix(elsewhere).to_vec();
        wrong.extend_from_slice(&codec::key_bytes(&Value::Int(1)));
        let keyspace = store.space("s").unwrap().keyspaces[0].clone().unwrap();
        keyspace
            .insert(&wrong, codec::encode_value(&stored))
            .unwrap();
        assert!(matches!(read(elsewhere), Err(StorageError::Corrupt(_))));
        // Where it belongs, it is read back.
        keyspace.remove(&wrong).unwrap();
        let mut right = codec::region_prefix(home).to_vec();
        right.extend_from_slice(&codec::key_bytes(&Value::Int(1)));
        keyspace
            .insert(&right, codec::encode_value(&stored))
            .unwrap();
        assert_eq!(read(home).unwrap().entries, vec![stored]);
        // An object that does not fit the schema.
        let misfit = StoredObject {
            version: Version(1),
            object: Object {
                values: vec![Value::Int(1), Value::Int(2)],
            },
        };
        keyspace
            .insert(&right, codec::encode_value(&misfit))
            .unwrap();
        assert!(matches!(read(home), Err(StorageError::Corrupt(_))));
    }
}
