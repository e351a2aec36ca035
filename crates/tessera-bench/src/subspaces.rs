//! Workload `subspaces` (not YCSB): what each extra subspace costs a write, seed 002 Fig. 10.
//!
//! The space has ten int attributes `a0..a9` and `S` non-key subspaces (`0..=10`), subspace `i`
//! being the one attribute `ai`. Every put writes all ten attributes, and every value of a run
//! lies in a different region of its subspace than the value it replaces, so each update moves
//! the object in every subspace: its value-dependent chain visits the key region's `K` replicas
//! and then, per subspace, the `K` replicas of the old region and the `K` of the new one —
//! `K(1 + 2S)` hops ([`SubspacesPlan::update_chain_length`]). Latency should grow linearly with
//! that length.
//!
//! Everything here is pure: which key operation `i` writes, and the values it writes, are
//! functions of `i` alone, so no task needs to remember what it wrote before.
//!
//! * Load: object `n` (key `k{n}`) at generation 0.
//! * Run: operation `i` writes object `i % records` at generation `1 + i / records`: a sweep
//!   over the objects, again and again. Attribute `ai` of object `n` at generation `g` lies in
//!   interval `(h(n, i) + g) mod P` of its axis ([`SubspacesPlan::region`]), so two successive
//!   generations are always in neighbouring, different regions (`P >= 2`), and the objects
//!   spread evenly over the regions whatever `g` is.
//!
//! `--phase run` alone assumes the objects are as the load left them (generation 0); a second
//! run over the same space starts at generation 1 again, and its first write of an object that
//! is already at generation 1 would not move it. Run load and run in one invocation
//! (`--phase both`, the default) on a fresh space.

/// Int attributes of the space, `a0..a9`: all of them are written by every put.
pub const ATTRIBUTES: usize = 10;
/// Most non-key subspaces (one per attribute).
pub const MAX_SUBSPACES: u32 = ATTRIBUTES as u32;

const SIGN: u64 = 1 << 63;

/// The name of attribute `i` (`a0..a9`).
pub fn attribute(i: usize) -> &'static str {
    const NAMES: [&str; ATTRIBUTES] = ["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9"];
    NAMES[i]
}

/// The key of object `n`.
pub fn key(n: u64) -> String {
    format!("k{n}")
}

/// SplitMix64's finaliser: a fixed, well-mixed hash of a `u64` (not for security).
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The interval (of `intervals` equal ones along the `u64` axis) holding int `value`: Tessera's
/// coordinate of an int flips its sign bit, and interval `j` of `n` holds coordinates `c` with
/// `c * n >> 64 == j` (`tessera-geometry`: `coordinate`, `Tessellation::interval_of`).
pub fn interval_of(value: i64, intervals: u32) -> u32 {
    let coordinate = (value as u64) ^ SIGN;
    ((coordinate as u128 * intervals as u128) >> 64) as u32
}

/// An int in interval `j` of `intervals`, within a quarter interval of the interval's centre
/// (`jitter` picks where), so that it is in `j` however the boundaries are rounded.
pub fn value_in_interval(j: u32, intervals: u32, jitter: u64) -> i64 {
    assert!(j < intervals);
    let n = intervals as u128;
    let width = (1u128 << 64) / n;
    let centre = ((2 * j as u128 + 1) << 64) / (2 * n);
    let quarter = (width / 4).max(1);
    let offset = (jitter as u128 % (2 * quarter)) as i128 - quarter as i128;
    let coordinate = (centre as i128 + offset).clamp(0, u64::MAX as i128) as u64;
    (coordinate ^ SIGN) as i64
}

/// The space and the writes of one `subspaces` benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubspacesPlan {
    /// Non-key subspaces, `0..=MAX_SUBSPACES`.
    pub subspaces: u32,
    /// `create P partitions`: regions per subspace (one dimension each: `P` intervals).
    pub partitions: u32,
}

impl SubspacesPlan {
    pub fn new(subspaces: u32, partitions: u32) -> Result<SubspacesPlan, String> {
        if subspaces > MAX_SUBSPACES {
            return Err(format!("--subspaces {subspaces}: at most {MAX_SUBSPACES}"));
        }
        if partitions < 2 {
            return Err(format!("--partitions {partitions}: workload subspaces needs at least 2, so every update can move"));
        }
        Ok(SubspacesPlan {
            subspaces,
            partitions,
        })
    }

    /// One space per `S`, so sweeps over `S` on one server do not collide.
    pub fn space_name(&self) -> String {
        format!("subspaces{}", self.subspaces)
    }

    /// The space description. It says nothing about failures tolerated: a cluster applies its
    /// default (`tessera dev --replicas K`), a standalone server has one replica anyway.
    pub fn description(&self) -> String {
        let mut d = format!("space {}\nkey id\nattributes ", self.space_name());
        d.push_str(
            &(0..ATTRIBUTES)
                .map(|i| format!("int {}", attribute(i)))
                .collect::<Vec<_>>()
                .join(", "),
        );
        d.push('\n');
        for i in 0..self.subspaces as usize {
            d.push_str(&format!("subspace {}\n", attribute(i)));
        }
        d.push_str(&format!("create {} partitions\n", self.partitions));
        d
    }

