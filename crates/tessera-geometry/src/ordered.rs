//! An *ordered* placement's key axis (seed 003 §2.1.2): regions are ranges of keys in key
//! order (ints numerically, strings bytewise: [`Value`]'s order), so a range of keys lies in
//! the run of regions it overlaps. Real keys are skewed (user names, timestamps, ids with a
//! common prefix), so the ranges' boundaries are not equal slices of the axis: they are
//! chosen from the keys ([`KeyRanges::from_keys`], quantiles), and a region that outgrows the
//! others is split at its median key ([`KeyRanges::region_to_split`], [`KeyRanges::split`]).
//!
//! Region `i` holds the keys `k` with `bounds[i-1] <= k < bounds[i]`; the first region has no
//! lower bound and the last no upper one, so every key has a region.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use tessera_types::Value;

use crate::tessellation::RegionIndex;

/// A key axis cut into ranges by increasing boundaries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRanges {
    /// Strictly increasing: `regions_count() - 1` boundaries.
    bounds: Vec<Value>,
}

/// A region is split when it holds more than this many times the mean of the others.
pub const SPLIT_FACTOR: u64 = 2;

impl KeyRanges {
    /// One region holding every key.
    pub fn whole() -> KeyRanges {
        KeyRanges { bounds: vec![] }
    }

    /// At most `regions` ranges holding about as many of `keys` each (any order, duplicates
    /// allowed): boundaries at the keys' quantiles. Fewer regions when there are fewer distinct
    /// keys than regions (a boundary is a key, and boundaries differ).
    pub fn from_keys(keys: &[Value], regions: u32) -> KeyRanges {
        assert!(regions >= 1, "a key axis has a region");
        let mut sorted: Vec<&Value> = keys.iter().collect();
        sorted.sort();
        let mut bounds: Vec<Value> = Vec::new();
        for i in 1..u64::from(regions) {
            let at = (sorted.len() as u64 * i / u64::from(regions)) as usize;
            let Some(&candidate) = sorted.get(at) else {
                break;
            };
            // A boundary equal to the previous one would make an empty region; one equal to
            // the first key, a region before every key.
            if bounds.last().is_none_or(|b| b < candidate) && sorted.first() != Some(&candidate) {
                bounds.push(candidate.clone());
            }
        }
        let ranges = KeyRanges { bounds };
        ranges.check();
        ranges
    }

    /// Ranges with these boundaries; `None` unless they strictly increase.
    pub fn with_bounds(bounds: Vec<Value>) -> Option<KeyRanges> {
        bounds
            .windows(2)
            .all(|w| w[0] < w[1])
            .then_some(KeyRanges { bounds })
    }

    pub fn bounds(&self) -> &[Value] {
        &self.bounds
    }

    pub fn regions_count(&self) -> u32 {
        self.bounds.len() as u32 + 1
    }

    /// The region holding `key`.
    pub fn region_of(&self, key: &Value) -> RegionIndex {
        RegionIndex(self.bounds.partition_point(|b| b <= key) as u32)
    }

    /// The regions a range of keys `[from, to)` overlaps, in key order (empty when `from >= to`).
    pub fn regions_overlapping(&self, from: &Value, to: &Value) -> Range<u32> {
        if from >= to {
            return 0..0;
        }
        let first = self.region_of(from).0;
        // The region of the greatest key below `to`: the one `to` opens, unless `to` is its
        // lower bound exactly (then the range ends in the region before).
        let last = self.bounds.partition_point(|b| b < to) as u32;
        first..last + 1
    }

    /// The keys region `r` holds, as (inclusive lower bound, exclusive upper bound), `None`
    /// for an open end.
    pub fn range_of(&self, r: RegionIndex) -> (Option<&Value>, Option<&Value>) {
        let i = r.0 as usize;
        assert!(i < self.bounds.len() + 1, "no region {i}");
        (
            i.checked_sub(1).map(|p| &self.bounds[p]),
            self.bounds.get(i),
        )
    }

    /// The region to split, if any: see [`region_to_split`].
    pub fn region_to_split(&self, counts: &[u64], min_objects: u64) -> Option<RegionIndex> {
        assert_eq!(counts.len(), self.regions_count() as usize);
        region_to_split(counts, min_objects)
    }

    /// The ranges with region `r` split at `at`, which must lie strictly inside it (above its
    /// lower bound, below its upper): the keys below `at` keep index `r`, the others take
    /// `r + 1`, and every later region's index grows by one. `None` when `at` is not inside.
    pub fn split(&self, r: RegionIndex, at: Value) -> Option<KeyRanges> {
        let (lo, hi) = self.range_of(r);
        if lo.is_some_and(|lo| at <= *lo) || hi.is_some_and(|hi| at >= *hi) {
            return None;
        }
        let mut bounds = self.bounds.clone();
        bounds.insert(r.0 as usize, at);
        let ranges = KeyRanges { bounds };
        ranges.check();
        Some(ranges)
    }

