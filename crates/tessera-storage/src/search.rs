//! Box searches over one subspace keyspace: a Z-order range scan per region that seeks to the
//! next Z-value inside the box (BIGMIN) whenever it reads an entry outside it.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use fjall::{Keyspace, Readable, Snapshot};
use tessera_geometry::{RegionIndex, Tessellation};

use crate::codec::{self, REGION_BYTES};
use tessera_geometry::zorder;

use crate::{Counters, StorageError, StoredObject};

/// The objects a [`crate::Store::search`] finds, streamed from one snapshot of the store: later
/// commits are not seen. The snapshot keeps the versions it sees from being compacted away, so
/// drop the iterator when done rather than keeping it around.
pub struct SearchIter {
    snapshot: Snapshot,
    keyspace: Keyspace,
    /// In the key subspace (whose entries hold no point), its tessellation: where a key lies
    /// on its axis.
    key_axis: Option<Tessellation>,
    /// Regions still to scan, each with the search box clipped to it (never empty).
    boxes: VecDeque<(RegionIndex, Vec<u64>, Vec<u64>)>,
    /// The scan of the current region (the front of `boxes`), if open.
    scan: Option<fjall::Iter>,
    counters: Arc<Counters>,
    failed: bool,
}

impl SearchIter {
    pub(crate) fn new(
        snapshot: Snapshot,
        keyspace: Keyspace,
        key_axis: Option<Tessellation>,
        boxes: Vec<(RegionIndex, Vec<u64>, Vec<u64>)>,
        counters: Arc<Counters>,
    ) -> SearchIter {
        debug_assert!(boxes
            .iter()
            .all(|(_, lo, hi)| lo.iter().zip(hi).all(|(l, h)| l <= h)));
        SearchIter {
            snapshot,
            keyspace,
            key_axis,
            boxes: boxes.into(),
            scan: None,
            counters,
            failed: false,
        }
    }

    /// A scan of the current region from `start` (inclusive) to the end of the box's Z-range.
    fn open_scan(&self, start: Vec<u8>) -> fjall::Iter {
        let (region, _, hi) = self.boxes.front().expect("a current region");
        let mut end = codec::region_prefix(*region).to_vec();
        if self.key_axis.is_none() {
            end.extend_from_slice(&zorder::interleave(hi));
        }
        // Every key starting with `end` sorts below the successor of `end`.
        let end = match successor(end) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        self.snapshot
            .range(&self.keyspace, (Bound::Included(start), end))
    }

    fn step(&mut self) -> Result<Option<StoredObject>, StorageError> {
        loop {
            let Some((region, lo, hi)) = self.boxes.front() else {
                return Ok(None);
            };
            let prefix = codec::region_prefix(*region);
            let z_bytes = if self.key_axis.is_some() {
                0
            } else {
                8 * lo.len()
            };
            if self.scan.is_none() {
                let mut start = prefix.to_vec();
                if self.key_axis.is_none() {
                    start.extend_from_slice(&zorder::interleave(lo));
                }
                self.scan = Some(self.open_scan(start));
            }
            let Some(guard) = self.scan.as_mut().expect("open").next() else {
                self.scan = None;
                self.boxes.pop_front();
                continue;
            };
            let (key, value) = guard.into_inner()?;
            self.counters.keys_scanned.fetch_add(1, Ordering::Relaxed);
            if key.len() <= REGION_BYTES + z_bytes || key[..REGION_BYTES] != prefix {
                return Err(StorageError::Corrupt(format!(
                    "entry key {key:?} outside its region's range"
                )));
            }
            if let Some(axis) = &self.key_axis {
                let stored = codec::decode_value(&value)?;
                let c = axis.key_coordinate(stored.object.key());
                if lo[0] <= c && c <= hi[0] {
                    return Ok(Some(stored));
                }
                continue;
            }
            let z = &key[REGION_BYTES..REGION_BYTES + z_bytes];
            let mut point = [0u64; zorder::DIMENSIONS_MAX];
            let point = &mut point[..lo.len()];
            zorder::deinterleave_into(z, point);
            if point
                .iter()
                .zip(lo.iter().zip(hi))
                .all(|(c, (l, h))| l <= c && c <= h)
            {
                return Ok(Some(codec::decode_value(&value)?));
            }
            // Outside the box: jump to the next Z-value inside it, or end this region.
            match zorder::next_in_box(z, lo, hi) {
                Some(next) => {
                    debug_assert!(next.as_slice() > z);
                    let mut start = prefix.to_vec();
                    start.extend_from_slice(&next);
                    self.scan = Some(self.open_scan(start));
                }
                None => {
                    self.scan = None;
                    self.boxes.pop_front();
                }
            }
        }
    }
}

impl Iterator for SearchIter {
    type Item = Result<StoredObject, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.step().transpose();
        self.failed = matches!(item, Some(Err(_)));
        item
    }
}

/// The smallest byte string greater than every string starting with `bytes`, or `None` if
/// `bytes` is all `0xFF`.
pub(crate) fn successor(mut bytes: Vec<u8>) -> Option<Vec<u8>> {
    while let Some(last) = bytes.pop() {
        if last != 0xFF {
            bytes.push(last + 1);
            return Some(bytes);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn successor_skips_trailing_ff() {
        assert_eq!(super::successor(vec![1, 2]), Some(vec![1, 3]));
        assert_eq!(super::successor(vec![1, 0xFF]), Some(vec![2]));
        assert_eq!(super::successor(vec![0xFF, 0xFF]), None);
    }
}