    /// The region (interval of its axis) attribute `attr` of object `n` lies in at `generation`.
    pub fn region(&self, n: u64, attr: usize, generation: u64) -> u32 {
        let start = mix(n.wrapping_mul(ATTRIBUTES as u64).wrapping_add(attr as u64))
            % self.partitions as u64;
        ((start + generation % self.partitions as u64) % self.partitions as u64) as u32
    }

    /// The value of attribute `attr` of object `n` at `generation`.
    pub fn value(&self, n: u64, attr: usize, generation: u64) -> i64 {
        let jitter = mix(mix(n ^ (attr as u64) << 56) ^ generation);
        value_in_interval(self.region(n, attr, generation), self.partitions, jitter)
    }

    /// Every attribute of object `n` at `generation`, `a0..a9`.
    pub fn values(&self, n: u64, generation: u64) -> [i64; ATTRIBUTES] {
        std::array::from_fn(|attr| self.value(n, attr, generation))
    }

    /// Run operation `i`: the object it writes and that object's new generation.
    pub fn update(&self, i: u64, records: u64) -> (u64, u64) {
        assert!(records > 0);
        (i % records, 1 + i / records)
    }

    /// Hops of the chain of an update that moves the object in every subspace: the key
    /// region's `replicas`, then old and new region of each subspace.
    pub fn update_chain_length(&self, replicas: u64) -> u64 {
        replicas * (1 + 2 * self.subspaces as u64)
    }

    /// Hops of the chain of an insert (the load): key region, then the new region of each
    /// subspace.
    pub fn insert_chain_length(&self, replicas: u64) -> u64 {
        replicas * (1 + self.subspaces as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_parse_with_one_single_attribute_subspace_each() {
        for s in 0..=MAX_SUBSPACES {
            let plan = SubspacesPlan::new(s, 64).expect("valid");
            let schema = tessera_types::parse_space(&plan.description()).expect("parses");
            assert_eq!(schema.name, plan.space_name());
            assert_eq!(schema.attributes.len(), 1 + ATTRIBUTES, "key and a0..a9");
            // The key subspace plus S others, each of one attribute.
            assert_eq!(schema.subspaces.len(), 1 + s as usize);
            for sub in &schema.subspaces[1..] {
                assert_eq!(sub.dimensions.len(), 1);
            }
            assert_eq!(schema.partitions, 64);
            assert!(
                !plan.description().contains("tolerate"),
                "the cluster's default decides"
            );
        }
        assert!(SubspacesPlan::new(11, 64).is_err());
        assert!(SubspacesPlan::new(3, 1).is_err());
    }

    #[test]
    fn chain_lengths_follow_k_times_one_plus_two_s() {
        let plan = |s| SubspacesPlan::new(s, 64).unwrap();
        assert_eq!(plan(0).update_chain_length(1), 1);
        assert_eq!(plan(0).update_chain_length(2), 2);
        assert_eq!(plan(10).update_chain_length(2), 42);
        assert_eq!(plan(3).update_chain_length(1), 7);
        assert_eq!(plan(3).insert_chain_length(2), 8);
    }

    #[test]
    fn values_fall_in_their_region() {
        for partitions in [2, 3, 7, 64, 1000] {
            let plan = SubspacesPlan::new(10, partitions).unwrap();
            for n in 0..200 {
                for attr in 0..ATTRIBUTES {
                    for g in 0..5 {
                        let v = plan.value(n, attr, g);
                        assert_eq!(
                            interval_of(v, partitions),
                            plan.region(n, attr, g),
                            "P={partitions} n={n} a{attr} g={g}"
                        );
                    }
                }
            }
        }
        // The edges of the axis: interval 0 and the last one.
        assert_eq!(interval_of(i64::MIN, 4), 0);
        assert_eq!(interval_of(i64::MAX, 4), 3);
        assert_eq!(interval_of(-1, 2), 0);
        assert_eq!(interval_of(0, 2), 1);
    }

    #[test]
    fn every_update_moves_every_attribute_to_another_region() {
        let plan = SubspacesPlan::new(10, 64).unwrap();
        let records = 50;
        // Operations sweep the objects: each is written once per pass, one generation later.
        let mut generation = vec![0u64; records as usize];
        for i in 0..10 * records {
            let (n, g) = plan.update(i, records);
            assert_eq!(g, generation[n as usize] + 1, "op {i}");
            let (old, new) = (plan.values(n, generation[n as usize]), plan.values(n, g));
            for attr in 0..ATTRIBUTES {
                assert_ne!(old[attr], new[attr], "every attribute changes");
                assert_ne!(
                    interval_of(old[attr], 64),
                    interval_of(new[attr], 64),
                    "op {i} a{attr} moves"
                );
            }
            generation[n as usize] = g;
        }
    }

    #[test]
    fn objects_spread_over_every_region() {
        let plan = SubspacesPlan::new(1, 16).unwrap();
        for g in [0, 1, 7] {
            let mut per_region = [0u32; 16];
            for n in 0..16_000 {
                per_region[plan.region(n, 0, g) as usize] += 1;
            }
            // 1000 expected per region; a generous band, this only guards against clumping.
            assert!(
                per_region.iter().all(|&c| (800..1200).contains(&c)),
                "generation {g}: {per_region:?}"
            );
        }
    }
}
