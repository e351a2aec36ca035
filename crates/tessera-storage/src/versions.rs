//! Which version of each key a region of a subspace stores, kept in memory for the regions a
//! chain hop asks about ([`crate::Store::region_entry_version`]).
//!
//! Within a region, entries are ordered by point, not by key: finding a key's entry without
//! knowing its point means reading the region whole. A hop of a subspace being built asks that
//! for nearly every update it receives (an insert or a backfill's rewrite whose entry is not
//! there yet: was it superseded by a later update at another point?), so a build read its
//! regions once per update, quadratic in their size. Here a region is read once, the first time
//! it is asked about, into a map from key bytes to version, and every commit after that keeps
//! the map equal to what the region stores.
//!
//! Memory: only regions still asked about stay. A region is forgotten once commits have written
//! to it an eighth as many times as it holds keys with no question in between (its subspace's
//! build is over): reading it again if asked later costs at most eight entries per write it was
//! spared. And at most [`KEYS_MAX`] keys (about 100 bytes each) are kept over all regions when
//! a region is read: past it, the regions asked about longest ago are forgotten first. During a
//! build the kept regions grow with every insert into them (checking the cap on each commit
//! would make the build read its regions again and again): docs/benchmarks.md, "Memory, third
//! session".

use std::collections::HashMap;
use std::sync::Mutex;

use tessera_types::Version;

use crate::codec::REGION_BYTES;

/// Keys kept over all regions.
pub(crate) const KEYS_MAX: usize = 1 << 20;

/// Writes a region of few keys takes without a question before it is forgotten.
const UNASKED_WRITES_MIN: usize = 1 << 12;

/// A region of more keys is forgotten after one write per this many keys without a question.
const KEYS_PER_UNASKED_WRITE: usize = 8;

/// A region of a subspace of a space.
type RegionRef = (String, usize, u32);

#[derive(Default)]
pub(crate) struct RegionVersions {
    inner: Mutex<Inner>,
}

struct Inner {
    regions: HashMap<RegionRef, Kept>,
    keys: usize,
    /// [`KEYS_MAX`], smaller in tests.
    keys_max: usize,
    /// Questions asked so far: the clock of `Kept::asked`.
    asks: u64,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            regions: HashMap::new(),
            keys: 0,
            keys_max: KEYS_MAX,
            asks: 0,
        }
    }
}

/// One region kept: its key bytes and versions, and how it has been used since it was read.
struct Kept {
    versions: HashMap<Vec<u8>, Version>,
    /// The value of `Inner::asks` at the last question about this region.
    asked: u64,
    /// Writes since the last question.
    unasked_writes: usize,
}

impl Kept {
    fn idle(&self) -> bool {
        let allowed = self.versions.len() / KEYS_PER_UNASKED_WRITE;
        self.unasked_writes > allowed.max(UNASKED_WRITES_MIN)
    }
}

/// One entry a commit wrote: its storage key (`region | point | key bytes`), where its key
/// bytes start, and the version it stores (`None`: removed).
pub(crate) struct Written {
    pub space: String,
    pub subspace: usize,
    pub entry: Vec<u8>,
    pub key_at: usize,
    pub version: Option<Version>,
}

impl RegionVersions {
    /// The version region `region` stores of the key with bytes `key`, reading the region with
    /// `scan` (key bytes and versions of every entry) if it is not kept.
    pub fn lookup<E>(
        &self,
        region: RegionRef,
        key: &[u8],
        scan: impl FnOnce() -> Result<HashMap<Vec<u8>, Version>, E>,
    ) -> Result<Option<Version>, E> {
        let mut inner = self.inner.lock().expect("versions lock poisoned");
        inner.asks += 1;
        let asks = inner.asks;
        if let Some(kept) = inner.regions.get_mut(&region) {
            kept.asked = asks;
            kept.unasked_writes = 0;
            return Ok(kept.versions.get(key).copied());
        }
        let versions = scan()?;
        let found = versions.get(key).copied();
        inner.make_room(versions.len());
        inner.keys += versions.len();
        let kept = Kept {
            versions,
            asked: asks,
            unasked_writes: 0,
        };
        inner.regions.insert(region, kept);
        Ok(found)
    }

