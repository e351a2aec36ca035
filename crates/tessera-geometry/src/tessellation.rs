//! Cutting a subspace into regions.
//!
//! A subspace of `d` dimensions asked for `R` partitions is cut, dimension by dimension, into
//! ⌊R^(1/d)⌋ or ⌈R^(1/d)⌉ equal intervals of the `u64` axis, choosing how many dimensions get the
//! larger count so that the product is as close to `R` as possible (seed 000 §3.2: 2 dimensions,
//! R = 8 gives 3 × 3 = 9). Regions are numbered in mixed radix, the first dimension most
//! significant, so region numbers follow the first dimension's order.

use serde::{Deserialize, Serialize};
use tessera_types::{Placement, SpaceSchema, Subspace, TagCurve};

/// A region's number within its subspace: `0..Tessellation::regions_count()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RegionIndex(pub u32);

/// How one subspace is cut into regions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tessellation {
    /// Intervals along each dimension, in subspace order. Every entry is at least 1.
    intervals: Vec<u32>,
    /// Where the first dimension's equal intervals lie: the whole axis (`None`), or the
    /// inclusive range `[lo, hi]`, the first interval stretching down to 0 and the last up to
    /// `u64::MAX` (an ordered key axis over a declared domain of keys).
    domain: Option<(u64, u64)>,
    /// Whether this is an ordered key subspace: keys lie on its axis by
    /// [`crate::ordered_key_coordinate`], which keeps their order, not by their hash.
    ordered_keys: bool,
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
        Tessellation::grid(intervals)
    }

    /// A tessellation of `intervals[d]` equal intervals along each dimension `d`.
    pub fn grid(intervals: Vec<u32>) -> Tessellation {
        assert!(
            !intervals.is_empty(),
            "a subspace has at least one dimension"
        );
        assert!(
            intervals.iter().all(|&n| n >= 1),
            "every dimension has an interval"
        );
        let t = Tessellation {
            intervals,
            domain: None,
            ordered_keys: false,
        };
        assert!(t.regions_count() >= 1);
        t
    }

    /// An ordered key subspace of `partitions` regions: equal slices of `domain` (key
    /// coordinates, inclusive), or of the whole axis.
    pub fn ordered_keys(partitions: u32, domain: Option<(u64, u64)>) -> Tessellation {
        assert!(partitions >= 1, "a subspace has at least one region");
        if let Some((lo, hi)) = domain {
            assert!(lo < hi, "a domain holds at least two coordinates");
        }
        Tessellation {
            intervals: vec![partitions],
            domain,
            ordered_keys: true,
        }
    }

    /// Where `key` lies on this key subspace's axis: its hash, or in an ordered key subspace
    /// its order-keeping coordinate.
    pub fn key_coordinate(&self, key: &tessera_types::Value) -> u64 {
        if self.ordered_keys {
            crate::ordered_key_coordinate(key)
        } else {
            crate::key_coordinate(key)
        }
    }

    /// A tag subspace's tessellation (`crate::tags`): the tag curve cut into
    /// `partitions / spread` stretches, each spread over `spread` intervals of the key's hash.
    pub fn tags(curve: TagCurve, partitions: u32) -> Tessellation {
        let spread = curve.spread.clamp(1, partitions.max(1));
        Tessellation::grid(vec![(partitions / spread).max(1), spread])
    }

    /// Whether keys lie on this (key subspace's) axis in their order.
    pub fn keys_ordered(&self) -> bool {
        self.ordered_keys
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
        Tessellation::grid(intervals_at(k))
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
        match self.domain {
            Some((lo, hi)) if dim == 0 => {
                let Some(c) = coordinate.checked_sub(lo) else {
                    return 0;
                };
                let span = (hi - lo) as u128 + 1;
                ((c as u128 * n) / span).min(n - 1) as u32
            }
            // The whole axis (every point of every write comes here): a shift, not a division.
            _ => ((coordinate as u128 * n) >> 64) as u32,
        }
    }

    /// The inclusive coordinate bounds of interval `i` of dimension `dim`.
    pub fn interval_bounds(&self, dim: usize, i: u32) -> (u64, u64) {
        let n = self.intervals[dim] as u128;
        assert!((i as u128) < n);
        let (offset, span) = self.span(dim);
        let start = |i: u128| -> u128 { offset as u128 + (i * span).div_ceil(n) };
        let lo = if i == 0 { 0 } else { start(i as u128) };
        let hi = if i as u128 == n - 1 {
            u64::MAX as u128
        } else {
            start(i as u128 + 1) - 1
        };
        (lo as u64, hi as u64)
    }

    /// Where dimension `dim`'s equal intervals start, and how many coordinates they share.
    fn span(&self, dim: usize) -> (u64, u128) {
        match self.domain {
            Some((lo, hi)) if dim == 0 => (lo, (hi - lo) as u128 + 1),
            _ => (0, 1u128 << 64),
        }
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

/// The region of the key subspace (tessellated by `key_tessellation`) that holds `key`: the
/// region whose replica set's head is the key's point leader.
pub fn key_region(key_tessellation: &Tessellation, key: &tessera_types::Value) -> RegionIndex {
    key_tessellation.region_of(&[key_tessellation.key_coordinate(key)])
}

/// The tessellation of `subspace` of a space of `partitions`: equal cuts, an overlay's
/// weighted ones, or a tag subspace's stretches of the tag curve times its spread. (An
/// ordered key subspace has as many regions as a hashed one; [`tessellations`] places them.)
pub fn tessellation_of(subspace: &Subspace, partitions: u32) -> Tessellation {
    match (&subspace.overlay, subspace.tags) {
        (Some(overlay), _) => Tessellation::weighted(&overlay.weights(), partitions),
        (None, Some(curve)) => Tessellation::tags(curve, partitions),
        (None, None) => Tessellation::new(subspace.dimensions.len(), partitions),
    }
}

/// The tessellation of every subspace of `schema`, in subspace order (the key subspace first).
pub fn tessellations(schema: &SpaceSchema) -> Vec<Tessellation> {
    let mut all: Vec<Tessellation> = schema
        .subspaces
        .iter()
        .map(|s| tessellation_of(s, schema.partitions))
        .collect();
    if let Placement::Ordered { domain } = &schema.placement {
        let domain = domain.as_ref().map(|(from, to)| {
            (
                crate::ordered_key_coordinate(from),
                crate::ordered_key_coordinate(to),
            )
        });
        all[0] = Tessellation::ordered_keys(schema.partitions, domain);
    }
    all
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

    /// Ordered key axes: keys, skewed or not, as `Value`s.
    fn ordered_key() -> impl Strategy<Value = tessera_types::Value> {
        use tessera_types::Value;
        prop_oneof![
            any::<i64>().prop_map(Value::Int),
            (0i64..1000).prop_map(Value::Int),
            "[a-c]{0,10}".prop_map(Value::from),
            (-1e9f64..1e9).prop_map(Value::Float),
        ]
    }

    proptest! {
        /// An ordered key axis over a domain: each coordinate lies in the bounds of its
        /// interval, the intervals tile the axis, and keys in order get regions in order.
        #[test]
        fn ordered_key_axes_keep_order_and_tile(
            r in 1u32..300,
            lo in any::<u64>(),
            width in 1u64..u64::MAX,
            cs in proptest::collection::vec(any::<u64>(), 1..20),
            a in ordered_key(),
            b in ordered_key(),
        ) {
            let hi = lo.saturating_add(width).max(lo + u64::from(lo < u64::MAX));
            prop_assume!(lo < hi);
            for t in [Tessellation::ordered_keys(r, Some((lo, hi))), Tessellation::ordered_keys(r, None)] {
                prop_assert_eq!(t.interval_bounds(0, 0).0, 0);
                prop_assert_eq!(t.interval_bounds(0, r - 1).1, u64::MAX);
                for i in 1..r {
                    prop_assert_eq!(t.interval_bounds(0, i - 1).1 + 1, t.interval_bounds(0, i).0);
                }
                for &c in &cs {
                    let i = t.interval_of(0, c);
                    let (l, h) = t.interval_bounds(0, i);
                    prop_assert!(l <= c && c <= h, "{c} outside interval {i} = [{l}, {h}]");
                }
                if a.primitive_type() == b.primitive_type() && a <= b {
                    prop_assert!(crate::key_region(&t, &a) <= crate::key_region(&t, &b));
                }
            }
        }

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
