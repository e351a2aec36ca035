//! Box searches over one subspace keyspace: one forward pass over the regions to read, in
//! region order, that seeks to the next Z-value inside the box (BIGMIN) whenever it reads an
//! entry outside it.
//!
//! A seek is done by reading on when the target is near: opening a scan of the LSM tree costs a
//! merge of its memtables and tables, about as much as reading a few entries. So a seek first
//! reads up to [`SEEK_BY_READING_MAX`] entries, and only then opens a new scan at its target.
//! Regions of one search share the pass the same way: a region with nothing in the box costs no
//! scan of its own. (Measured on 100 000 objects of two int dimensions and ranges on one of
//! them, ~100 matches: 2 entries was best; 8 cost 10 % more.)

use std::cmp::Ordering as CmpOrdering;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use fjall::{Keyspace, Readable, Slice, Snapshot};
use tessera_geometry::{RegionIndex, Tessellation};
use tessera_types::Version;

use crate::codec::{self, REGION_BYTES};
use tessera_geometry::zorder;

use crate::error::StorageError;
use crate::stats::Counters;
use tessera_types::StoredObject;

/// Entries a seek reads past before it opens a new scan at its target instead.
pub const SEEK_BY_READING_MAX: u32 = 2;

/// An object as storage holds it: its version and its encoded values, not decoded. A search
/// that only passes objects on (to a socket) never decodes them.
#[derive(Clone, Debug)]
pub struct EncodedObject {
    pub version: Version,
    /// The stored value: the version, then `postcard(Object)`.
    value: Slice,
}

impl EncodedObject {
    pub(crate) fn new(value: Slice) -> Result<EncodedObject, StorageError> {
        let version = codec::value_version(&value)?;
        Ok(EncodedObject { version, value })
    }

    /// `stored`, encoded as storage would hold it.
    pub fn from_stored(stored: &StoredObject) -> EncodedObject {
        EncodedObject {
            version: stored.version,
            value: Slice::from(codec::encode_value(stored)),
        }
    }

    /// The object's values, encoded as `postcard(Object)` (a length, then each value).
    pub fn object_bytes(&self) -> &[u8] {
        codec::object_bytes(&self.value)
    }

    pub fn decode(&self) -> Result<StoredObject, StorageError> {
        codec::decode_value(&self.value)
    }
}

/// One region's share of a search: the search box clipped to the region (never empty).
pub(crate) struct RegionBox {
    pub region: RegionIndex,
    pub lo: Vec<u64>,
    pub hi: Vec<u64>,
}

/// Where an entry lies against the box being read.
enum Place {
    Inside,
    /// Before the box's next Z-value inside it, which is this key: seek there.
    Before(Vec<u8>),
    /// Not in the box, nothing to seek to (the key subspace: read on).
    Outside,
    /// Past the box's end: the box is done.
    After,
}

/// The objects a [`crate::Store::search`] finds, streamed from one snapshot of the store: later
/// commits are not seen. The snapshot keeps the versions it sees from being compacted away, so
/// drop the iterator when done rather than keeping it around.
pub struct SearchIter {
    snapshot: Snapshot,
    keyspace: Keyspace,
    /// In the key subspace (whose entries hold no point), its tessellation: where a key lies
    /// on its axis.
    key_axis: Option<Tessellation>,
    /// The boxes to read, in region order (a region's several boxes, if any, in their order).
    boxes: Vec<RegionBox>,
    /// The box being read: `boxes[at]`; done when `at == boxes.len()`.
    at: usize,
    /// The pass, if open: from where it was opened up to `end`.
    scan: Option<fjall::Iter>,
    /// Where every pass ends: past the last entry of every box.
    end: Bound<Vec<u8>>,
    /// A seek by reading under way: entries below this key are passed over.
    seeking: Option<Vec<u8>>,
    /// Entries passed over by the seek under way.
    seek_reads: u32,
    /// Entries this search has read, placed or passed.
    entries_read: u64,
    /// Most entries it may read ([`SearchIter::limit_reads`]); past them it ends early.
    reads_max: u64,
    counters: Arc<Counters>,
    failed: bool,
}

impl SearchIter {
    pub(crate) fn new(
        snapshot: Snapshot,
        keyspace: Keyspace,
        key_axis: Option<Tessellation>,
        boxes: Vec<RegionBox>,
        counters: Arc<Counters>,
    ) -> SearchIter {
        debug_assert!(boxes
            .iter()
            .all(|b| b.lo.iter().zip(&b.hi).all(|(l, h)| l <= h)));
        debug_assert!(boxes.windows(2).all(|w| w[0].region <= w[1].region));
        // The head (region and Z-value) of each box's last entries: every key of the box
        // starts with at most this, so every key of every box sorts below the successor of
        // the greatest.
        let last = boxes
            .iter()
            .map(|b| {
                let mut end = codec::region_prefix(b.region).to_vec();
                if key_axis.is_none() {
                    end.extend_from_slice(&zorder::interleave(&b.hi));
                }
                end
            })
            .max();
        let end = match last.and_then(successor) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        SearchIter {
            end,
            snapshot,
            keyspace,
            key_axis,
            boxes,
            at: 0,
            scan: None,
            seeking: None,
            seek_reads: 0,
            entries_read: 0,
            reads_max: u64::MAX,
            counters,
            failed: false,
        }
    }

    /// Bytes of an entry's key before the object's key: the region, then the Z-value.
    fn head_bytes(&self) -> usize {
        match (&self.key_axis, self.boxes.first()) {
            (None, Some(b)) => REGION_BYTES + 8 * b.lo.len(),
            _ => REGION_BYTES,
        }
    }