    /// The subspaces (space, subspace) some region of which is kept: a commit notes only
    /// its writes to them.
    pub fn kept_subspaces(&self) -> Vec<(String, usize)> {
        let inner = self.inner.lock().expect("versions lock poisoned");
        let mut kept: Vec<(String, usize)> = inner
            .regions
            .keys()
            .map(|(s, n, _)| (s.clone(), *n))
            .collect();
        kept.sort_unstable();
        kept.dedup();
        kept
    }

    /// Keeps the regions kept equal to storage after a commit of `written`. Removals first: a
    /// key that moved within a region has its old entry removed and its new one stored in the
    /// same commit.
    pub fn note(&self, written: &[Written]) {
        let mut inner = self.inner.lock().expect("versions lock poisoned");
        if inner.regions.is_empty() {
            return;
        }
        let removals = written.iter().filter(|w| w.version.is_none());
        let stores = written.iter().filter(|w| w.version.is_some());
        for w in removals.chain(stores) {
            let Some(region) = w.entry.first_chunk::<REGION_BYTES>() else {
                continue;
            };
            let at = (w.space.clone(), w.subspace, u32::from_be_bytes(*region));
            let Some(key) = w.entry.get(w.key_at..) else {
                continue;
            };
            let Some(kept) = inner.regions.get_mut(&at) else {
                continue;
            };
            let before = kept.versions.len();
            match w.version {
                Some(v) => {
                    kept.versions.insert(key.to_vec(), v);
                }
                None => {
                    kept.versions.remove(key);
                }
            }
            kept.unasked_writes += 1;
            let (after, idle) = (kept.versions.len(), kept.idle());
            inner.keys = inner.keys + after - before;
            if idle {
                inner.keys -= after;
                inner.regions.remove(&at);
            }
        }
    }

    /// Forgets every region of `space` (dropped, or its subspaces changed).
    pub fn forget_space(&self, space: &str) {
        let mut inner = self.inner.lock().expect("versions lock poisoned");
        inner.regions.retain(|(s, _, _), _| s != space);
        inner.keys = inner.regions.values().map(|k| k.versions.len()).sum();
    }
}

