//! Which version of each key a region of a subspace stores, kept in memory for the regions a
//! chain hop asks about ([`crate::Store::region_entry_version`]).
//!
//! Within a region, entries are ordered by point, not by key: finding a key's entry without
//! knowing its point means reading the region whole. A hop of a subspace being built asks that
//! for nearly every update it receives (an insert or a backfill's rewrite whose entry is not
//! there yet: was it superseded by a later update at another point?), so a build read its
//! regions once per update, quadratic in their size. Here a region is read once, the first time
//! it is asked about, into a map from key bytes to version, and every commit after that keeps
//! the map equal to what the region stores. Memory: at most [`KEYS_MAX`] keys over all regions
//! (about 100 bytes each); past it the other regions are forgotten and read again when asked.

use std::collections::HashMap;
use std::sync::Mutex;

use tessera_types::Version;

use crate::codec::REGION_BYTES;

/// Keys kept over all regions.
pub(crate) const KEYS_MAX: usize = 1 << 20;

/// A region of a subspace of a space.
type RegionRef = (String, usize, u32);

#[derive(Default)]
pub(crate) struct RegionVersions {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    regions: HashMap<RegionRef, HashMap<Vec<u8>, Version>>,
    keys: usize,
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
        if let Some(versions) = inner.regions.get(&region) {
            return Ok(versions.get(key).copied());
        }
        let versions = scan()?;
        let found = versions.get(key).copied();
        if inner.keys + versions.len() > KEYS_MAX {
            inner.regions.clear();
            inner.keys = 0;
        }
        inner.keys += versions.len();
        inner.regions.insert(region, versions);
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
            let Some(versions) = inner.regions.get_mut(&at) else {
                continue;
            };
            let before = versions.len();
            match w.version {
                Some(v) => {
                    versions.insert(key.to_vec(), v);
                }
                None => {
                    versions.remove(key);
                }
            }
            let after = versions.len();
            inner.keys = inner.keys + after - before;
        }
    }

    /// Forgets every region of `space` (dropped, or its subspaces changed).
    pub fn forget_space(&self, space: &str) {
        let mut inner = self.inner.lock().expect("versions lock poisoned");
        inner.regions.retain(|(s, _, _), _| s != space);
        inner.keys = inner.regions.values().map(HashMap::len).sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
