//! Workload `search-fixed` (not YCSB): searches over one 3-attribute subspace fixing `F` of its
//! attributes by equality (`F` in `0..=3`), the others open — how many regions and servers a
//! search visits, and what that costs, as the query narrows.
//!
//! The space has three int attributes `x, y, z` and the subspace `x, y, z` (with 64 partitions,
//! 4 × 4 × 4 regions). Each attribute takes one of [`VALUES`] values spread evenly over the
//! int axis ([`attribute_value`]), so every interval of every axis holds the same number of
//! them and a search fixing `F` attributes crosses `1 / intervals^F` of the regions: all 64 with
//! nothing fixed, 16, 4, and 1 with all three fixed. Object `n` (key `o{n}`) takes its three
//! value indices from a hash of `n`: uniform, so a search returns `records / VALUES^F` objects
//! on average ([`SearchFixedPlan::expected_matches`]).
//!
//! A search fixes the first `F` of `x, y, z`, each to a uniformly drawn value.

use rand::Rng;

use crate::subspaces::{mix, value_in_interval};

/// The benchmark space's name (one space for every `F`: load once, run each `F` on the same data).
pub const SPACE_NAME: &str = "fixed";
/// The subspace's attributes, in the order searches fix them.
pub const ATTRIBUTES: [&str; 3] = ["x", "y", "z"];
/// Distinct values per attribute.
pub const VALUES: u32 = 16;

/// The `j`-th of the [`VALUES`] values an attribute takes (`j < VALUES`): the middle of the
/// `j`-th sixteenth of the int axis (order-preserving, so value `j` lies in interval
/// `j * intervals / VALUES` of any tessellation of that axis).
pub fn attribute_value(j: u32) -> i64 {
    value_in_interval(j, VALUES, 0)
}

/// The key of object `n`.
pub fn key(n: u64) -> String {
    format!("o{n}")
}

/// The value indices (`0..VALUES` each) of object `n`'s `x, y, z`.
pub fn indices(n: u64) -> [u32; 3] {
    let h = mix(n ^ 0x5EA2_C4F1_7ED0_0000);
    std::array::from_fn(|d| ((h >> (16 * d)) % VALUES as u64) as u32)
}

/// Object `n`'s `x, y, z`.
pub fn object(n: u64) -> [i64; 3] {
    indices(n).map(attribute_value)
}

/// The space and the searches of one `search-fixed` benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SearchFixedPlan {
    /// Attributes each search fixes, `0..=3`: the first `fixed` of `x, y, z`.
    pub fixed: u32,
    /// `create P partitions` of the space.
    pub partitions: u32,
}

impl SearchFixedPlan {
    pub fn new(fixed: u32, partitions: u32) -> Result<SearchFixedPlan, String> {
        if fixed as usize > ATTRIBUTES.len() {
            return Err(format!(
                "--fixed {fixed}: the subspace has {} attributes",
                ATTRIBUTES.len()
            ));
        }
        if partitions == 0 {
            return Err("--partitions must be at least 1".into());
        }
        Ok(SearchFixedPlan { fixed, partitions })
    }

    /// The space description. Like `subspaces`, it leaves failures tolerated to the cluster's
    /// default.
    pub fn description(&self) -> String {
        format!(
            "space {SPACE_NAME}\nkey id\nattributes int x, int y, int z\nsubspace x, y, z\ncreate {} partitions\n",
            self.partitions
        )
    }

    /// One search: `(attribute, value)` for each fixed attribute, nothing for the open ones.
    pub fn query<R: Rng + ?Sized>(&self, rng: &mut R) -> Vec<(&'static str, i64)> {
        ATTRIBUTES[..self.fixed as usize]
            .iter()
            .map(|&a| (a, attribute_value(rng.random_range(0..VALUES))))
            .collect()
    }

    /// Whether `xyz` satisfies `query`.
    pub fn matches(xyz: &[i64; 3], query: &[(&str, i64)]) -> bool {
        query.iter().all(|(a, v)| {
            ATTRIBUTES
                .iter()
                .position(|x| x == a)
                .is_some_and(|d| xyz[d] == *v)
        })
    }

    /// Objects a search returns on average when `records` are loaded.
    pub fn expected_matches(&self, records: u64) -> f64 {
        records as f64 / (VALUES as f64).powi(self.fixed as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subspaces::interval_of;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn description_parses_with_one_three_attribute_subspace() {
        let plan = SearchFixedPlan::new(2, 64).unwrap();
        let schema = tessera_types::parse_space(&plan.description()).expect("parses");
        assert_eq!(schema.name, SPACE_NAME);
        assert_eq!(schema.subspaces.len(), 2, "key subspace and x, y, z");
        assert_eq!(schema.subspaces[1].dimensions.len(), 3);
        assert!(SearchFixedPlan::new(4, 64).is_err());
    }

    #[test]
    fn values_are_ordered_and_spread_evenly_over_the_intervals() {
        let values: Vec<i64> = (0..VALUES).map(attribute_value).collect();
        assert!(values.windows(2).all(|w| w[0] < w[1]));
        // 64 partitions over 3 dimensions: 4 intervals per axis, 4 values in each.
        for interval in 0..4 {
            assert_eq!(
                values
                    .iter()
                    .filter(|&&v| interval_of(v, 4) == interval)
                    .count(),
                4
            );
        }
    }

    #[test]
    fn queries_fix_the_first_f_attributes() {
        let mut rng = SmallRng::seed_from_u64(1);
        for f in 0..=3 {
            let plan = SearchFixedPlan::new(f, 64).unwrap();
            for _ in 0..100 {
                let q = plan.query(&mut rng);
                assert_eq!(
                    q.iter().map(|(a, _)| *a).collect::<Vec<_>>(),
                    ATTRIBUTES[..f as usize]
                );
                assert!(q.iter().all(|(_, v)| values_contain(*v)));
            }
        }
    }

    fn values_contain(v: i64) -> bool {
        (0..VALUES).any(|j| attribute_value(j) == v)
    }

    #[test]
    fn searches_return_records_over_values_to_the_f_on_average() {
        let records = 20_000;
        let objects: Vec<[i64; 3]> = (0..records).map(object).collect();
        let mut rng = SmallRng::seed_from_u64(2);
        for f in 0..=3 {
            let plan = SearchFixedPlan::new(f, 64).unwrap();
            let queries = 400;
            let found: usize = (0..queries)
                .map(|_| {
                    let q = plan.query(&mut rng);
                    objects
                        .iter()
                        .filter(|o| SearchFixedPlan::matches(o, &q))
                        .count()
                })
                .sum();
            let mean = found as f64 / queries as f64;
            let expected = plan.expected_matches(records);
            assert!(
                (mean - expected).abs() <= 0.1 * expected + 1.0,
                "F={f}: mean {mean}, expected {expected}"
            );
        }
    }

    #[test]
    fn every_value_combination_is_used() {
        let mut seen = std::collections::BTreeSet::new();
        for n in 0..100_000 {
            seen.insert(indices(n));
        }
        assert_eq!(seen.len(), (VALUES * VALUES * VALUES) as usize);
    }
}
