//! YCSB's request distributions, ported from `site.ycsb.generator` so that a Tessera run and a
//! published YCSB run draw keys the same way.
//!
//! Every generator is pure: it owns no random source and takes `&mut impl Rng` per draw, so a
//! driver task seeds one `SmallRng` and the whole request stream replays from `--seed`.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rand::Rng;

/// YCSB's default skew (`zipfian.constant` in `ZipfianGenerator`).
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// The item space of YCSB's `ScrambledZipfianGenerator`: the zipfian draw happens over this many
/// items and is then hashed down onto the record count, so the popularity curve does not depend
/// on how many records exist.
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;

/// zeta(SCRAMBLED_ITEM_COUNT, 0.99), precomputed by YCSB (`ScrambledZipfianGenerator.ZETAN`);
/// computing it would take 10^10 `powf` calls.
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// The sum `sum_{i=st}^{n-1} 1/(i+1)^theta` added to `initial_sum`: YCSB's incremental zeta, so a
/// growing item count (the latest distribution) costs only the new terms.
pub fn zeta(st: u64, n: u64, theta: f64, initial_sum: f64) -> f64 {
    let mut sum = initial_sum;
    for i in st..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// YCSB's `Utils.fnvhash64`: FNV-1a over the eight little-endian bytes of `value`, then the
/// absolute value of the signed result (Java's `Math.abs`; `i64::MIN` maps to 2^63 here where
/// Java would keep it negative — a one-in-2^64 difference).
pub fn fnv_hash64(value: u64) -> u64 {
    const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
    const FNV_PRIME_64: u64 = 1_099_511_628_211;
    let mut hash = FNV_OFFSET_BASIS_64;
    let mut v = value;
    for _ in 0..8 {
        hash ^= v & 0xff;
        hash = hash.wrapping_mul(FNV_PRIME_64);
        v >>= 8;
    }
    (hash as i64).unsigned_abs()
}

/// YCSB's `ZipfianGenerator`: the algorithm of Gray et al., "Quickly Generating Billion-Record
/// Synthetic Databases" (SIGMOD 1994), which draws in O(1) after an O(n) zeta precomputation.
/// Item `base` is the most popular, `base + 1` the next, and so on.
#[derive(Clone, Debug)]
pub struct Zipfian {
    base: u64,
    items: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    /// The item count `zetan` was computed for; draws over more items extend it incrementally.
    count_for_zeta: u64,
}

impl Zipfian {
    /// Items `min..=max` with YCSB's default constant 0.99.
    pub fn new(min: u64, max: u64) -> Zipfian {
        Zipfian::with_theta(min, max, ZIPFIAN_CONSTANT)
    }

    pub fn with_theta(min: u64, max: u64, theta: f64) -> Zipfian {
        assert!(max >= min, "empty zipfian range {min}..={max}");
        let items = max - min + 1;
        let zetan = zeta(0, items, theta, 0.0);
        Zipfian::with_zetan(min, max, theta, zetan)
    }

    /// With a precomputed zeta(items, theta), as `ScrambledZipfian` does for its 10^10 items.
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Zipfian {
        assert!(max >= min, "empty zipfian range {min}..={max}");
        assert!(
            theta > 0.0 && theta < 1.0,
            "zipfian theta {theta} outside (0, 1)"
        );
        let items = max - min + 1;
        let zeta2theta = zeta(0, 2, theta, 0.0);
        let mut z = Zipfian {
            base: min,
            items,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: 0.0,
            count_for_zeta: items,
        };
        z.eta = z.eta_for(items);
        z
    }

    fn eta_for(&self, items: u64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2theta / self.zetan)
    }

    /// The number of items this generator was built for.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// A draw over the configured items.
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        self.next_over(rng, self.items)
    }

    /// A draw over the first `item_count` items (YCSB's `nextLong(itemcount)`): used by the latest
    /// distribution, whose item count grows with every insert. Growing extends zeta with only the
    /// new terms; a smaller count reuses the larger zeta (YCSB's `allowitemcountdecrease = false`),
    /// which the caller avoids by only ever growing.
    pub fn next_over<R: Rng + ?Sized>(&mut self, rng: &mut R, item_count: u64) -> u64 {
        debug_assert!(item_count > 0);
        if item_count > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, item_count, self.theta, self.zetan);
            self.count_for_zeta = item_count;
            // YCSB recomputes eta from the original item count here (a known quirk); using the
            // current count keeps the curve's tail correct as the space grows.
            self.eta = self.eta_for(item_count);
        }
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        let offset = (item_count as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        // The formula can reach item_count itself when u is within one ulp of 1.
        self.base + offset.min(item_count - 1)
    }
}

/// YCSB's `ScrambledZipfianGenerator`: a zipfian draw over 10^10 items, FNV-hashed onto
/// `min..=max`. The popular items are scattered across the key range instead of packed at its
/// start, which is what YCSB's `requestdistribution=zipfian` means.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    min: u64,
    item_count: u64,
    inner: Zipfian,
}

