//! Where to cut a subspace's axes so that its regions hold about equal shares of the objects.
//!
//! Equal slices of the whole `u64` axis put every real price, timestamp or age into one slice.
//! So an ordered (int, float) axis is cut at its values' quantiles, as the statistics the
//! servers keep estimate them ([`Sketch`]); a hashed (string) axis at its values' hashes'
//! quantiles when they are known (hashes are uniform, values are not: a heavy value gets an
//! interval of its own), else in equal slices. How many intervals each axis gets follows the grid's rule
//! (about `R^(1/d)` each, the product close to `R`), except that an axis never gets more
//! intervals than it has distinct values: the regions that would stay empty go to the other
//! axes instead (a subspace over `stars` with five values has five regions).

use tessera_types::{AxisCuts, PrimitiveType, Value};

use crate::statistics::Sketch;

/// What is known of one axis's values when its subspace is cut.
#[derive(Clone, Copy, Debug)]
pub enum AxisData<'a> {
    /// A hashed (string) axis, nothing known of its values.
    Hashed,
    /// A hashed (string) axis, and the statistics of its values' hashes (each value's
    /// coordinate, as a number: [`Sketch::insert_hash`]). Hashes are uniform, but values are
    /// not: the most frequent city of a Zipf distribution is one point holding a tenth of the
    /// objects, and cuts at the hashes' quantiles give it an interval of its own.
    HashedBy { hashes: &'a Sketch },
    /// An ordered axis of `ty` (int or float), and the statistics of its values.
    Ordered {
        ty: PrimitiveType,
        values: &'a Sketch,
    },
}

