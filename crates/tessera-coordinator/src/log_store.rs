//! The durable Raft log and vote.
//!
//! Files in `<data>/raft/`:
//! - `log`: one record per entry, `len: u32 LE | xxh3(payload): u64 LE | payload` (postcard of
//!   the entry), appended and fsynced before openraft hears that the entries are flushed. A torn
//!   tail (a crash mid-append) is cut off on open: those entries were never acknowledged.
//! - `vote`, `purged` (the last purged log id), `committed`: small files replaced atomically;
//!   `vote` and `purged` are fsynced before the call returns, `committed` is not (losing it only
//!   means waiting for the leader to tell the commit index again).
//!
//! Every entry that is not purged is also kept in memory: readers never touch the disk. A
//! coordinator's log is small (a few commands per configuration change, purged after each
//! snapshot).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{AnyError, LogState, RaftLogReader, StorageIOError};
use xxhash_rust::xxh3::xxh3_64;

use crate::fsutil::{blocking, invalid, read_checked, sync_dir, write_atomic};
use crate::raft_types::{Entry, LogId, StorageError, TypeConfig, Vote};

const LOG: &str = "log";
const VOTE: &str = "vote";
const PURGED: &str = "purged";
const COMMITTED: &str = "committed";
const RECORD_HEADER: usize = 12;

/// What readers see.
#[derive(Default)]
struct Memory {
    entries: BTreeMap<u64, Entry>,
    last_purged: Option<LogId>,
    vote: Option<Vote>,
    committed: Option<LogId>,
}

/// The log file and where each entry's record starts in it.
struct Disk {
    dir: PathBuf,
    file: File,
    offsets: BTreeMap<u64, u64>,
    end: u64,
}

#[derive(Clone)]
pub(crate) struct LogStore {
    memory: Arc<Mutex<Memory>>,
    disk: Arc<Mutex<Disk>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the maps half-updated in a way that matters
    // more than the panic itself; keep serving.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn io_err(e: io::Error) -> AnyError {
    AnyError::new(&e)
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, recovering the vote, the purge point, the commit
    /// index and every entry whose record is whole.
    pub(crate) fn open(dir: &Path) -> io::Result<LogStore> {
        std::fs::create_dir_all(dir)?;
        let vote = read_checked(&dir.join(VOTE))?
            .map(|b| postcard::from_bytes::<Vote>(&b).map_err(invalid))
            .transpose()?;
        let last_purged = read_checked(&dir.join(PURGED))?
            .map(|b| postcard::from_bytes::<Option<LogId>>(&b).map_err(invalid))
            .transpose()?
            .flatten();
        // Not fsynced, so it may be missing or torn after a crash: then it is simply unknown.
        let committed = read_checked(&dir.join(COMMITTED))
            .ok()
            .flatten()
            .and_then(|b| postcard::from_bytes::<Option<LogId>>(&b).ok())
            .flatten();

        let path = dir.join(LOG);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)?;
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(0))?;
        file.read_to_end(&mut bytes)?;
        let mut entries = BTreeMap::new();
        let mut offsets = BTreeMap::new();
        let mut at = 0usize;
        let mut previous: Option<u64> = None;
        while let Some(header) = bytes.get(at..at + RECORD_HEADER) {
            let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
            let sum = u64::from_le_bytes(header[4..].try_into().expect("8 bytes"));
            let Some(payload) = bytes.get(at + RECORD_HEADER..at + RECORD_HEADER + len) else {
                break;
            };
            if xxh3_64(payload) != sum {
                break;
            }
            let Ok(entry) = postcard::from_bytes::<Entry>(payload) else {
                break;
            };
            let index = entry.log_id.index;
            if previous.is_some_and(|p| p + 1 != index) {
                break;
            }
            previous = Some(index);
            offsets.insert(index, at as u64);
            entries.insert(index, entry);
            at += RECORD_HEADER + len;
        }
        if at < bytes.len() {
            tracing::warn!(path = %path.display(), kept = at, dropped = bytes.len() - at, "cutting a torn tail off the raft log");
            file.set_len(at as u64)?;
            file.sync_all()?;
        }
        if let Some(p) = last_purged {
            entries = entries.split_off(&(p.index + 1));
        }
        tracing::debug!(
            entries = entries.len(),
            ?vote,
            ?last_purged,
            ?committed,
            "opened the raft log"
        );
        Ok(LogStore {
            memory: Arc::new(Mutex::new(Memory {
                entries,
                last_purged,
                vote,
                committed,
            })),
            disk: Arc::new(Mutex::new(Disk {
                dir: dir.to_path_buf(),
                file,
                offsets,
                end: at as u64,
            })),
        })
    }

    /// Makes `entries` readable at once, and returns once they are on disk.
    pub(crate) async fn append_durably(&self, entries: Vec<Entry>) -> io::Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut records = Vec::with_capacity(entries.len());
        for e in &entries {
            records.push((e.log_id.index, postcard::to_allocvec(e).map_err(invalid)?));
        }
        {
            let mut memory = lock(&self.memory);
            for e in entries {
                memory.entries.insert(e.log_id.index, e);
            }
        }
        let disk = self.disk.clone();
        blocking(move || lock(&disk).append(&records)).await
    }

    fn disk_dir(&self) -> PathBuf {
        lock(&self.disk).dir.clone()
    }
}