impl ScrambledZipfian {
    pub fn new(min: u64, max: u64) -> ScrambledZipfian {
        assert!(max >= min, "empty scrambled zipfian range {min}..={max}");
        ScrambledZipfian {
            min,
            item_count: max - min + 1,
            inner: Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
        }
    }

    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        let drawn = self.inner.next(rng);
        self.min + fnv_hash64(drawn) % self.item_count
    }
}

/// YCSB's `UniformLongGenerator`: every item of `min..=max` equally likely.
#[derive(Clone, Copy, Debug)]
pub struct Uniform {
    min: u64,
    max: u64,
}

impl Uniform {
    pub fn new(min: u64, max: u64) -> Uniform {
        assert!(max >= min, "empty uniform range {min}..={max}");
        Uniform { min, max }
    }

    pub fn next<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        rng.random_range(self.min..=self.max)
    }
}

/// YCSB's `AcknowledgedCounterGenerator`, shared by all driver tasks: hands out the next insert
/// key, and reports as `last_value` the highest key below which every insert has completed, so
/// readers never ask for a key whose insert is still in flight.
#[derive(Debug)]
pub struct AcknowledgedCounter {
    next: AtomicU64,
    /// The highest key k such that every key < = k has been acknowledged; and acknowledgements
    /// above it that arrived out of order. A mutex suffices: inserts are at most 5% of a run.
    acked: Mutex<(u64, BTreeSet<u64>)>,
    last: AtomicU64,
}

impl AcknowledgedCounter {
    /// Keys `0..start` already exist; the first key handed out is `start`. `start` must be > 0
    /// (YCSB loads at least one record before a run).
    pub fn new(start: u64) -> AcknowledgedCounter {
        assert!(
            start > 0,
            "the acknowledged counter needs at least one loaded record"
        );
        AcknowledgedCounter {
            next: AtomicU64::new(start),
            acked: Mutex::new((start - 1, BTreeSet::new())),
            last: AtomicU64::new(start - 1),
        }
    }