    /// The first key of `boxes[i]`'s range.
    fn start_of(&self, i: usize) -> Vec<u8> {
        let b = &self.boxes[i];
        let mut start = codec::region_prefix(b.region).to_vec();
        if self.key_axis.is_none() {
            start.extend_from_slice(&zorder::interleave(&b.lo));
        }
        start
    }

    /// Opens the pass at `start`, up to the end of every box.
    fn open(&mut self, start: Vec<u8>) {
        self.counters.scans_opened.fetch_add(1, Ordering::Relaxed);
        self.scan = Some(
            self.snapshot
                .range(&self.keyspace, (Bound::Included(start), self.end.clone())),
        );
        self.seeking = None;
    }

    /// Where the entry `key` (with `value`) lies against `boxes[self.at]`.
    fn place(&self, key: &[u8], value: &Slice) -> Result<Place, StorageError> {
        let b = &self.boxes[self.at];
        let prefix = codec::region_prefix(b.region);
        match key[..REGION_BYTES].cmp(&prefix) {
            CmpOrdering::Less => return Ok(Place::Before(self.start_of(self.at))),
            CmpOrdering::Greater => return Ok(Place::After),
            CmpOrdering::Equal => {}
        }
        if let Some(axis) = &self.key_axis {
            let stored = codec::decode_value(value)?;
            let c = axis.key_coordinate(stored.object.key());
            return Ok(if b.lo[0] <= c && c <= b.hi[0] {
                Place::Inside
            } else {
                Place::Outside
            });
        }
        let z = &key[REGION_BYTES..self.head_bytes()];
        let mut point = [0u64; zorder::DIMENSIONS_MAX];
        let point = &mut point[..b.lo.len()];
        zorder::deinterleave_into(z, point);
        if point
            .iter()
            .zip(b.lo.iter().zip(&b.hi))
            .all(|(c, (l, h))| l <= c && c <= h)
        {
            return Ok(Place::Inside);
        }
        Ok(match zorder::next_in_box(z, &b.lo, &b.hi) {
            Some(next) => {
                debug_assert!(next.as_slice() > z);
                let mut target = prefix.to_vec();
                target.extend_from_slice(&next);
                Place::Before(target)
            }
            None => Place::After,
        })
    }

    fn step(&mut self) -> Result<Option<EncodedObject>, StorageError> {
        loop {
            if self.at == self.boxes.len() {
                return Ok(None);
            }
            if self.scan.is_none() {
                let start = self.start_of(self.at);
                self.open(start);
            }
            let Some(guard) = self.scan.as_mut().expect("open").next() else {
                // Nothing more up to the end of the last box. The rest of this region's boxes
                // may start behind the pass (a dynamic space's boxes overlap): read them from
                // their starts. Later regions' boxes have nothing.
                self.scan = None;
                let region = self.boxes[self.at].region;
                self.at += 1;
                if self.boxes.get(self.at).is_some_and(|b| b.region == region) {
                    continue;
                }
                self.at = self.boxes.len();
                return Ok(None);
            };
            let (key, value) = guard.into_inner()?;
            self.entries_read += 1;
            if self.entries_read > self.reads_max {
                self.scan = None;
                self.at = self.boxes.len();
                return Ok(None);
            }
            if key.len() <= self.head_bytes() {
                return Err(StorageError::Corrupt(format!(
                    "entry key {key:?} too short for its subspace"
                )));
            }
            if let Some(target) = &self.seeking {
                if key[..] < target[..] {
                    self.counters.keys_passed.fetch_add(1, Ordering::Relaxed);
                    self.seek_reads += 1;
                    if self.seek_reads >= SEEK_BY_READING_MAX {
                        let target = self.seeking.take().expect("seeking");
                        self.open(target);
                    }
                    continue;
                }
                self.seeking = None;
            }
            self.counters.keys_scanned.fetch_add(1, Ordering::Relaxed);
            // Place the entry against the box being read, and the boxes after it while it lies
            // past them.
            loop {
                match self.place(&key, &value)? {
                    Place::Inside => return Ok(Some(EncodedObject::new(value)?)),
                    Place::Outside => break,
                    Place::Before(target) => {
                        // Read on towards it; `open` there if that takes long.
                        debug_assert!(target[..] > key[..]);
                        self.seeking = Some(target);
                        self.seek_reads = 0;
                        break;
                    }
                    Place::After => {
                        self.at += 1;
                        if self.at == self.boxes.len() {
                            self.scan = None;
                            return Ok(None);
                        }
                        // A region's next box may start behind the pass (a dynamic space's
                        // boxes overlap): read it from its start. A later region's box starts
                        // after every entry the pass has read or passed.
                        if self.boxes[self.at].region == self.boxes[self.at - 1].region {
                            let start = self.start_of(self.at);
                            if start[..] <= key[..] {
                                self.open(start);
                                break;
                            }
                        }
                    }
                }
            }
        }
    }

    /// Entries of the store this search has read so far: its cost, whatever it found.
    pub fn entries_read(&self) -> u64 {
        self.entries_read
    }

    /// Ends the search once it has read `n` entries (its cost bounded, not what it finds):
    /// then [`SearchIter::over_limit`] says it ended early.
    pub fn limit_reads(&mut self, n: u64) {
        self.reads_max = n;
    }

    /// Whether the search ended at its [`SearchIter::limit_reads`], not at its last match.
    pub fn over_limit(&self) -> bool {
        self.entries_read > self.reads_max
    }

    /// The next object found, not decoded.
    pub fn next_encoded(&mut self) -> Option<Result<EncodedObject, StorageError>> {
        if self.failed {
            return None;
        }
        let item = self.step().transpose();
        self.failed = matches!(item, Some(Err(_)));
        item
    }
}

impl Iterator for SearchIter {
    type Item = Result<StoredObject, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_encoded()
            .map(|item| item.and_then(|o| o.decode()))
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