impl Inner {
    /// Forgets the regions asked about longest ago until `more` keys fit under `keys_max`.
    fn make_room(&mut self, more: usize) {
        while self.keys + more > self.keys_max {
            let oldest = self
                .regions
                .iter()
                .min_by_key(|(_, kept)| kept.asked)
                .map(|(region, _)| region.clone());
            let Some(kept) = oldest.and_then(|region| self.regions.remove(&region)) else {
                return;
            };
            self.keys -= kept.versions.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(region: u32, keys: std::ops::Range<u32>, version: u64) -> Vec<Written> {
        keys.map(|k| Written {
            space: "s".to_owned(),
            subspace: 1,
            entry: entry(region, 0, &k.to_be_bytes()),
            key_at: REGION_BYTES + 1,
            version: Some(Version(version)),
        })
        .collect()
    }

    fn scanned(keys: std::ops::Range<u32>) -> HashMap<Vec<u8>, Version> {
        keys.map(|k| (k.to_be_bytes().to_vec(), Version(1)))
            .collect()
    }

    /// Whether `region` is kept: a lookup that would have to read it says so.
    fn kept(v: &RegionVersions, region: u32) -> bool {
        let at = ("s".to_owned(), 1, region);
        v.lookup(at, b"?", || Err::<HashMap<_, _>, _>(())).is_ok()
    }

    #[test]
    fn a_region_nobody_asks_about_is_forgotten_after_a_write_per_eight_keys() {
        let v = RegionVersions::default();
        let ask = |region: u32| {
            let at = ("s".to_owned(), 1, region);
            v.lookup(at, b"?", || Ok::<_, ()>(scanned(0..80_000)))
                .unwrap();
        };
        ask(1);
        ask(2);
        // Region 1 is asked about between writes; region 2 only written.
        for version in 2..5 {
            // 4 000 keys written again (the region does not grow).
            v.note(&written(1, 0..4_000, version));
            v.note(&written(2, 0..4_000, version));
            assert!(kept(&v, 1), "asked about after every write: kept");
            let kept_2 = v
                .inner
                .lock()
                .unwrap()
                .regions
                .contains_key(&("s".to_owned(), 1, 2));
            assert_eq!(kept_2, version < 4, "10 000 writes allowed to 80 000 keys");
        }
        assert!(
            !kept(&v, 2),
            "12 000 writes to 80 000 keys, no question: forgotten"
        );
        // A region of few keys lasts UNASKED_WRITES_MIN writes (here: that many new keys).
        let few = || Ok::<_, ()>(scanned(0..10));
        v.lookup(("s".to_owned(), 1, 3), b"?", few).unwrap();
        v.note(&written(3, 0..UNASKED_WRITES_MIN as u32, 2));
        let region_3 = ("s".to_owned(), 1, 3);
        assert!(v.inner.lock().unwrap().regions.contains_key(&region_3));
        v.note(&written(3, 0..1, 3));
        assert!(!kept(&v, 3));
        assert_eq!(v.inner.lock().unwrap().keys, 80_000, "region 1's keys only");
    }

    #[test]
    fn past_the_cap_the_region_asked_about_longest_ago_goes_first() {
        let v = RegionVersions::default();
        v.inner.lock().unwrap().keys_max = 250;
        let read = |region: u32| {
            let at = ("s".to_owned(), 1, region);
            v.lookup(at, b"?", || Ok::<_, ()>(scanned(0..100))).unwrap();
        };
        read(1);
        read(2);
        read(1); // now region 2 is asked about longest ago
        read(3); // 300 keys > 250: one region goes
        assert!(kept(&v, 1) && kept(&v, 3) && !kept(&v, 2));
        assert_eq!(v.inner.lock().unwrap().keys, 200);
    }

    fn entry(region: u32, point: u8, key: &[u8]) -> Vec<u8> {
        let mut e = region.to_be_bytes().to_vec();
        e.push(point);
        e.extend_from_slice(key);
        e
    }

    #[test]
    fn a_kept_region_follows_its_commits() {
        let v = RegionVersions::default();
        let region = ("s".to_owned(), 1, 7);
        let scanned = HashMap::from([(b"a".to_vec(), Version(3))]);
        let found = v.lookup(region.clone(), b"a", || Ok::<_, ()>(scanned));
        assert_eq!(found, Ok(Some(Version(3))));
        // Kept: no second scan.
        let no_scan = || -> Result<HashMap<Vec<u8>, Version>, ()> { panic!("read again") };
        assert_eq!(v.lookup(region.clone(), b"b", no_scan), Ok(None));
        // "a" moves within the region (old entry removed, new stored), "b" arrives; another
        // region's and another space's writes change nothing here.
        let (old_a, new_a, b) = (entry(7, 1, b"a"), entry(7, 9, b"a"), entry(7, 2, b"b"));
        let elsewhere = entry(8, 1, b"a");
        let written = [
            (&new_a, Some(Version(5)), "s"),
            (&old_a, None, "s"),
            (&b, Some(Version(1)), "s"),
            (&elsewhere, None, "s"),
            (&old_a, None, "t"),
        ];
        let written: Vec<Written> = written
            .iter()
            .map(|&(entry, version, space)| Written {
                space: space.to_owned(),
                subspace: 1,
                entry: entry.clone(),
                key_at: REGION_BYTES + 1,
                version,
            })
            .collect();
        v.note(&written);
        assert_eq!(
            v.lookup(region.clone(), b"a", no_scan),
            Ok(Some(Version(5)))
        );
        assert_eq!(
            v.lookup(region.clone(), b"b", no_scan),
            Ok(Some(Version(1)))
        );
        v.forget_space("s");
        let empty = || Ok::<_, ()>(HashMap::new());
        assert_eq!(v.lookup(region, b"a", empty), Ok(None));
    }
}
