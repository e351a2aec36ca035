//! When an *ordered* placement's key region splits (seed 003 §2.1.2). Its key axis keeps the
//! keys' order (ints numerically, strings bytewise), so a range of keys lies in
//! the run of regions it overlaps; the regions start as equal slices of the axis (or of the
//! declared domain). Real keys are skewed (user names, timestamps, ids with a common
//! prefix), so a region that outgrows the others is split at its middle key
//! ([`crate::tessellation::Tessellation::split_key_region`]) until the regions hold about as many keys:
//! their boundaries follow the data, chosen from the keys.

use crate::tessellation::RegionIndex;

/// A region is split when it holds more than this many times the mean of the others.
pub const SPLIT_FACTOR: u64 = 2;

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
    use crate::coordinate::ordered_key_position;
    use crate::tessellation::key_region;
    use crate::tessellation::Tessellation;
    use proptest::prelude::*;
    use tessera_types::Value;

    /// Skewed key sets (distinct keys, as a store holds them): clusters of ints (timestamps
    /// in bursts), or strings of a few families sharing a prefix (user names; `tweet:0000`
    /// shares more than 8 bytes, so all its keys share one coordinate).
    fn skewed_keys() -> impl Strategy<Value = Vec<Value>> {
        prop_oneof![
            prop::collection::btree_set((0i64..4, 0i64..300), 1..600).prop_map(|v| v
                .into_iter()
                .map(|(c, k)| Value::Int(c * 1_000_000_000 + k * k))
                .collect()),
            prop::collection::btree_set((0usize..3, 0u32..400), 1..600).prop_map(|v| v
                .into_iter()
                .map(|(f, k)| {
                    let family = ["ann", "bob", "tweet:0000"][f];
                    Value::from(format!("{family}{k:04}"))
                })
                .collect()),
        ]
    }

    proptest! {
        /// The coordinators' splitting, run to its end on skewed keys (each round: count the
        /// keys per region, split the region `region_to_split` names at its first key from the
        /// middle up whose coordinate lies above its smallest key's): it ends (each split leaves keys on both
        /// sides); every split halves its region; the regions keep key order (in
        /// the axis order of their ranges, their keys ascend); and at the end no region holds
        /// more than twice the mean of the others, unless it is below `min_objects` or its
        /// keys cannot split.
        #[test]
        fn splitting_skewed_keys_keeps_order_and_ends_balanced(
            keys in skewed_keys(),
            partitions in 1u32..8,
            min_objects in 2u64..40,
        ) {
            let mut t = Tessellation::ordered_keys(partitions, None);
            let mut splits = 0u64;
            loop {
                let mut held: Vec<Vec<&Value>> = vec![Vec::new(); t.regions_count() as usize];
                for k in &keys {
                    held[key_region(&t, k).0 as usize].push(k);
                }
                let counts: Vec<u64> = held.iter().map(|h| h.len() as u64).collect();
                let Some(r) = region_to_split(&counts, min_objects) else {
                    let total: u64 = counts.iter().sum();
                    let others = counts.len() as u64 - 1;
                    for c in &counts {
                        prop_assert!(others == 0 || c * others <= SPLIT_FACTOR * (total - c) || *c < min_objects.max(2));
                    }
                    break;
                };
                let mut inside = held[r.0 as usize].clone();
                inside.sort();
                let first = ordered_key_position(inside[0]);
                let Some(at) = inside[inside.len() / 2..].iter().find(|k| ordered_key_position(k) > first) else {
                    // Every key of the upper half at the smallest key's position: it cannot
                    // split (distinct keys here have distinct positions, so one key).
                    break;
                };
                let split = t.split_key_region(r, at).expect("inside the region");
                let moved = inside.iter().filter(|k| key_region(&split, k) != r).count();
                prop_assert!(moved >= 1 && moved <= inside.len().div_ceil(2), "{moved} of {}", inside.len());
                t = split;
                splits += 1;
                // Both halves hold keys: each split adds a region holding some, so it ends.
                prop_assert!(splits < keys.len() as u64);
            }
            // Order: walking the ranges in axis order, keys ascend.
            let order = t.regions_in_axis_order();
            let place = |k: &Value| order.iter().position(|r| *r == key_region(&t, k)).unwrap();
            let mut sorted: Vec<&Value> = keys.iter().collect();
            sorted.sort();
            for w in sorted.windows(2) {
                prop_assert!(place(w[0]) <= place(w[1]));
            }
        }
    }

    #[test]
    fn region_to_split_picks_the_fullest_over_the_factor() {
        assert_eq!(region_to_split(&[5, 95], 10), Some(RegionIndex(1)));
        assert_eq!(region_to_split(&[5, 95], 100), None);
        assert_eq!(region_to_split(&[40, 50, 40], 10), None);
        assert_eq!(region_to_split(&[12], 10), Some(RegionIndex(0)));
        assert_eq!(region_to_split(&[9], 10), None);
        // Ties go to the lowest region.
        assert_eq!(
            region_to_split(&[90, 90, 0, 0, 0, 0], 10),
            Some(RegionIndex(0))
        );
    }
}
