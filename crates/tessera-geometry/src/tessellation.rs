//! Cutting a subspace into regions.
//!
//! A subspace of `d` dimensions asked for `R` partitions is cut, dimension by dimension, into
//! ⌊R^(1/d)⌋ or ⌈R^(1/d)⌉ equal intervals of the `u64` axis, choosing how many dimensions get the
//! larger count so that the product is as close to `R` as possible (seed 000 §3.2: 2 dimensions,
//! R = 8 gives 3 × 3 = 9). Regions are numbered in mixed radix, the first dimension most
//! significant, so region numbers follow the first dimension's order.

use serde::{Deserialize, Serialize};
use tessera_types::{SpaceSchema, Subspace};

/// A region's number within its subspace: `0..Tessellation::regions_count()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RegionIndex(pub u32);

/// How one subspace is cut into regions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tessellation {
    /// Intervals along each dimension, in subspace order. Every entry is at least 1.
    intervals: Vec<u32>,
}

impl Tessellation {
    pub fn new(dimensions: usize, partitions: u32) -> Tessellation {
        assert!(dimensions >= 1, "a subspace has at least one dimension");
        assert!(partitions >= 1, "a subspace has at least one region");
        let r = partitions as u64;
        // base = ⌊R^(1/d)⌋, computed exactly.
        let mut base = 1u64;
        while (base + 1)
            .checked_pow(dimensions as u32)
            .is_some_and(|p| p <= r)
        {
            base += 1;
        }
        // Give `k` dimensions base+1 intervals, choosing k for the product closest to R.
        let product = |k: usize| -> u64 {
            (base + 1)
                .saturating_pow(k as u32)
                .saturating_mul(base.saturating_pow((dimensions - k) as u32))
        };
        let k = (0..=dimensions)
            .min_by_key(|&k| (product(k).abs_diff(r), std::cmp::Reverse(k)))
            .expect("at least one candidate");
        let intervals: Vec<u32> = (0..dimensions)
            .map(|i| if i < k { base as u32 + 1 } else { base as u32 })
            .collect();
        let t = Tessellation { intervals };
        assert!(t.regions_count() >= 1);
        t
    }

    /// A subspace whose dimensions get intervals in the ratio of `weights` (a compression
    /// formula's overlay, seed 004 §4): dimension `i` gets `max(1, ⌊w_i·k / w_max⌋)` intervals
    /// for the largest `k` whose product stays within `partitions`. Equal weights cut as
    /// [`Tessellation::new`] does.
    pub fn weighted(weights: &[u32], partitions: u32) -> Tessellation {
        assert!(!weights.is_empty(), "a subspace has at least one dimension");
        assert!(weights.iter().all(|&w| w >= 1), "weights are positive");
        let w_max = u64::from(*weights.iter().max().expect("not empty"));
        if weights.iter().all(|&w| u64::from(w) == w_max) {
            return Tessellation::new(weights.len(), partitions);
        }
        let intervals_at = |k: u64| -> Vec<u32> {
            weights
                .iter()
                .map(|&w| (u64::from(w) * k / w_max).clamp(1, u64::from(u32::MAX)) as u32)
                .collect()
        };
        let product =
            |v: &[u32]| -> u64 { v.iter().fold(1u64, |p, &n| p.saturating_mul(u64::from(n))) };
        // The product grows with k: the last k within the partitions wins.
        let mut k = 1u64;
        while k < u64::from(partitions) && product(&intervals_at(k + 1)) <= u64::from(partitions) {
            k += 1;
        }
        let t = Tessellation {
            intervals: intervals_at(k),
        };
        assert!(t.regions_count() >= 1);
        t
    }

    pub fn dimensions(&self) -> usize {
        self.intervals.len()
    }

    /// Intervals along dimension `dim`.
    pub fn intervals(&self, dim: usize) -> u32 {
        self.intervals[dim]
    }

    pub fn regions_count(&self) -> u32 {
        self.intervals.iter().product()
    }

    /// The interval of dimension `dim` holding `coordinate`.
    pub fn interval_of(&self, dim: usize, coordinate: u64) -> u32 {
        let n = self.intervals[dim] as u128;
        ((coordinate as u128 * n) >> 64) as u32
    }

    /// The inclusive coordinate bounds of interval `i` of dimension `dim`.
    pub fn interval_bounds(&self, dim: usize, i: u32) -> (u64, u64) {
        let n = self.intervals[dim] as u128;
        assert!((i as u128) < n);
        let start = |i: u128| -> u128 { (i << 64).div_ceil(n) };
        let lo = start(i as u128);
        let hi = start(i as u128 + 1) - 1;
        (lo as u64, hi.min(u64::MAX as u128) as u64)
    }

    /// The region holding `point` (one coordinate per dimension).
    pub fn region_of(&self, point: &[u64]) -> RegionIndex {
        assert_eq!(point.len(), self.intervals.len());
        let cells: Vec<u32> = point
            .iter()
            .enumerate()
            .map(|(d, &c)| self.interval_of(d, c))
            .collect();
        self.region_at(&cells)
    }

    /// The region whose interval along each dimension is `cells[dim]`.
    pub fn region_at(&self, cells: &[u32]) -> RegionIndex {
        assert_eq!(cells.len(), self.intervals.len());
        let mut index = 0u32;
        for (d, &c) in cells.iter().enumerate() {
            assert!(c < self.intervals[d]);
            index = index * self.intervals[d] + c;
        }
        RegionIndex(index)
    }