impl<'a> AxisData<'a> {
    /// A document overlay's axis, from the sketch of its path's values: ordered when most of
    /// them are numbers (as ints when every number is whole, else as floats), hashed when most
    /// are strings. Values of the other kind still have their coordinates, and searches find
    /// them; the cuts just do not spread them.
    pub fn of_document_path(values: &'a Sketch) -> AxisData<'a> {
        if values.numeric_count() * 2 <= values.count() {
            return AxisData::Hashed;
        }
        let ty = if values.whole_numbers() {
            PrimitiveType::Int
        } else {
            PrimitiveType::Float
        };
        AxisData::Ordered { ty, values }
    }
}

/// Cut points for a document overlay whose axes are `axes`, weighted `weights` (relative
/// numbers of intervals, as the overlay declares them), for about `partitions` regions: each
/// axis gets the intervals its weight gives it in `Tessellation::weighted`, at most its
/// distinct values, at its quantiles. Equal weights cut as [`cuts_from_data`] does.
pub fn cuts_from_data_weighted(
    axes: &[AxisData],
    weights: &[u32],
    partitions: u32,
) -> Vec<AxisCuts> {
    if weights.windows(2).all(|w| w[0] == w[1]) {
        return cuts_from_data(axes, partitions);
    }
    let grid = crate::tessellation::Tessellation::weighted(weights, partitions);
    axes.iter()
        .enumerate()
        .map(|(d, axis)| {
            let n = u64::from(grid.intervals(d)).min(cap(axis, partitions));
            cut_axis(axis, n as u32)
        })
        .collect()
}

/// Cut points for a subspace whose axes are `axes`, asked for about `partitions` regions:
/// ordered axes at their quantiles, hashed ones in equal slices. The result passes
/// `Subspace::check_cuts`.
pub fn cuts_from_data(axes: &[AxisData], partitions: u32) -> Vec<AxisCuts> {
    let mut caps: Vec<u64> = axes.iter().map(|a| cap(a, partitions)).collect();
    // Ties can leave an axis fewer intervals than it was given (cut points merge): once its
    // real count is known, the other axes may take the regions it could not use.
    let mut cuts = Vec::new();
    for _ in 0..2 {
        let counts = interval_counts(&caps, partitions);
        cuts = axes
            .iter()
            .zip(&counts)
            .map(|(axis, &n)| cut_axis(axis, n))
            .collect();
        caps = cuts.iter().map(AxisCuts::intervals).collect();
    }
    cuts
}

/// How much fuller than the mean a subspace's fullest region may grow before it is re-cut.
pub const RECUT_FACTOR: f64 = 2.0;

/// How much a re-cut must shrink the fullest region's share to be worth its cost (a rebuild of
/// the subspace): to at most this fraction of what it is.
pub const RECUT_GAIN: f64 = 0.75;

/// Whether a subspace whose regions hold `counts` objects (each region's, as its leader counts
/// them) is out of balance: at least `min_objects` in all, and the fullest region holding more
/// than [`RECUT_FACTOR`] times the mean.
pub fn out_of_balance(counts: &[u64], min_objects: u64) -> bool {
    let total: u64 = counts.iter().sum();
    let fullest = counts.iter().copied().max().unwrap_or(0);
    total >= min_objects.max(1)
        && fullest as f64 > RECUT_FACTOR * total as f64 / counts.len() as f64
}

/// The share of the objects the fullest region of a subspace cut at `cuts` would hold, as the
/// statistics of `axes` predict it: per axis, the fullest interval's share of the values
/// (hashed axes evenly), multiplied as if the axes were independent.
pub fn predicted_fullest_share(axes: &[AxisData], cuts: &[AxisCuts]) -> f64 {
    axes.iter()
        .zip(cuts)
        .map(|(axis, cut)| fullest_interval_share(axis, cut))
        .product()
}

/// The share of an axis's values its fullest interval holds.
fn fullest_interval_share(axis: &AxisData, cut: &AxisCuts) -> f64 {
    // Equal slices of an ordered axis are cuts like any other.
    let t = crate::tessellation::Tessellation::with_cuts(std::slice::from_ref(cut));
    (0..t.intervals(0))
        .map(|i| {
            let (lo, hi) = t.interval_bounds(0, i);
            axis_share(axis, lo, hi)
        })
        .fold(0.0, f64::max)
}

/// The share of a subspace's objects that the statistics of `axes` put in a region whose
/// inclusive coordinate bounds are `bounds` (one pair per axis, as
/// `Tessellation::region_bounds` gives them): per axis, the share of its values within the
/// bounds (a hashed axis's by their width), multiplied as if the axes were independent.
pub fn region_share(axes: &[AxisData], bounds: &[(u64, u64)]) -> f64 {
    axes.iter()
        .zip(bounds)
        .map(|(axis, &(lo, hi))| axis_share(axis, lo, hi))
        .product()
}

/// The share of an axis's values from coordinate `lo` to `hi`, both included.
fn axis_share(axis: &AxisData, lo: u64, hi: u64) -> f64 {
    match axis {
        AxisData::Hashed => ((hi - lo) as f64 + 1.0) / 2f64.powi(64),
        AxisData::HashedBy { hashes } => {
            let low = (lo > 0).then_some(lo as f64);
            let high = (hi < u64::MAX).then_some(hi as f64);
            hashes.fraction_between(low, high)
        }
        AxisData::Ordered { ty, values } => {
            let low = (lo > 0).then(|| value_of(*ty, lo));
            let high = (hi < u64::MAX).then(|| value_of(*ty, hi));
            values.fraction_between(low, high)
        }
    }
}

/// The value of type `ty` at coordinate `c` (the inverse of `crate::coordinate`).
fn value_of(ty: PrimitiveType, c: u64) -> f64 {
    const SIGN: u64 = 1 << 63;
    match ty {
        PrimitiveType::Int => ((c ^ SIGN) as i64) as f64,
        _ => f64::from_bits(if c & SIGN != 0 { c ^ SIGN } else { !c }),
    }
}

/// Whether re-cutting a subspace from its cuts `now` to `new` pays: the predicted fullest
/// share falls to at most [`RECUT_GAIN`] of today's.
pub fn recut_pays(axes: &[AxisData], now: &[AxisCuts], new: &[AxisCuts]) -> bool {
    predicted_fullest_share(axes, new) <= RECUT_GAIN * predicted_fullest_share(axes, now)
}

/// The most intervals worth giving an axis: no more than its distinct values.
fn cap(axis: &AxisData, partitions: u32) -> u64 {
    match axis {
        AxisData::Hashed => u64::from(partitions),
        AxisData::HashedBy { hashes: values } | AxisData::Ordered { values, .. } => {
            values.distinct().clamp(1, u64::from(partitions))
        }
    }
}

/// Intervals per axis: the fewest-intervals axis that may still grow grows by one, as long
/// as the product stays within `partitions` (so axes stay within one of each other unless
/// capped).
pub fn interval_counts(caps: &[u64], partitions: u32) -> Vec<u32> {
    let mut counts = vec![1u64; caps.len()];
    let product = |c: &[u64]| c.iter().fold(1u64, |p, &n| p.saturating_mul(n));
    loop {
        let growable = (0..counts.len()).filter(|&d| counts[d] < caps[d]);
        let Some(d) = growable.min_by_key(|&d| counts[d]) else {
            break;
        };
        let mut grown = counts.clone();
        grown[d] += 1;
        if product(&grown) > u64::from(partitions) {
            break;
        }
        counts = grown;
    }
    counts.into_iter().map(|n| n as u32).collect()
}

/// One axis in `n` intervals: an ordered one at its values' quantiles, a hashed one at its
/// hashes' (or in equal slices when nothing is known of them), merged where they tie.
fn cut_axis(axis: &AxisData, n: u32) -> AxisCuts {
    let (ty, values) = match axis {
        AxisData::Ordered { ty, values } => (*ty, *values),
        AxisData::HashedBy { hashes } if hashes.numeric_count() > 0 => {
            return hash_cuts(hashes, n);
        }
        AxisData::Hashed | AxisData::HashedBy { .. } => return AxisCuts::Equal(n),
    };
    let mut at: Vec<u64> = values
        .cut_quantiles(n)
        .into_iter()
        .filter(|q| q.is_finite())
        .map(|q| crate::coordinate::coordinate(&value_at(ty, q)))
        .collect();
    at.sort_unstable();
    at.dedup();
    at.retain(|&c| c > 0);
    AxisCuts::At(at)
}

/// A hashed axis in `n` intervals at its hashes' quantiles (coordinates themselves; `as`
/// saturates at the ends of `u64`), merged where they tie.
fn hash_cuts(hashes: &Sketch, n: u32) -> AxisCuts {
    let mut at: Vec<u64> = hashes
        .cut_quantiles(n)
        .into_iter()
        .filter(|q| q.is_finite())
        .map(|q| q as u64)
        .collect();
    at.sort_unstable();
    at.dedup();
    at.retain(|&c| c > 0);
    AxisCuts::At(at)
}

/// The value of type `ty` nearest `q`, where an interval of an axis of `ty` starts.
fn value_at(ty: PrimitiveType, q: f64) -> Value {
    match ty {
        // `as` saturates at the ends of i64.
        PrimitiveType::Int => Value::Int(q.round() as i64),
        _ => Value::Float(q),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tessellation::Tessellation;
    use proptest::prelude::*;

    #[test]
    fn counts_follow_the_grid_and_the_caps() {
        let free = u64::MAX;
        assert_eq!(interval_counts(&[free], 64), vec![64]);
        assert_eq!(interval_counts(&[free, free], 64), vec![8, 8]);
        assert_eq!(interval_counts(&[free, free, free], 64), vec![4, 4, 4]);
        // Five values on the first axis: the second takes what the first cannot use.
        assert_eq!(interval_counts(&[5, free], 64), vec![5, 12]);
        assert_eq!(interval_counts(&[1, 1], 64), vec![1, 1]);
        assert_eq!(interval_counts(&[free, free], 1), vec![1, 1]);
    }

    #[test]
    fn document_paths_and_weighted_overlays() {
        // Years of a bibliography (1985-2024), and venue names with some numbers.
        let mut years = Sketch::new();
        for y in 0..4000i64 {
            years.insert(&Value::Int(2024 - y % 40));
        }
        let mut mixed = Sketch::new();
        for i in 0..30 {
            mixed.insert(&Value::from(format!("v{i}").as_str()));
        }
        for i in 0..10 {
            mixed.insert(&Value::Float(f64::from(i) + 0.5));
        }
        assert!(matches!(
            AxisData::of_document_path(&years),
            AxisData::Ordered {
                ty: PrimitiveType::Int,
                ..
            }
        ));
        // Mostly strings: hashed, whatever numbers it also holds.
        assert!(matches!(
            AxisData::of_document_path(&mixed),
            AxisData::Hashed
        ));
        let axes = [AxisData::of_document_path(&years), AxisData::Hashed];
        // Weighted 4 to 1 (year*4,venue): 16 year intervals at the years' quantiles, 4 venues.
        let cuts = cuts_from_data_weighted(&axes, &[4, 1], 64);
        assert_eq!(cuts[1], AxisCuts::Equal(4));
        let AxisCuts::At(at) = &cuts[0] else {
            panic!("{cuts:?}")
        };
        assert!(at.len() <= 15 && at.len() >= 10, "{at:?}");
        let first = crate::coordinate::coordinate(&Value::Int(1985));
        let last = crate::coordinate::coordinate(&Value::Int(2024));
        assert!(at.iter().all(|&c| c > first && c <= last), "{at:?}");
        // Equal weights cut as a typed subspace's axes.
        assert_eq!(
            cuts_from_data_weighted(&axes, &[1, 1], 64),
            cuts_from_data(&axes, 64)
        );
    }

    #[test]
    fn region_shares_cover_the_objects() {
        let prices = sketch(&draw(0, 5000, 7));
        let axes = [
            AxisData::Ordered {
                ty: PrimitiveType::Int,
                values: &prices,
            },
            AxisData::Hashed,
        ];
        for cuts in [
            vec![AxisCuts::Equal(8), AxisCuts::Equal(8)],
            cuts_from_data(&axes, 64),
        ] {
            let t = Tessellation::with_cuts(&cuts);
            let shares: Vec<f64> = (0..t.regions_count())
                .map(|r| region_share(&axes, &t.region_bounds(crate::tessellation::RegionIndex(r))))
                .collect();
            let total: f64 = shares.iter().sum();
            assert!((total - 1.0).abs() < 1e-6, "{total}");
            let fullest = shares.iter().copied().fold(0.0, f64::max);
            assert!((fullest - predicted_fullest_share(&axes, &cuts)).abs() < 1e-9);
        }
    }

    /// Values from the distributions users have, drawn from a seed (no randomness in the
    /// module under test; a small xorshift here).
    fn draw(kind: u8, n: usize, mut seed: u64) -> Vec<Value> {
        let mut uniform = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        (0..n)
            .map(|_| match kind {
                // Log-normal prices in cents around 5 000 (Box-Muller).
                0 => {
                    let (u, v) = (uniform().max(1e-12), uniform());
                    let z = (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos();
                    Value::Int((8.5 + 0.9 * z).exp() as i64)
                }
                // Unix seconds within the last year.
                1 => Value::Int(1_760_000_000 + (uniform() * 31_536_000.0) as i64),
                // Ages 0-99.
                2 => Value::Int((uniform() * 100.0) as i64),
                // Ratings 1.0-5.0 in tenths.
                _ => Value::Float(1.0 + (uniform() * 40.0).round() / 10.0),
            })
            .collect()
    }

    fn sketch(values: &[Value]) -> Sketch {
        let mut s = Sketch::new();
        values.iter().for_each(|v| s.insert(v));
        s
    }

    #[test]
    fn balance_and_gain() {
        assert!(!out_of_balance(&[10, 10, 10, 10], 1));
        assert!(out_of_balance(&[100, 10, 10, 10], 1));
        assert!(
            !out_of_balance(&[100, 10, 10, 10], 1000),
            "too few objects to bother"
        );
        assert!(!out_of_balance(&[], 0));
        // Prices all in one slice of the whole axis: a re-cut at their quantiles pays; the
        // same cuts again do not.
        let prices = draw(0, 5000, 7);
        let stats = sketch(&prices);
        let axes = [AxisData::Ordered {
            ty: PrimitiveType::Int,
            values: &stats,
        }];
        let equal = Tessellation::new(1, 16).axis_cuts();
        assert!(predicted_fullest_share(&axes, &equal) > 0.99);
        let fitted = cuts_from_data(&axes, 16);
        let share = predicted_fullest_share(&axes, &fitted);
        assert!(share < 2.0 / 16.0, "{share}");
        assert!(recut_pays(&axes, &equal, &fitted));
        assert!(!recut_pays(&axes, &fitted, &fitted));
        // Coordinates back to values.
        for v in [-5i64, 0, 7, i64::MAX, i64::MIN] {
            assert_eq!(
                value_of(
                    PrimitiveType::Int,
                    crate::coordinate::coordinate(&Value::Int(v))
                ),
                v as f64
            );
        }
        for x in [-2.5f64, 0.0, 1e300, -1e-300, 3.25] {
            assert_eq!(
                value_of(
                    PrimitiveType::Float,
                    crate::coordinate::coordinate(&Value::Float(x))
                ),
                x
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Cut by their own statistics, real-looking values fill every region of a 1-D
        /// subspace, the fullest with at most twice the mean (counted here by brute force).
        #[test]
        fn quantile_cuts_spread_real_values(kind in 0u8..3, seed in 1u64.., partitions in 2u32..80) {
            let values = draw(kind, 20_000, seed);
            let stats = sketch(&values);
            let cuts = cuts_from_data(&[AxisData::Ordered { ty: PrimitiveType::Int, values: &stats }], partitions);
            let t = Tessellation::with_cuts(&cuts);
            let mut held = vec![0usize; t.regions_count() as usize];
            for v in &values {
                held[t.region_of(&[crate::coordinate::coordinate(v)]).0 as usize] += 1;
            }
            let distinct: std::collections::BTreeSet<i64> =
                values.iter().map(|v| match v { Value::Int(i) => *i, _ => unreachable!() }).collect();
            prop_assert!(held.iter().all(|&n| n > 0), "an empty region: {:?}", held);
            prop_assert!(t.regions_count() <= partitions);
            // Ages (100 values, 200 objects each): two quantiles the sketch places in one value
            // merge, so a few regions fewer than asked.
            let most = (partitions as usize).min(distinct.len());
            let least = if kind == 2 { most * 9 / 10 } else { most };
            prop_assert!(
                (least..=most).contains(&(t.regions_count() as usize)),
                "{} regions, {} at most", t.regions_count(), most
            );
            let mean = values.len() as f64 / held.len() as f64;
            let fullest = *held.iter().max().unwrap() as f64;
            // Ages: 100 values of 200 objects each cannot split more finely than one value.
            let bound = if kind == 2 { 2.0 * mean + 200.0 } else { 2.0 * mean };
            prop_assert!(fullest <= bound, "fullest {} against mean {}: {:?}", fullest, mean, held);
        }

        /// A Zipf-distributed city (1 000 values, the first holding about 13 % of the objects)
        /// beside log-normal prices: cut at its hashes' quantiles, the city axis gives the
        /// heavy cities intervals of their own, and the fullest region holds at most 2/R of
        /// the objects; equal slices of the hash do not (counted here by brute force).
        #[test]
        fn hash_quantiles_spread_a_zipf_axis(seed in 1u64..) {
            let prices = draw(0, 20_000, seed);
            let weights: Vec<f64> = (1..=1000).map(|r| 1.0 / f64::from(r)).collect();
            let total: f64 = weights.iter().sum();
            let mut state = seed;
            let cities: Vec<Value> = (0..20_000)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let mut u = (state >> 11) as f64 / (1u64 << 53) as f64 * total;
                    let rank = weights.iter().position(|w| { u -= w; u < 0.0 }).unwrap_or(999);
                    Value::from(format!("city{rank}").as_str())
                })
                .collect();
            let mut hashes = Sketch::new();
            cities.iter().for_each(|c| hashes.insert_hash(c));
            let price_stats = sketch(&prices);
            let fullest_share = |city_axis: AxisData| {
                let axes = [city_axis, AxisData::Ordered { ty: PrimitiveType::Int, values: &price_stats }];
                let t = Tessellation::with_cuts(&cuts_from_data(&axes, 64));
                let mut held = vec![0usize; t.regions_count() as usize];
                for (c, p) in cities.iter().zip(&prices) {
                    held[t.region_of(&[crate::coordinate::coordinate(c), crate::coordinate::coordinate(p)]).0 as usize] += 1;
                }
                *held.iter().max().unwrap() as f64 / 20_000.0
            };
            let by_hashes = fullest_share(AxisData::HashedBy { hashes: &hashes });
            let equal = fullest_share(AxisData::Hashed);
            prop_assert!(by_hashes <= 2.0 / 64.0, "fullest {} by hash quantiles", by_hashes);
            prop_assert!(by_hashes < equal, "{} by hashes, {} in equal slices", by_hashes, equal);
        }

        /// Two ordered axes (ages and ratings, independent): every region holds objects and
        /// the fullest at most twice the mean; a hashed third axis keeps equal slices.
        #[test]
        fn two_ordered_axes_and_a_hashed_one(seed in 1u64..) {
            let ages = draw(2, 20_000, seed);
            let ratings = draw(3, 20_000, seed.rotate_left(17) | 1);
            let (a, r) = (sketch(&ages), sketch(&ratings));
            let cuts = cuts_from_data(&[
                AxisData::Ordered { ty: PrimitiveType::Int, values: &a },
                AxisData::Ordered { ty: PrimitiveType::Float, values: &r },
                AxisData::Hashed,
            ], 64);
            prop_assert_eq!(&cuts[2], &AxisCuts::Equal(cuts[2].intervals() as u32));
            let t = Tessellation::with_cuts(&cuts[..2]);
            prop_assert!(u64::from(t.regions_count()) * cuts[2].intervals() >= 48, "{:?}", cuts);
            let mut held = vec![0usize; t.regions_count() as usize];
            for (age, rating) in ages.iter().zip(&ratings) {
                let point = [crate::coordinate::coordinate(age), crate::coordinate::coordinate(rating)];
                held[t.region_of(&point).0 as usize] += 1;
            }
            let mean = ages.len() as f64 / held.len() as f64;
            prop_assert!(held.iter().all(|&n| n > 0), "an empty region: {:?}", held);
            prop_assert!(*held.iter().max().unwrap() as f64 <= 2.0 * mean, "{:?}", held);
        }
    }
}
