//! `memory://`: an in-process map behind a mutex. Not a database to compare against — a
//! baseline for the driver's own overhead (generators, histograms, task scheduling), and the
//! target the driver's tests run on without any server.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Target, TargetError};
use crate::workload::{scan_bounds, Record, SCAN_GROUP_SIZE};

/// Shared by all tasks of one run: clones see the same records.
#[derive(Clone, Debug, Default)]
pub struct MemoryTarget {
    records: Arc<Mutex<BTreeMap<u64, Record>>>,
}

impl MemoryTarget {
    pub fn new() -> MemoryTarget {
        MemoryTarget::default()
    }

    /// How many records are stored.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Record>> {
        // A panicking task cannot leave a half-written map: every mutation is one insert.
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Target for MemoryTarget {
    async fn prepare(&mut self) -> Result<(), TargetError> {
        Ok(())
    }

    async fn insert(&mut self, n: u64, record: &Record) -> Result<(), TargetError> {
        self.lock().insert(n, record.clone());
        Ok(())
    }

    async fn read(&mut self, n: u64) -> Result<bool, TargetError> {
        Ok(self.lock().get(&n).is_some())
    }

    async fn update(&mut self, n: u64, field: usize, value: &str) -> Result<(), TargetError> {
        if let Some(r) = self.lock().get_mut(&n) {
            r.fields[field] = value.to_owned();
        }
        Ok(())
    }

    async fn scan(&mut self, n: u64, len: u64) -> Result<u64, TargetError> {
        let (prefix, lo, hi) = scan_bounds(n, len);
        let base = prefix as u64 * SCAN_GROUP_SIZE;
        Ok(self
            .lock()
            .range(base + lo as u64..=base + hi as u64)
            .count() as u64)
    }

    async fn search(&mut self, n: u64) -> Result<u64, TargetError> {
        // Record n is the only one with its (prefix, suffix): the map is keyed by n.
        Ok(u64::from(self.lock().contains_key(&n)))
    }
}
