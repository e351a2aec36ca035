//! Cutting a subspace into regions.
//!
//! A subspace of `d` dimensions asked for `R` partitions is cut, dimension by dimension, into
//! ⌊R^(1/d)⌋ or ⌈R^(1/d)⌉ intervals, choosing how many dimensions get the larger count so that
//! the product is as close to `R` as possible (seed 000 §3.2: 2 dimensions, R = 8 gives 3 × 3 =
//! 9). Regions are numbered in mixed radix, the first dimension most significant, so region
//! numbers follow the first dimension's order.
//!
//! Where an axis is cut: a hashed (string) axis into equal slices of the `u64` axis, since
//! hashes are uniform. An ordered (int, float) axis at explicit cut points when it has them
//! (`Subspace::cuts`: chosen from the data's quantiles, see [`crate::cuts`]), else into equal
//! slices of its attribute's declared domain, else — before anything is known of the data —
//! into equal slices of the whole axis, where real values (prices, timestamps, ages) all fall
//! into one or two slices until the subspace is re-cut.

use serde::{Deserialize, Serialize};
use tessera_types::{
    AxisCuts, Object, Placement, SpaceSchema, Subspace, SubspaceId, TagCurve, Value,
};

use crate::coordinate::KeyPosition;

/// A region's number within its subspace: `0..Tessellation::regions_count()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RegionIndex(pub u32);

/// How one subspace is cut into regions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tessellation {
    /// Intervals along each dimension, in subspace order. Every entry is at least 1.
    intervals: Vec<u32>,
    /// Where each dimension is cut, if not into equal slices: the first coordinate of every
    /// interval after the first, strictly increasing (`intervals[d] - 1` of them).
    cuts: Vec<Option<Vec<u64>>>,
    /// Where the first dimension's equal intervals lie: the whole axis (`None`), or the
    /// inclusive range `[lo, hi]`, the first interval stretching down to 0 and the last up to
    /// `u64::MAX` (an ordered key axis over a declared domain of keys).
    domain: Option<(u64, u64)>,
    /// Whether this is an ordered key subspace: keys lie on its axis by
    /// [`crate::coordinate::ordered_key_coordinate`], which keeps their order, not by their hash.
    ordered_keys: bool,
    /// An ordered key axis whose regions were split ([`Tessellation::split_key_region`]): its
    /// ranges, which replace the equal intervals. `None` until the first split.
    ranges: Option<KeyAxisRanges>,
}

/// The ranges of a split ordered key axis, in key order. Splitting a range gives the new
/// range the next region number, so a region keeps its number (its storage, its replica set)
/// however many splits come after; ranges and region numbers then differ in order.
///
/// A range starts at a [`KeyPosition`], not a coordinate, so that keys sharing a coordinate
/// (strings sharing their first 8 bytes) can lie in different ranges: a key's range is exact
/// ([`key_region`]), while a coordinate alone may lie in several ranges
/// ([`Tessellation::intervals_holding`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct KeyAxisRanges {
    /// The first position of each range after the first: increasing (equal only for the
    /// empty slices of a declared domain narrower than its partitions).
    starts: Vec<KeyPosition>,
    /// The region of each range.
    regions: Vec<u32>,
    /// Where each region's range is in `regions` (its inverse).
    places: Vec<u32>,
}