    /// The key for the next insert.
    pub fn next_key(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Marks the insert of `key` finished (successfully or not, as YCSB does: a failed insert must
    /// not block the window forever).
    pub fn acknowledge(&self, key: u64) {
        let mut guard = match self.acked.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let (limit, pending) = &mut *guard;
        if key <= *limit {
            return;
        }
        pending.insert(key);
        while pending.remove(&(*limit + 1)) {
            *limit += 1;
        }
        self.last.store(*limit, Ordering::Release);
    }

    /// The highest key whose insert, and every earlier one, has completed.
    pub fn last_value(&self) -> u64 {
        self.last.load(Ordering::Acquire)
    }
}

/// YCSB's `SkewedLatestGenerator`: a zipfian over recency, so the most recently inserted record is
/// the most popular (workload D's "read the latest status updates").
#[derive(Clone, Debug)]
pub struct Latest {
    zipfian: Zipfian,
}

impl Latest {
    /// `initial_last` is the counter's last value when the run starts (record count − 1).
    pub fn new(initial_last: u64) -> Latest {
        Latest {
            zipfian: Zipfian::new(0, initial_last.max(1) - 1),
        }
    }

    /// A key in `1..=last` (YCSB's `max - zipfian.nextLong(max)`: key 0 is never chosen once any
    /// other exists, inherited from YCSB), favouring `last`.
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R, last: u64) -> u64 {
        if last == 0 {
            return 0;
        }
        last - self.zipfian.next_over(rng, last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use std::collections::HashMap;

    const SAMPLES: usize = 200_000;

    fn rng() -> SmallRng {
        SmallRng::seed_from_u64(0x7e55e4a)
    }

    fn fnv1a_bytes(bytes: &[u8]) -> u64 {
        let mut h: u64 = 0xcbf29ce484222325;
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        h
    }

    #[test]
    fn fnv_is_fnv1a_of_little_endian_bytes() {
        // Published FNV-1a 64 test vector, validating the reference implementation.
        assert_eq!(fnv1a_bytes(b"a"), 0xaf63dc4c8601ec8c);
        for v in [0u64, 1, 42, 999_999, u64::MAX / 3] {
            assert_eq!(
                fnv_hash64(v),
                (fnv1a_bytes(&v.to_le_bytes()) as i64).unsigned_abs()
            );
        }
    }

    #[test]
    fn zipfian_top_items_have_expected_share() {
        let n = 1000;
        let mut z = Zipfian::new(0, n - 1);
        let zetan = zeta(0, n, ZIPFIAN_CONSTANT, 0.0);
        let mut counts = vec![0u64; n as usize];
        let mut r = rng();
        for _ in 0..SAMPLES {
            let v = z.next(&mut r);
            assert!(v < n);
            counts[v as usize] += 1;
        }
        // Gray's method is exact for the two most popular items: p(i) = 1 / ((i+1)^theta zetan).
        for i in 0..2u64 {
            let expected = 1.0 / (((i + 1) as f64).powf(ZIPFIAN_CONSTANT) * zetan);
            let got = counts[i as usize] as f64 / SAMPLES as f64;
            assert!(
                (got - expected).abs() < 0.01,
                "item {i}: share {got}, expected {expected}"
            );
        }
        let top = counts
            .iter()
            .enumerate()
            .max_by_key(|(_, c)| **c)
            .map(|(i, _)| i);
        assert_eq!(top, Some(0));
        // Skew: the first 10% of items take the large majority of the draws.
        let head: u64 = counts[..100].iter().sum();
        assert!(head as f64 / SAMPLES as f64 > 0.6, "head share {head}");
    }

    #[test]
    fn zipfian_grows_incrementally_like_a_fresh_one() {
        let mut grown = Zipfian::new(0, 99);
        let mut r = rng();
        grown.next_over(&mut r, 1000);
        let fresh = Zipfian::new(0, 999);
        assert!((grown.zetan - fresh.zetan).abs() < 1e-9);
        assert!((grown.eta - fresh.eta).abs() < 1e-9);
    }

    #[test]
    fn scrambled_zipfian_spreads_hot_keys() {
        let n = 10_000;
        let mut z = ScrambledZipfian::new(0, n - 1);
        let mut counts: HashMap<u64, u64> = HashMap::new();
        let mut r = rng();
        for _ in 0..SAMPLES {
            let v = z.next(&mut r);
            assert!(v < n);
            *counts.entry(v).or_default() += 1;
        }
        let mut by_count: Vec<(u64, u64)> = counts.into_iter().collect();
        by_count.sort_by_key(|(_, c)| std::cmp::Reverse(*c));
        // Still skewed: the hottest key gets about 1/zetan of the draws (≈ 3.8%).
        let top_share = by_count[0].1 as f64 / SAMPLES as f64;
        assert!(
            (top_share - 1.0 / SCRAMBLED_ZETAN).abs() < 0.01,
            "top share {top_share}"
        );
        // But the ten hottest keys are scattered across the range, not packed at its start.
        let hot: Vec<u64> = by_count[..10].iter().map(|(k, _)| *k).collect();
        let lo = *hot.iter().min().unwrap_or(&0);
        let hi = *hot.iter().max().unwrap_or(&0);
        assert!(hi - lo > n / 2, "hot keys {hot:?} are clustered");
        assert!(
            hot.iter().filter(|k| **k < 10).count() < 3,
            "hot keys {hot:?} are the first keys"
        );
    }

    #[test]
    fn latest_favours_recent_inserts() {
        let counter = AcknowledgedCounter::new(1000);
        let mut latest = Latest::new(counter.last_value());
        let mut r = rng();
        let mut recent = 0;
        for _ in 0..SAMPLES {
            let v = latest.next(&mut r, counter.last_value());
            assert!((1..=999).contains(&v));
            if v >= 990 {
                recent += 1;
            }
        }
        assert!(
            recent as f64 / SAMPLES as f64 > 0.3,
            "recent share {recent}"
        );
        // After more inserts complete, the newest key becomes the most popular.
        for _ in 0..100 {
            let k = counter.next_key();
            counter.acknowledge(k);
        }
        assert_eq!(counter.last_value(), 1099);
        let mut newest = 0;
        let mut old = 0;
        for _ in 0..SAMPLES {
            let v = latest.next(&mut r, counter.last_value());
            assert!(v <= 1099);
            if v == 1099 {
                newest += 1;
            }
            if v == 999 {
                old += 1;
            }
        }
        assert!(
            newest > 10 * old,
            "newest {newest} vs formerly newest {old}"
        );
    }

    #[test]
    fn uniform_covers_the_range_evenly() {
        let u = Uniform::new(100, 199);
        let mut counts = vec![0u64; 100];
        let mut r = rng();
        for _ in 0..SAMPLES {
            let v = u.next(&mut r);
            assert!((100..=199).contains(&v));
            counts[(v - 100) as usize] += 1;
        }
        let expected = SAMPLES as f64 / 100.0;
        for (i, c) in counts.iter().enumerate() {
            assert!(
                (*c as f64 - expected).abs() < expected * 0.1,
                "value {} drawn {c} times",
                i + 100
            );
        }
    }

    #[test]
    fn acknowledged_counter_waits_for_gaps() {
        let c = AcknowledgedCounter::new(10);
        assert_eq!(c.last_value(), 9);
        let (a, b, d) = (c.next_key(), c.next_key(), c.next_key());
        assert_eq!((a, b, d), (10, 11, 12));
        c.acknowledge(12);
        c.acknowledge(11);
        assert_eq!(c.last_value(), 9, "key 10 still in flight");
        c.acknowledge(10);
        assert_eq!(c.last_value(), 12);
    }

    #[test]
    fn same_seed_same_stream() {
        let draw = || {
            let mut z = ScrambledZipfian::new(0, 999);
            let mut r = rng();
            (0..100).map(|_| z.next(&mut r)).collect::<Vec<_>>()
        };
        assert_eq!(draw(), draw());
    }
}