    /// The interval along each dimension of `region` (inverse of [`Tessellation::region_at`]).
    pub fn cells_of(&self, region: RegionIndex) -> Vec<u32> {
        assert!(region.0 < self.regions_count());
        let mut rest = region.0;
        let mut cells = vec![0; self.intervals.len()];
        for d in (0..self.intervals.len()).rev() {
            cells[d] = rest % self.intervals[d];
            rest /= self.intervals[d];
        }
        cells
    }

    /// The inclusive coordinate bounds of `region` along each dimension.
    pub fn region_bounds(&self, region: RegionIndex) -> Vec<(u64, u64)> {
        self.cells_of(region)
            .iter()
            .enumerate()
            .map(|(d, &c)| self.interval_bounds(d, c))
            .collect()
    }
}

/// The tessellation of `subspace` of a space of `partitions`: equal cuts, or an overlay's
/// weighted ones.
pub fn tessellation_of(subspace: &Subspace, partitions: u32) -> Tessellation {
    match &subspace.overlay {
        Some(overlay) => Tessellation::weighted(&overlay.weights(), partitions),
        None => Tessellation::new(subspace.dimensions.len(), partitions),
    }
}

/// The tessellation of every subspace of `schema`, in subspace order (the key subspace first).
pub fn tessellations(schema: &SpaceSchema) -> Vec<Tessellation> {
    schema
        .subspaces
        .iter()
        .map(|s| tessellation_of(s, schema.partitions))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn weighted_cuts_follow_the_weights() {
        // first:4, last:2 over 64 partitions: 11 × 5, the most regions in ratio within 64.
        assert_eq!(Tessellation::weighted(&[4, 2], 64).intervals, vec![11, 5]);
        assert_eq!(Tessellation::weighted(&[1, 1], 64).intervals, vec![8, 8]);
        assert_eq!(Tessellation::weighted(&[3], 64).intervals, vec![64]);
        assert_eq!(Tessellation::weighted(&[64, 1], 4).intervals, vec![4, 1]);
    }

    proptest! {
        #[test]
        fn weighted_stays_within_the_partitions(weights in prop::collection::vec(1u32..65, 1..6),
                                                r in 1u32..5000) {
            let t = Tessellation::weighted(&weights, r);
            prop_assert!(t.regions_count() >= 1);
            if weights.iter().all(|&w| w == weights[0]) {
                // Equal weights cut as a plain subspace does: the product closest to the
                // partitions, which may overshoot them by one interval's step.
                prop_assert_eq!(&t, &Tessellation::new(weights.len(), r));
            } else {
                // Unequal weights never overshoot (the largest k whose product fits).
                prop_assert!(u64::from(t.regions_count()) <= u64::from(r));
            }
            // A heavier axis never gets fewer intervals than a lighter one.
            for i in 0..weights.len() {
                for j in 0..weights.len() {
                    if weights[i] > weights[j] {
                        prop_assert!(t.intervals(i) >= t.intervals(j));
                    }
                }
            }
        }
    }

    #[test]
    fn seed_examples() {
        assert_eq!(Tessellation::new(2, 8).intervals, vec![3, 3]);
        assert_eq!(Tessellation::new(1, 64).regions_count(), 64);
        assert_eq!(Tessellation::new(2, 64).intervals, vec![8, 8]);
        assert_eq!(Tessellation::new(3, 64).intervals, vec![4, 4, 4]);
        assert_eq!(Tessellation::new(16, 64).regions_count(), 64);
        assert_eq!(Tessellation::new(3, 1).regions_count(), 1);
    }

    proptest! {
        #[test]
        fn every_point_is_in_exactly_its_region(d in 1usize..6, r in 1u32..5000,
                                                 seed in proptest::collection::vec(any::<u64>(), 6)) {
            let t = Tessellation::new(d, r);
            let point = &seed[..d];
            let region = t.region_of(point);
            prop_assert!(region.0 < t.regions_count());
            let bounds = t.region_bounds(region);
            for (c, (lo, hi)) in point.iter().zip(&bounds) {
                prop_assert!(lo <= c && c <= hi);
            }
            prop_assert_eq!(t.region_at(&t.cells_of(region)), region);
        }

        #[test]
        fn intervals_tile_the_axis(n in 1u32..1000) {
            let t = Tessellation::new(1, n);
            let mut next = 0u64;
            for i in 0..t.intervals(0) {
                let (lo, hi) = t.interval_bounds(0, i);
                prop_assert_eq!(lo, next);
                prop_assert!(lo <= hi);
                prop_assert_eq!(t.interval_of(0, lo), i);
                prop_assert_eq!(t.interval_of(0, hi), i);
                next = hi.wrapping_add(1);
            }
            prop_assert_eq!(next, 0, "the last interval ends at u64::MAX");
        }

        #[test]
        fn product_is_close_to_partitions(d in 1usize..8, r in 1u32..65536) {
            let t = Tessellation::new(d, r);
            let got = t.regions_count() as f64;
            // Within the step one dimension's interval count can make.
            let base = (r as f64).powf(1.0 / d as f64).floor().max(1.0);
            prop_assert!(got <= r as f64 * (base + 1.0) / base + 1.0, "{} for {}", got, r);
            prop_assert!(got >= r as f64 * base / (base + 1.0) - 1.0, "{} for {}", got, r);
        }
    }
}