impl KeyAxisRanges {
    fn check(&self) {
        debug_assert!(self.starts.windows(2).all(|w| w[0] <= w[1]));
        debug_assert_eq!(self.starts.len() + 1, self.regions.len());
        debug_assert!(self
            .regions
            .iter()
            .enumerate()
            .all(|(i, &r)| self.places[r as usize] as usize == i));
    }
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
            cuts: vec![None; intervals.len()],
            intervals,
            domain: None,
            ordered_keys: false,
            ranges: None,
        };
        assert!(t.regions_count() >= 1);
        t
    }

    /// A tessellation cut as `axes` say, one entry per dimension (checked already:
    /// `Subspace::check_cuts`).
    pub fn with_cuts(axes: &[AxisCuts]) -> Tessellation {
        let mut t = Tessellation::grid(axes.iter().map(|a| a.intervals() as u32).collect());
        for (d, axis) in axes.iter().enumerate() {
            if let AxisCuts::At(at) = axis {
                t.cut_at(d, at.clone());
            }
        }
        t
    }

    /// Cuts dimension `dim` at `at` (strictly increasing, above 0): `at.len() + 1` intervals.
    fn cut_at(&mut self, dim: usize, at: Vec<u64>) {
        assert!(
            at.first() != Some(&0) && at.windows(2).all(|w| w[0] < w[1]),
            "cut points are strictly increasing and above 0"
        );
        self.intervals[dim] = at.len() as u32 + 1;
        self.cuts[dim] = Some(at);
    }

    /// How each axis is cut, as a subspace's configuration keeps it (`Subspace::cuts`).
    pub fn axis_cuts(&self) -> Vec<AxisCuts> {
        (0..self.dimensions())
            .map(|d| match &self.cuts[d] {
                Some(at) => AxisCuts::At(at.clone()),
                None => AxisCuts::Equal(self.intervals[d]),
            })
            .collect()
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
            cuts: vec![None],
            domain,
            ordered_keys: true,
            ranges: None,
        }
    }

    /// This ordered key subspace with `region` split at the key `at`: the keys of `region`
    /// from `at` up go to a new region, numbered `regions_count()`, whose range follows
    /// `region`'s; every other region keeps its number and its keys. `None` unless this is an
    /// ordered key subspace holding `region` and `at` lies strictly inside it (above its first
    /// position, so neither half is empty of positions).
    pub fn split_key_region(&self, region: RegionIndex, at: &Value) -> Option<Tessellation> {
        let mut split = self.clone();
        split.split_in_place(region, at).then_some(split)
    }

    /// [`Tessellation::split_key_region`] in place; false (and unchanged) when it does not
    /// apply.
    fn split_in_place(&mut self, region: RegionIndex, at: &Value) -> bool {
        if !self.ordered_keys || region.0 >= self.regions_count() {
            return false;
        }
        let at = crate::coordinate::ordered_key_position(at);
        let place = self.cells_of(region)[0] as usize;
        let n = self.intervals[0];
        let split_before = self.ranges.is_some();
        let mut ranges = self.ranges.take().unwrap_or_else(|| KeyAxisRanges {
            starts: (1..n)
                .map(|i| KeyPosition::at(self.interval_bounds(0, i).0))
                .collect(),
            regions: (0..n).collect(),
            places: (0..n).collect(),
        });
        let above_start = if place == 0 {
            at > KeyPosition::default()
        } else {
            ranges.starts[place - 1] < at
        };
        let below_next = ranges.starts.get(place).is_none_or(|next| at < *next);
        if !(above_start && below_next) {
            // Unchanged: equal slices stay equal slices.
            self.ranges = split_before.then_some(ranges);
            return false;
        }
        let place = place as u32;
        ranges.starts.insert(place as usize, at);
        ranges.regions.insert(place as usize + 1, n);
        ranges.places.push(place + 1);
        for &r in &ranges.regions[place as usize + 2..] {
            ranges.places[r as usize] += 1;
        }
        ranges.check();
        self.ranges = Some(ranges);
        self.intervals[0] = n + 1;
        self.domain = None;
        true
    }

    /// The keys of key region `region`, as positions: from the first up to the second, not
    /// included (`None`: to the axis's end). Two key tessellations place the same keys in a
    /// region exactly when its ranges are equal; its bounds may not tell, since a range can
    /// start between keys of one coordinate.
    pub fn key_range(&self, region: RegionIndex) -> (KeyPosition, Option<KeyPosition>) {
        let place = self.cells_of(region)[0] as usize;
        if let Some(r) = &self.ranges {
            let start = match place {
                0 => KeyPosition::default(),
                _ => r.starts[place - 1].clone(),
            };
            return (start, r.starts.get(place).cloned());
        }
        let (lo, hi) = self.interval_bounds(0, place as u32);
        (KeyPosition::at(lo), hi.checked_add(1).map(KeyPosition::at))
    }

    /// The regions of this (key) subspace in the order of their coordinates: for an ordered
    /// key axis, key order.
    pub fn regions_in_axis_order(&self) -> Vec<RegionIndex> {
        match &self.ranges {
            Some(r) => r.regions.iter().map(|&i| RegionIndex(i)).collect(),
            None => (0..self.regions_count()).map(RegionIndex).collect(),
        }
    }

    /// Where `key` lies on this key subspace's axis: its hash, or in an ordered key subspace
    /// its order-keeping coordinate.
    pub fn key_coordinate(&self, key: &tessera_types::Value) -> u64 {
        if self.ordered_keys {
            crate::coordinate::ordered_key_coordinate(key)
        } else {
            crate::coordinate::key_coordinate(key)
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

    /// The interval of dimension `dim` holding `coordinate` — on a split ordered key axis,
    /// where several ranges may hold keys of one coordinate, the first of them (a key's own
    /// range is [`key_region`]'s).
    pub fn interval_of(&self, dim: usize, coordinate: u64) -> u32 {
        self.intervals_holding(dim, coordinate).0
    }

    /// The first and last interval of dimension `dim` that may hold `coordinate`: one
    /// interval, except on a split ordered key axis, which can start ranges between keys of
    /// one coordinate (strings sharing their first 8 bytes).
    pub fn intervals_holding(&self, dim: usize, coordinate: u64) -> (u32, u32) {
        if let (Some(r), 0) = (&self.ranges, dim) {
            let first = r.starts.partition_point(|s| {
                s.coordinate < coordinate || (s.coordinate == coordinate && s.rest.is_empty())
            });
            let last = r.starts.partition_point(|s| s.coordinate <= coordinate);
            return (first as u32, last as u32);
        }
        let i = self.interval_of_unsplit(dim, coordinate);
        (i, i)
    }

    /// [`Tessellation::interval_of`] on an axis that is not a split key axis.
    fn interval_of_unsplit(&self, dim: usize, coordinate: u64) -> u32 {
        let n = self.intervals[dim] as u128;
        if let Some(at) = &self.cuts[dim] {
            return at.partition_point(|&s| s <= coordinate) as u32;
        }
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
        if let (Some(r), 0) = (&self.ranges, dim) {
            // The next range may start between keys of its first coordinate: this one then
            // holds keys of that coordinate too.
            let i = i as usize;
            let lo = if i == 0 {
                0
            } else {
                r.starts[i - 1].coordinate
            };
            let hi = r.starts.get(i).map_or(u64::MAX, |s| {
                if s.rest.is_empty() {
                    s.coordinate - 1
                } else {
                    s.coordinate
                }
            });
            return (lo, hi);
        }
        if let Some(at) = &self.cuts[dim] {
            let i = i as usize;
            let lo = if i == 0 { 0 } else { at[i - 1] };
            return (lo, at.get(i).map_or(u64::MAX, |s| s - 1));
        }
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
        if let Some(r) = &self.ranges {
            return RegionIndex(r.regions[cells[0] as usize]);
        }
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
        if let Some(r) = &self.ranges {
            return vec![r.places[region.0 as usize]];
        }
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
/// region whose replica set's head is the key's point leader. On a split ordered key axis,
/// the range holding the key's [`KeyPosition`].
pub fn key_region(key_tessellation: &Tessellation, key: &Value) -> RegionIndex {
    if let Some(r) = &key_tessellation.ranges {
        let position = crate::coordinate::ordered_key_position(key);
        return RegionIndex(r.regions[r.starts.partition_point(|s| *s <= position)]);
    }
    key_tessellation.region_of(&[key_tessellation.key_coordinate(key)])
}

/// The region of `subspace` (tessellated by `tessellation`) that holds `object`, or `None`
/// where it is not placed (a dynamic space's document outside its formula). Every placement
/// — chains, storage, transfers — asks here or [`region_of_point`].
pub fn region_of_object(
    schema: &SpaceSchema,
    subspace: SubspaceId,
    tessellation: &Tessellation,
    object: &Object,
) -> Option<RegionIndex> {
    let point = crate::coordinate::point(schema, subspace, object)?;
    Some(region_of_point(
        subspace,
        tessellation,
        object.key(),
        &point,
    ))
}

/// The region of `subspace` holding the object of key `key` at `point` (its
/// [`crate::coordinate::point`] there): the key subspace places an object by its key ([`key_region`]),
/// which a split ordered key axis needs, and every other subspace by its point.
pub fn region_of_point(
    subspace: SubspaceId,
    tessellation: &Tessellation,
    key: &Value,
    point: &[u64],
) -> RegionIndex {
    if subspace == SubspaceId::KEY {
        key_region(tessellation, key)
    } else {
        tessellation.region_of(point)
    }
}

/// The tessellation of `subspace` of `schema`: its own cuts if it has them; otherwise equal
/// cuts (slices of a declared domain along its attribute's axes), an overlay's weighted ones,
/// or a tag subspace's stretches of the tag curve times its spread. (An ordered key subspace
/// has as many regions as a hashed one; [`tessellations`] places them.)
pub fn tessellation_of(subspace: &Subspace, schema: &SpaceSchema) -> Tessellation {
    let partitions = schema.partitions;
    match (&subspace.overlay, subspace.tags, &subspace.cuts) {
        (_, Some(curve), _) => Tessellation::tags(curve, partitions),
        (_, None, Some(cuts)) => Tessellation::with_cuts(cuts),
        (Some(overlay), None, None) => Tessellation::weighted(&overlay.weights(), partitions),
        (None, None, None) => {
            let mut t = Tessellation::new(subspace.dimensions.len(), partitions);
            for (d, &a) in subspace.dimensions.iter().enumerate() {
                if let Some((low, high)) = &schema.attribute(a).domain {
                    t.cut_at(d, domain_cuts(low, high, t.intervals[d]));
                }
            }
            t
        }
    }
}

/// Where to cut an axis into `n` equal slices of the values from `low` to `high` (a declared
/// domain; ints or floats): the coordinates of the values that start slices 2..=n, equal
/// ones merged (an int domain narrower than `n` values has fewer slices).
pub fn domain_cuts(low: &Value, high: &Value, n: u32) -> Vec<u64> {
    let n = i128::from(n.max(1));
    let starts = (1..n).map(|i| match (low, high) {
        (Value::Int(lo), Value::Int(hi)) => {
            let (lo, hi) = (i128::from(*lo), i128::from(*hi));
            Value::Int((lo + i * (hi - lo + 1) / n) as i64)
        }
        (Value::Float(lo), Value::Float(hi)) => Value::Float(lo + (hi - lo) * i as f64 / n as f64),
        _ => unreachable!("schema invariant: a domain is two ints or two floats"),
    });
    // The first slice stretches down from the domain's low end: no cut at or below it.
    let first = crate::coordinate(low);
    let mut at: Vec<u64> = starts.map(|v| crate::coordinate(&v)).collect();
    at.dedup();
    at.retain(|&c| c > first);
    at
}

/// The tessellation of every subspace of `schema`, in subspace order (the key subspace first).
/// An ordered space's key subspace has the equal slices it was created with, split as its
/// [`tessera_types::KeySplit`]s say (one that does not apply is left out: a configuration
/// with one has more key regions than its tessellation, and fails its check).
pub fn tessellations(schema: &SpaceSchema) -> Vec<Tessellation> {
    let mut all: Vec<Tessellation> = schema
        .subspaces
        .iter()
        .map(|s| tessellation_of(s, schema))
        .collect();
    if let Placement::Ordered { domain } = &schema.placement {
        let domain = domain.as_ref().map(|(from, to)| {
            (
                crate::coordinate::ordered_key_coordinate(from),
                crate::coordinate::ordered_key_coordinate(to),
            )
        });
        all[0] = Tessellation::ordered_keys(schema.partitions, domain);
        for split in &schema.key_splits {
            // A key of another type (from the network) has no coordinate here.
            if split.at.primitive_type() != Some(schema.key_type()) {
                continue;
            }
            all[0].split_in_place(RegionIndex(split.region), &split.at);
        }
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

    /// A model of a split key axis, written apart from the tessellation: (first key, region)
    /// per range in key order; a key is in the range of the last first key at or below it.
    fn model_region<K: Ord>(ranges: &[(K, u32)], key: &K) -> u32 {
        ranges
            .iter()
            .rev()
            .find(|(first, _)| first <= key)
            .expect("the first range starts at the least key")
            .1
    }

    /// Splits `t` at `splits` (region picks and keys) and checks it against the model: every
    /// key lands in the region the model says, a split moves only keys of the region it splits
    /// (from its key up), no region changes its number, the regions' bounds hold their keys'
    /// coordinates, and axis order is key order. `model` starts as `t`'s ranges.
    fn splits_follow_the_model<K: Ord + Clone + std::fmt::Debug>(
        mut t: Tessellation,
        mut model: Vec<(K, u32)>,
        splits: Vec<(u32, K)>,
        keys: &[K],
        value: impl Fn(&K) -> tessera_types::Value,
    ) -> Result<(), TestCaseError> {
        for (pick, at) in splits {
            let region = RegionIndex(pick % t.regions_count());
            let place = model
                .iter()
                .position(|(_, r)| *r == region.0)
                .expect("every region has a range");
            let inside =
                model[place].0 < at && model.get(place + 1).is_none_or(|(next, _)| at < *next);
            let split = t.split_key_region(region, &value(&at));
            prop_assert_eq!(split.is_some(), inside, "split of {:?} at {:?}", region, at);
            let Some(split) = split else { continue };
            for k in keys {
                let (before, after) = (key_region(&t, &value(k)), key_region(&split, &value(k)));
                if before != region || *k < at {
                    prop_assert_eq!(before, after, "key {:?} moved though not split off", k);
                } else {
                    prop_assert_eq!(after, RegionIndex(t.regions_count()));
                }
            }
            model.insert(place + 1, (at, t.regions_count()));
            t = split;
        }
        for k in keys {
            let r = key_region(&t, &value(k));
            prop_assert_eq!(r.0, model_region(&model, k));
            let c = crate::coordinate::ordered_key_coordinate(&value(k));
            let (lo, hi) = t.region_bounds(r)[0];
            prop_assert!(lo <= c && c <= hi);
            // A box of the key's coordinate alone crosses its region.
            let (first, last) = t.intervals_holding(0, c);
            let place = t.cells_of(r)[0];
            prop_assert!(first <= place && place <= last);
        }
        let order: Vec<u32> = model.iter().map(|(_, r)| *r).collect();
        prop_assert_eq!(
            t.regions_in_axis_order()
                .iter()
                .map(|r| r.0)
                .collect::<Vec<_>>(),
            order
        );
        Ok(())
    }

    /// String keys as bytes without NUL (distinct strings have distinct positions), many of
    /// them sharing their first 8 bytes (`tweet:00000123`).
    fn string_key() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            "[a-z]{0,10}".prop_map(String::into_bytes),
            (0u32..2000).prop_map(|n| format!("tweet:{n:08}").into_bytes()),
            (0u32..200, "[a-c]{0,3}").prop_map(|(n, s)| format!("tweet:{n:08}{s}").into_bytes()),
        ]
    }

    proptest! {
        /// Splitting ordered int key regions over a domain, in any order and at any keys.
        #[test]
        fn split_int_key_regions_follow_the_model(
            partitions in 1u32..6,
            splits in prop::collection::vec((any::<u32>(), -1000i64..1000), 0..24),
            keys in prop::collection::vec(prop_oneof![-1200i64..1200, any::<i64>()], 1..60),
        ) {
            use tessera_types::Value;
            let coordinate = |k: i64| crate::coordinate::ordered_key_coordinate(&Value::Int(k));
            let t = Tessellation::ordered_keys(partitions, Some((coordinate(-1000), coordinate(1000))));
            // The model starts from the equal slices, read off the tessellation's bounds.
            let mut model: Vec<(i64, u32)> = vec![(i64::MIN, 0)];
            for i in 1..partitions {
                let lo = t.interval_bounds(0, i).0;
                // The least key whose coordinate reaches `lo`: ints lie on the axis one to one,
                // in order, with the sign bit flipped.
                model.push(((lo ^ (1 << 63)) as i64, i));
            }
            splits_follow_the_model(t, model, splits, &keys, |k| Value::Int(*k))?;
        }

        /// Splitting ordered string key regions, at keys that share their first 8 bytes with
        /// others as often as not: they split apart all the same.
        #[test]
        fn split_string_key_regions_follow_the_model(
            partitions in 1u32..5,
            splits in prop::collection::vec((any::<u32>(), string_key()), 0..24),
            keys in prop::collection::vec(string_key(), 1..60),
        ) {
            use tessera_types::Value;
            let t = Tessellation::ordered_keys(partitions, None);
            // The least string whose first 8 bytes, zero-padded, reach `lo`: `lo`'s bytes
            // without their trailing zeros.
            let mut model: Vec<(Vec<u8>, u32)> = vec![(Vec::new(), 0)];
            for i in 1..partitions {
                let mut first = t.interval_bounds(0, i).0.to_be_bytes().to_vec();
                while first.last() == Some(&0) {
                    first.pop();
                }
                model.push((first, i));
            }
            splits_follow_the_model(t, model, splits, &keys, |k| Value::from(k.clone()))?;
        }
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
                    prop_assert!(crate::tessellation::key_region(&t, &a) <= crate::tessellation::key_region(&t, &b));
                }
            }
        }

        /// Any cut points: the intervals of each axis tile it, every point lies in the bounds
        /// of its region and of no other, and the region's cells name it back.
        #[test]
        fn any_cuts_tile_and_place_every_point_once(
            axes in prop::collection::vec(prop_oneof![
                (1u32..6).prop_map(AxisCuts::Equal),
                prop::collection::btree_set(1u64.., 0..6)
                    .prop_map(|at| AxisCuts::At(at.into_iter().collect())),
                prop::collection::btree_set(prop_oneof![1u64..4, u64::MAX - 3..], 0..4)
                    .prop_map(|at| AxisCuts::At(at.into_iter().collect())),
            ], 1..4),
            points in prop::collection::vec(prop::collection::vec(
                prop_oneof![any::<u64>(), 0u64..5, u64::MAX - 5..], 4), 1..20),
        ) {
            let t = Tessellation::with_cuts(&axes);
            prop_assert_eq!(t.axis_cuts(), axes.clone());
            for (d, axis) in axes.iter().enumerate() {
                prop_assert_eq!(u64::from(t.intervals(d)), axis.intervals());
                let mut next = 0u64;
                for i in 0..t.intervals(d) {
                    let (lo, hi) = t.interval_bounds(d, i);
                    prop_assert_eq!(lo, next);
                    prop_assert!(lo <= hi);
                    prop_assert_eq!((t.interval_of(d, lo), t.interval_of(d, hi)), (i, i));
                    next = hi.wrapping_add(1);
                }
                prop_assert_eq!(next, 0, "the last interval ends at u64::MAX");
            }
            for p in &points {
                let point = &p[..t.dimensions()];
                let region = t.region_of(point);
                let inside = |r: RegionIndex| {
                    t.region_bounds(r).iter().zip(point).all(|((lo, hi), c)| lo <= c && c <= hi)
                };
                let holding: Vec<u32> =
                    (0..t.regions_count()).filter(|&r| inside(RegionIndex(r))).collect();
                prop_assert_eq!(holding, vec![region.0]);
                prop_assert_eq!(t.region_at(&t.cells_of(region)), region);
            }
        }

        /// A declared domain's cuts: strictly increasing, in value order, and every slice of
        /// an int domain at least as wide as the domain allows holds some of its values.
        #[test]
        fn domain_cuts_slice_the_domain(lo in -1000i64..1000, width in 1i64..5000, n in 1u32..70) {
            let (low, high) = (Value::Int(lo), Value::Int(lo + width));
            let at = domain_cuts(&low, &high, n);
            prop_assert!(at.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(at.len() < n.max(1) as usize);
            prop_assert_eq!(at.len() as i64 + 1, (width + 1).min(i64::from(n)));
            let t = Tessellation::with_cuts(&[AxisCuts::At(at)]);
            let mut seen = vec![0u32; t.intervals(0) as usize];
            for v in lo..=lo + width {
                seen[t.interval_of(0, crate::coordinate(&Value::Int(v))) as usize] += 1;
            }
            prop_assert!(seen.iter().all(|&c| c > 0), "{:?}", seen);
            let (min, max) = (seen.iter().min().unwrap(), seen.iter().max().unwrap());
            prop_assert!(max - min <= 1, "equal slices: {:?}", seen);
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