impl Disk {
    fn append(&mut self, records: &[(u64, Vec<u8>)]) -> io::Result<()> {
        let mut buf = Vec::new();
        let mut offsets = Vec::with_capacity(records.len());
        for (index, payload) in records {
            offsets.push((*index, self.end + buf.len() as u64));
            buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            buf.extend_from_slice(&xxh3_64(payload).to_le_bytes());
            buf.extend_from_slice(payload);
        }
        self.file.write_all(&buf)?;
        self.file.sync_data()?;
        self.end += buf.len() as u64;
        self.offsets.extend(offsets);
        Ok(())
    }

    fn truncate(&mut self, since: u64) -> io::Result<()> {
        let Some((_, &offset)) = self.offsets.range(since..).next() else {
            return Ok(());
        };
        self.file.set_len(offset)?;
        self.file.sync_all()?;
        self.offsets.split_off(&since);
        self.end = offset;
        Ok(())
    }

    /// Rewrites the log without the records up to `upto`, after `purged` records the new
    /// purge point (so a crash in between only leaves records that will be ignored).
    fn purge(&mut self, upto: u64) -> io::Result<()> {
        let start = self
            .offsets
            .range(upto + 1..)
            .next()
            .map(|(_, &o)| o)
            .unwrap_or(self.end);
        let mut tail = Vec::with_capacity((self.end - start) as usize);
        self.file.seek(SeekFrom::Start(start))?;
        (&mut self.file)
            .take(self.end - start)
            .read_to_end(&mut tail)?;
        let tmp = self.dir.join(format!("{LOG}.tmp"));
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            f.write_all(&tail)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, self.dir.join(LOG))?;
        sync_dir(&self.dir)?;
        self.file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(self.dir.join(LOG))?;
        self.offsets = self
            .offsets
            .split_off(&(upto + 1))
            .into_iter()
            .map(|(i, o)| (i, o - start))
            .collect();
        self.end -= start;
        Ok(())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let memory = lock(&self.memory);
        Ok(memory
            .entries
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let memory = lock(&self.memory);
        let last = memory
            .entries
            .last_key_value()
            .map(|(_, e)| e.log_id)
            .or(memory.last_purged);
        Ok(LogState {
            last_purged_log_id: memory.last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let body = postcard::to_allocvec(vote)
            .map_err(|e| StorageIOError::write_vote(AnyError::new(&e)))?;
        let dir = self.disk_dir();
        blocking(move || write_atomic(&dir, VOTE, &body, true))
            .await
            .map_err(|e| StorageIOError::write_vote(io_err(e)))?;
        lock(&self.memory).vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(lock(&self.memory).vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let body = postcard::to_allocvec(&committed)
            .map_err(|e| StorageIOError::write(AnyError::new(&e)))?;
        let dir = self.disk_dir();
        blocking(move || write_atomic(&dir, COMMITTED, &body, false))
            .await
            .map_err(|e| StorageIOError::write(io_err(e)))?;
        lock(&self.memory).committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(lock(&self.memory).committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let result = self.append_durably(entries.into_iter().collect()).await;
        match result {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let err = StorageIOError::write_logs(AnyError::new(&e));
                callback.log_io_completed(Err(e));
                Err(err.into())
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(%log_id, "truncating the raft log");
        let since = log_id.index;
        let disk = self.disk.clone();
        blocking(move || lock(&disk).truncate(since))
            .await
            .map_err(|e| StorageIOError::write_logs(io_err(e)))?;
        lock(&self.memory).entries.split_off(&since);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(%log_id, "purging the raft log");
        let body = postcard::to_allocvec(&Some(log_id))
            .map_err(|e| StorageIOError::write_logs(AnyError::new(&e)))?;
        let disk = self.disk.clone();
        blocking(move || {
            let mut disk = lock(&disk);
            write_atomic(&disk.dir, PURGED, &body, true)?;
            disk.purge(log_id.index)
        })
        .await
        .map_err(|e| StorageIOError::write_logs(io_err(e)))?;
        let mut memory = lock(&self.memory);
        memory.last_purged = Some(log_id);
        memory.entries = memory.entries.split_off(&(log_id.index + 1));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};

    use crate::state::Command;

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Normal(Command::RmSpace {
                name: format!("e{index}"),
            }),
        }
    }

    async fn indexes(store: &mut LogStore) -> Vec<(u64, u64)> {
        store
            .try_get_log_entries(..)
            .await
            .unwrap()
            .iter()
            .map(|e| (e.log_id.leader_id.term, e.log_id.index))
            .collect()
    }

    #[tokio::test]
    async fn entries_vote_and_purge_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(store.get_log_state().await.unwrap(), LogState::default());
        store
            .append_durably((1..=6).map(|i| entry(1, i)).collect())
            .await
            .unwrap();
        let vote = Vote::new(3, 2);
        store.save_vote(&vote).await.unwrap();
        store
            .save_committed(Some(entry(1, 4).log_id))
            .await
            .unwrap();
        // Conflicting entries from a new leader replace 5 and 6.
        store.truncate(entry(1, 5).log_id).await.unwrap();
        store.append_durably(vec![entry(2, 5)]).await.unwrap();
        store.purge(entry(1, 2).log_id).await.unwrap();
        assert_eq!(indexes(&mut store).await, vec![(1, 3), (1, 4), (2, 5)]);
        drop(store);

        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(store.read_vote().await.unwrap(), Some(vote));
        assert_eq!(
            store.read_committed().await.unwrap(),
            Some(entry(1, 4).log_id)
        );
        assert_eq!(indexes(&mut store).await, vec![(1, 3), (1, 4), (2, 5)]);
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(entry(1, 2).log_id));
        assert_eq!(state.last_log_id, Some(entry(2, 5).log_id));
        // Appends after reopening land after the rewritten log.
        store.append_durably(vec![entry(2, 6)]).await.unwrap();
        store.truncate(entry(2, 6).log_id).await.unwrap();
        store
            .append_durably(vec![entry(3, 6), entry(3, 7)])
            .await
            .unwrap();
        drop(store);
        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(
            indexes(&mut store).await,
            vec![(1, 3), (1, 4), (2, 5), (3, 6), (3, 7)]
        );
        // Purging everything leaves the purge point as the last log id.
        store.purge(entry(3, 7).log_id).await.unwrap();
        drop(store);
        let mut store = LogStore::open(dir.path()).unwrap();
        assert!(indexes(&mut store).await.is_empty());
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id, Some(entry(3, 7).log_id));
        store.append_durably(vec![entry(3, 8)]).await.unwrap();
        drop(store);
        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&mut store).await, vec![(3, 8)]);
    }

    #[tokio::test]
    async fn a_torn_tail_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let store = LogStore::open(dir.path()).unwrap();
        store
            .append_durably((1..=3).map(|i| entry(1, i)).collect())
            .await
            .unwrap();
        drop(store);
        let path = dir.path().join(LOG);
        let len = std::fs::metadata(&path).unwrap().len();
        for cut in [1, 5, RECORD_HEADER as u64 + 2] {
            let f = OpenOptions::new().write(true).open(&path).unwrap();
            f.set_len(len - cut).unwrap();
            drop(f);
            let mut store = LogStore::open(dir.path()).unwrap();
            assert_eq!(indexes(&mut store).await, vec![(1, 1), (1, 2)], "cut {cut}");
            // The torn record is gone from the file too: a new append follows entry 2.
            store.append_durably(vec![entry(1, 3)]).await.unwrap();
            drop(store);
            let mut store = LogStore::open(dir.path()).unwrap();
            assert_eq!(indexes(&mut store).await, vec![(1, 1), (1, 2), (1, 3)]);
        }
        // A flipped byte in the middle: everything from that record on is dropped.
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xFF;
        std::fs::write(&path, &bytes).unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        let got = indexes(&mut store).await;
        assert!(
            got.len() < 3 && got.iter().enumerate().all(|(i, e)| *e == (1, i as u64 + 1)),
            "{got:?}"
        );
    }

    #[tokio::test]
    async fn a_corrupt_vote_is_an_error_not_a_silent_reset() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        store.save_vote(&Vote::new(2, 1)).await.unwrap();
        drop(store);
        let path = dir.path().join(VOTE);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(LogStore::open(dir.path()).is_err());
    }
}