    /// Where to split a region holding `keys` (any order): the median distinct key, so the
    /// halves hold about as many; `None` when the keys are all one.
    pub fn split_point(keys: &[Value]) -> Option<Value> {
        let mut sorted: Vec<&Value> = keys.iter().collect();
        sorted.sort();
        let median = sorted.get(sorted.len() / 2)?;
        // The median itself, unless it is the smallest (the lower half would be empty): then
        // the next greater key.
        if Some(median) != sorted.first() {
            return Some((*median).clone());
        }
        sorted.iter().find(|k| **k > *median).map(|k| (*k).clone())
    }

    fn check(&self) {
        debug_assert!(
            self.bounds.windows(2).all(|w| w[0] < w[1]),
            "boundaries increase"
        );
    }
}

/// The region to split, if any, given the objects each region holds (`counts[r]` for region
/// `r`): the fullest when it holds at least `min_objects` and more than [`SPLIT_FACTOR`]
/// times the mean of the other regions (a lone region only needs `min_objects`).
pub fn region_to_split(counts: &[u64], min_objects: u64) -> Option<RegionIndex> {
    let total: u64 = counts.iter().sum();
    let (i, &most) = counts
        .iter()
        .enumerate()
        .max_by_key(|&(i, c)| (c, std::cmp::Reverse(i)))?;
    let others = counts.len() as u64 - 1;
    let over = others == 0 || most * others > SPLIT_FACTOR * (total - most);
    (over && most >= min_objects.max(2)).then_some(RegionIndex(i as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Skewed keys: clusters of ints (timestamps in bursts), or strings with long common
    /// prefixes (user names of a few families), with duplicates.
    fn skewed_keys() -> impl Strategy<Value = Vec<Value>> {
        prop_oneof![
            prop::collection::vec((0i64..4, 0i64..50), 1..400).prop_map(|v| v
                .into_iter()
                .map(|(c, k)| Value::Int(c * 1_000_000_000 + k * k))
                .collect()),
            prop::collection::vec((0usize..3, 0u32..60), 1..400).prop_map(|v| v
                .into_iter()
                .map(|(f, k)| {
                    let family = ["user_aaaaaaaa", "user_aaaaaaab", "zz"][f];
                    Value::String(format!("{family}{k:03}"))
                })
                .collect()),
        ]
    }

    /// The oracle for a key's region: count the boundaries at or below it.
    fn region_by_count(bounds: &[Value], key: &Value) -> u32 {
        bounds.iter().filter(|b| *b <= key).count() as u32
    }

    proptest! {
        /// Quantile boundaries keep order and balance: every region holds at most its share
        /// plus the keys equal to one boundary (duplicates cannot be split apart).
        #[test]
        fn boundaries_from_skewed_keys_keep_order_and_balance(
            keys in skewed_keys(),
            regions in 1u32..20,
        ) {
            let ranges = KeyRanges::from_keys(&keys, regions);
            prop_assert!(ranges.regions_count() <= regions);
            let mut counts = vec![0u64; ranges.regions_count() as usize];
            for k in &keys {
                let r = ranges.region_of(k);
                prop_assert_eq!(r.0, region_by_count(ranges.bounds(), k));
                counts[r.0 as usize] += 1;
            }
            // No empty region, and none holding much more than its share.
            let share = keys.len() as u64 / u64::from(regions) + 1;
            let most_repeated = {
                let mut sorted = keys.clone();
                sorted.sort();
                sorted.chunk_by(|a, b| a == b).map(|c| c.len() as u64).max().unwrap()
            };
            for (i, &c) in counts.iter().enumerate() {
                prop_assert!(c > 0, "region {i} empty: {counts:?}");
                prop_assert!(c <= 2 * share + most_repeated, "region {i}: {counts:?}");
            }
            // Order: a smaller key never lies in a later region.
            let mut sorted = keys.clone();
            sorted.sort();
            for w in sorted.windows(2) {
                prop_assert!(ranges.region_of(&w[0]) <= ranges.region_of(&w[1]));
            }
        }

        /// A range of keys overlaps exactly the regions holding some key in it.
        #[test]
        fn a_key_range_overlaps_the_regions_of_its_keys(
            keys in skewed_keys(),
            regions in 1u32..12,
            from in 0usize..400,
            len in 0usize..400,
        ) {
            let ranges = KeyRanges::from_keys(&keys, regions);
            let mut sorted = keys.clone();
            sorted.sort();
            sorted.dedup();
            let from = &sorted[from % sorted.len()];
            let to = &sorted[(from_index(&sorted, from) + len) % sorted.len()];
            let overlapping = ranges.regions_overlapping(from, to);
            // Brute force: the regions of the keys in [from, to), and of the range's ends.
            for k in sorted.iter().filter(|k| *k >= from && *k < to) {
                prop_assert!(overlapping.contains(&ranges.region_of(k).0));
            }
            if from < to {
                prop_assert_eq!(overlapping.start, ranges.region_of(from).0);
                // The last region overlapped starts below `to`.
                let (lo, _) = ranges.range_of(RegionIndex(overlapping.end - 1));
                prop_assert!(lo.is_none_or(|lo| lo < to));
                if overlapping.end < ranges.regions_count() {
                    let (next_lo, _) = ranges.range_of(RegionIndex(overlapping.end));
                    prop_assert!(next_lo.is_some_and(|lo| lo >= to));
                }
            } else {
                prop_assert!(overlapping.is_empty());
            }
        }

        /// Splitting the fullest region at its median keeps every other key's region (shifted
        /// by one after it) and halves the split one.
        #[test]
        fn splitting_the_fullest_region_halves_it_and_moves_nothing_else(
            keys in skewed_keys(),
        ) {
            // Few regions for many keys: the first key's quarter is crowded on purpose.
            let ranges = KeyRanges::from_keys(&keys[..keys.len().div_ceil(4)], 3);
            let mut counts = vec![0u64; ranges.regions_count() as usize];
            for k in &keys {
                counts[ranges.region_of(k).0 as usize] += 1;
            }
            let Some(r) = ranges.region_to_split(&counts, 2) else {
                // Nothing over the factor: no region holds more than that times the others'
                // mean.
                let total: u64 = counts.iter().sum();
                let others = counts.len() as u64 - 1;
                for c in &counts {
                    prop_assert!(c * others <= SPLIT_FACTOR * (total - c) || *c <= 1);
                }
                return Ok(());
            };
            let inside: Vec<Value> =
                keys.iter().filter(|k| ranges.region_of(k) == r).cloned().collect();
            let Some(at) = KeyRanges::split_point(&inside) else {
                // One key repeated: nothing to split.
                prop_assert!(inside.windows(2).all(|w| w[0] == w[1]));
                return Ok(());
            };
            let split = ranges.split(r, at.clone()).expect("the median lies inside");
            prop_assert_eq!(split.regions_count(), ranges.regions_count() + 1);
            let (mut low, mut high) = (0u64, 0u64);
            for k in &keys {
                let (before, after) = (ranges.region_of(k).0, split.region_of(k).0);
                match before.cmp(&r.0) {
                    std::cmp::Ordering::Less => prop_assert_eq!(after, before),
                    std::cmp::Ordering::Greater => prop_assert_eq!(after, before + 1),
                    std::cmp::Ordering::Equal => {
                        prop_assert!(after == r.0 || after == r.0 + 1);
                        if after == r.0 { low += 1 } else { high += 1 }
                    }
                }
            }
            prop_assert!(low > 0 && high > 0, "both halves hold keys: {low} and {high}");
            // At a boundary already there, or outside the region, a split is refused.
            prop_assert_eq!(split.split(r, at), None);
        }
    }

    fn from_index(sorted: &[Value], key: &Value) -> usize {
        sorted.iter().position(|k| k == key).unwrap()
    }

    #[test]
    fn whole_and_explicit_bounds() {
        let whole = KeyRanges::whole();
        assert_eq!(whole.regions_count(), 1);
        assert_eq!(whole.region_of(&Value::Int(-5)), RegionIndex(0));
        assert_eq!(
            KeyRanges::with_bounds(vec![Value::Int(3), Value::Int(3)]),
            None
        );
        let r = KeyRanges::with_bounds(vec![Value::Int(10), Value::Int(20)]).unwrap();
        assert_eq!(r.region_of(&Value::Int(9)), RegionIndex(0));
        assert_eq!(r.region_of(&Value::Int(10)), RegionIndex(1));
        assert_eq!(r.region_of(&Value::Int(25)), RegionIndex(2));
        assert_eq!(r.regions_overlapping(&Value::Int(0), &Value::Int(10)), 0..1);
        assert_eq!(r.regions_overlapping(&Value::Int(0), &Value::Int(11)), 0..2);
        assert_eq!(
            r.regions_overlapping(&Value::Int(12), &Value::Int(12)),
            0..0
        );
        assert_eq!(
            r.regions_overlapping(&Value::Int(15), &Value::Int(99)),
            1..3
        );
        // Boundaries chosen from the first ten of a hundred keys: the last region takes 95 of
        // them, is the one to split, and splits at its median.
        let keys: Vec<Value> = (0..100).map(Value::Int).collect();
        let early = KeyRanges::from_keys(&keys[..10], 2);
        assert_eq!(early.bounds(), &[Value::Int(5)]);
        assert_eq!(early.region_to_split(&[5, 95], 10), Some(RegionIndex(1)));
        assert_eq!(early.region_to_split(&[5, 95], 100), None);
        assert_eq!(early.region_to_split(&[50, 50], 10), None);
        assert_eq!(
            KeyRanges::whole().region_to_split(&[7], 5),
            Some(RegionIndex(0))
        );
        let at = KeyRanges::split_point(&keys[5..]).unwrap();
        assert_eq!(at, Value::Int(52));
        let split = early.split(RegionIndex(1), at).unwrap();
        assert_eq!(split.bounds(), &[Value::Int(5), Value::Int(52)]);
        assert_eq!(split.split(RegionIndex(0), Value::Int(5)), None);
        assert_eq!(
            KeyRanges::split_point(&[Value::Int(1), Value::Int(1)]),
            None
        );
    }
}
