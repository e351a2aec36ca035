//! The configurator (seed 000 ch. 5): enumerate candidate configurations within bounds, score
//! each with the model, cluster those of equal throughput, rank the clusters, and score the
//! baselines beside them.
//!
//! What is searched, and what is pruned (each rule keeps a configuration as good as any it
//! drops, so the best configuration within the bounds is always found when the search is
//! exhaustive; `tests/brute_force.rs` checks it against every configuration of small cases):
//!
//! 1. Dimensions are the attributes the workload names that can be dimensions (primitive, not
//!    the key). Subspaces have at most `dimensions_max` of them (a bound, not a pruning).
//! 2. A subspace is a *candidate* only if some search would contact fewer regions in it than in
//!    the key subspace. Tessera's client picks the subspace of fewest regions, then fewest
//!    dimensions, then the first declared (the key subspace, with one dimension, comes first),
//!    so no search would ever use any other subspace; such a subspace only lengthens chains.
//! 3. A configuration in which some subspace is used by no search is *dominated*: without that
//!    subspace every search picks as before and every write is cheaper or as cheap. It is
//!    scored (and counted) but not ranked; the configuration without that subspace is.
//! 4. Hence a configuration needs at most one subspace per search class: at most
//!    min(`subspaces_max`, search classes, candidates) subspaces.
//! 5. The declaration order of the subspaces matters only when a search finds two of them
//!    equally cheap by the client's rule but not by cost; then every order is scored (up to
//!    [`ORDERS_SUBSPACES_MAX`] subspaces) and the best kept.
//!
//! If the configurations to score exceed `configurations_max`, the advisor switches to a beam
//! search (the best `beam_width` configurations of each size are extended by one candidate)
//! and reports `exhaustive: false`.
//!
//! The baselines' configurations are scored and ranked too, even outside the bounds (a
//! hyperspace of every searched attribute can be wider than `dimensions_max`), so the best
//! configuration reported is never worse than a baseline.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use tessera_types::constants::{SUBSPACES_MAX, SUBSPACE_DIMENSIONS_MAX};
use tessera_types::{AttrIndex, SpaceSchema};

use crate::baselines::{baselines, BaselineName};
use crate::calibration::Calibration;
use crate::configuration::Configuration;
use crate::constants::*;
use crate::model::{ClassInSubspace, Model, ModelError, SubspaceTerms};
use crate::prediction::Prediction;
use crate::workload::{Operation, Workload};

/// Most subspaces whose declaration orders are all scored (5! = 120 orders).
pub const ORDERS_SUBSPACES_MAX: usize = 5;

/// Bounds and reporting of the search.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdvisorOptions {
    /// Most subspaces in a configuration (the key subspace not counted).
    pub subspaces_max: usize,
    /// Most dimensions in a subspace.
    pub dimensions_max: usize,
    /// Most configurations scored exhaustively; past it, a beam search.
    pub configurations_max: u64,
    /// Configurations kept per size by the beam search (fewer when needed to score about
    /// `configurations_max` in all).
    pub beam_width: usize,
    /// Relative throughput difference within which configurations form one cluster.
    pub cluster_tolerance: f64,
    /// Clusters reported (`--top K`).
    pub clusters_reported: usize,
    /// Configurations reported per cluster.
    pub configurations_per_cluster: usize,
}

impl Default for AdvisorOptions {
    fn default() -> AdvisorOptions {
        AdvisorOptions {
            subspaces_max: SUBSPACES_MAX_DEFAULT,
            dimensions_max: DIMENSIONS_MAX_DEFAULT,
            configurations_max: CONFIGURATIONS_MAX_DEFAULT,
            beam_width: BEAM_WIDTH_DEFAULT,
            cluster_tolerance: CLUSTER_TOLERANCE_DEFAULT,
            clusters_reported: CLUSTERS_REPORTED_DEFAULT,
            configurations_per_cluster: CONFIGURATIONS_PER_CLUSTER_DEFAULT,
        }
    }
}

/// The advisor's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Advice {
    pub space: String,
    pub objects: u64,
    pub partitions: u32,
    /// K: servers per region.
    pub replicas: u32,
    pub calibration: Calibration,
    pub search: SearchSummary,
    /// Clusters of configurations of equal predicted throughput (within the tolerance), best
    /// first.
    pub clusters: Vec<Cluster>,
    pub baselines: Vec<Baseline>,
    /// The best configuration as a space description (the first of the first cluster).
    pub best_space: String,
}

/// How the configurations were searched.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchSummary {
    /// Every configuration within the bounds was scored (else a beam search ran).
    pub exhaustive: bool,
    /// The attributes subspaces were built from.
    pub attributes: Vec<String>,
    /// Subspaces within the bounds.
    pub subspaces_considered: u64,
    /// Those some search would use (rule 2).
    pub candidate_subspaces: u64,
    /// Every configuration scored, the baselines' included.
    pub configurations_scored: u64,
    /// Scored but not ranked: some subspace serves no search (rule 3).
    pub configurations_dominated: u64,
}

/// Configurations whose predicted throughputs are within the tolerance of the cluster's best.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// 1 for the best cluster.
    pub rank: usize,
    pub throughput_ops_s_max: f64,
    pub throughput_ops_s_min: f64,
    /// All configurations of the cluster; the first `configurations_per_cluster` are listed,
    /// fewest subspaces and dimensions first among equals.
    pub configurations_count: u64,
    pub configurations: Vec<Prediction>,
}

/// A baseline and how it compares.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub name: BaselineName,
    /// Its throughput over the best configuration's.
    pub relative_to_best: f64,
    pub prediction: Prediction,
}

/// Why the advisor cannot answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AdviseError {
    #[error(transparent)]
    Model(#[from] ModelError),
    /// An option out of range.
    #[error("option {name} is {value}: {reason}")]
    BadOption {
        name: &'static str,
        value: String,
        reason: &'static str,
    },
    /// So many attributes that even listing the subspaces exceeds `configurations_max`.
    #[error("{subspaces} subspaces of up to {dimensions_max} dimensions over {attributes} attributes exceed the limit of {limit}: lower dimensions_max")]
    TooManySubspaces {
        subspaces: u64,
        attributes: usize,
        dimensions_max: usize,
        limit: u64,
    },
}

/// A subspace and how it serves each class.
struct Candidate {
    dimensions: Vec<AttrIndex>,
    terms: SubspaceTerms,
}

/// A ranked configuration: indexes into the enumeration's subspaces, in declaration order.
struct Scored {
    cost_s: f64,
    ids: Vec<u32>,
    dimensions: usize,
}

/// Ranks configurations of `schema`'s subspaces for `workload`.
pub fn advise(
    schema: &SpaceSchema,
    workload: &Workload,
    calibration: Calibration,
    options: AdvisorOptions,
) -> Result<Advice, AdviseError> {
    check_options(&options)?;
    let model = Model::new(schema, workload, calibration)?;
    let attributes = dimension_attributes(schema, workload);
    let subspaces_considered: u64 = (1..=options.dimensions_max.min(attributes.len()))
        .map(|k| binomial(attributes.len() as u64, k as u64))
        .fold(0, u64::saturating_add);
    if subspaces_considered > options.configurations_max {
        return Err(AdviseError::TooManySubspaces {
            subspaces: subspaces_considered,
            attributes: attributes.len(),
            dimensions_max: options.dimensions_max,
            limit: options.configurations_max,
        });
    }
    let candidates = candidate_subspaces(&model, &attributes, options.dimensions_max);
    let candidates_count = candidates.len();
    let searches = workload
        .classes()
        .iter()
        .filter(|c| matches!(c.operation, Operation::Search { .. }))
        .count();
    let size_max = options.subspaces_max.min(searches).min(candidates_count);
    let configurations: u64 = (0..=size_max)
        .map(|k| binomial(candidates_count as u64, k as u64))
        .fold(0, u64::saturating_add);
    let exhaustive = configurations <= options.configurations_max;
    let mut enumeration = Enumeration {
        model: &model,
        subspaces: candidates,
        ranked: Vec::new(),
        scored: 0,
        dominated: 0,
    };
    enumeration.score(&[]);
    if exhaustive {
        for k in 1..=size_max {
            combinations(candidates_count, k, |picked| {
                let ids: Vec<u32> = picked.iter().map(|&i| i as u32).collect();
                enumeration.score(&ids);
            });
        }
    } else {
        // Each size scores up to width × candidates configurations: keep the whole beam near
        // the same budget as an exhaustive search.
        let per_size = options.configurations_max / (candidates_count * size_max) as u64;
        let width = options.beam_width.min(per_size.max(1) as usize);
        enumeration.beam(candidates_count, size_max, width);
    }
    let baselines = baselines(schema, workload);
    // A baseline outside the bounds (a wide hyperspace, a subspace per attribute) may beat
    // every configuration within them: rank it too, so the best is the best seen.
    for (_, configuration) in &baselines {
        let ids = enumeration.ids_of(configuration);
        let enumerated = exhaustive
            && ids.len() <= size_max
            && ids.iter().all(|&i| (i as usize) < candidates_count);
        if !enumerated && !enumeration.ranks_the_set_of(&ids) {
            enumeration.score(&ids);
        }
    }
    let Enumeration {
        subspaces,
        mut ranked,
        scored,
        dominated,
        ..
    } = enumeration;
    ranked.sort_by(|a, b| {
        a.cost_s
            .total_cmp(&b.cost_s)
            .then(a.ids.len().cmp(&b.ids.len()))
            .then(a.dimensions.cmp(&b.dimensions))
            .then_with(|| a.ids.cmp(&b.ids))
    });
    let configuration_of = |s: &Scored| {
        Configuration::from_checked(
            s.ids
                .iter()
                .map(|&i| subspaces[i as usize].dimensions.clone())
                .collect(),
        )
    };
    let clusters = clusters(
        &ranked,
        &options,
        |cost| model.throughput(cost),
        |s| {
            let prediction = model.predict(&configuration_of(s));
            debug_assert!((prediction.capacity_ops_s * s.cost_s - 1.0).abs() < 1e-9);
            prediction
        },
    );
    let best = &ranked[0];
    let best_space = configuration_of(best)
        .to_schema(schema)
        .map(|s| s.to_string())
        .unwrap_or_default();
    let baselines = baselines
        .into_iter()
        .map(|(name, configuration)| {
            let prediction = model.predict(&configuration);
            Baseline {
                name,
                relative_to_best: prediction.throughput_ops_s / model.throughput(best.cost_s),
                prediction,
            }
        })
        .collect();
    Ok(Advice {
        space: schema.name.clone(),
        objects: workload.objects(),
        partitions: schema.partitions,
        replicas: schema.replicas(),
        calibration,
        search: SearchSummary {
            exhaustive,
            attributes: attributes
                .iter()
                .map(|&a| schema.attribute(a).name.clone())
                .collect(),
            subspaces_considered,
            candidate_subspaces: candidates_count as u64,
            configurations_scored: scored,
            configurations_dominated: dominated,
        },
        clusters,
        baselines,
        best_space,
    })
}

/// The subspaces of up to `dimensions_max` of `attributes` (each in attribute order) that
/// some search would use (rule 2), fewest dimensions first.
fn candidate_subspaces(
    model: &Model,
    attributes: &[AttrIndex],
    dimensions_max: usize,
) -> Vec<Candidate> {
    let mut candidates = Vec::new();
    for k in 1..=dimensions_max.min(attributes.len()) {
        combinations(attributes.len(), k, |picked| {
            let dimensions: Vec<AttrIndex> = picked.iter().map(|&i| attributes[i]).collect();
            let terms = model.subspace_terms(&dimensions);
            if beats_the_key_for_some_search(model, &terms) {
                candidates.push(Candidate { dimensions, terms });
            }
        });
    }
    candidates
}

fn check_options(o: &AdvisorOptions) -> Result<(), AdviseError> {
    let bad = |name, value: String, reason| {
        Err(AdviseError::BadOption {
            name,
            value,
            reason,
        })
    };
    if o.subspaces_max > SUBSPACES_MAX - 1 {
        return bad(
            "subspaces_max",
            o.subspaces_max.to_string(),
            "a space has at most 31 subspaces besides the key's",
        );
    }
    if o.dimensions_max == 0 || o.dimensions_max > SUBSPACE_DIMENSIONS_MAX {
        return bad(
            "dimensions_max",
            o.dimensions_max.to_string(),
            "a subspace has 1 to 16 dimensions",
        );
    }
    if !(o.cluster_tolerance >= 0.0 && o.cluster_tolerance < 1.0) {
        return bad(
            "cluster_tolerance",
            o.cluster_tolerance.to_string(),
            "it must be in [0, 1)",
        );
    }
    for (name, value) in [
        ("beam_width", o.beam_width),
        ("clusters_reported", o.clusters_reported),
        ("configurations_per_cluster", o.configurations_per_cluster),
    ] {
        if value == 0 {
            return bad(name, "0".into(), "it must be at least 1");
        }
    }
    if o.configurations_max == 0 {
        return bad("configurations_max", "0".into(), "it must be at least 1");
    }
    Ok(())
}

/// The attributes the workload names that can be dimensions, in schema order.
fn dimension_attributes(schema: &SpaceSchema, workload: &Workload) -> Vec<AttrIndex> {
    let mut attributes: Vec<AttrIndex> = workload
        .classes()
        .iter()
        .flat_map(|c| match &c.operation {
            Operation::Search { predicates, .. } => predicates.iter().map(|(a, _)| *a).collect(),
            Operation::Update { attributes } => attributes.clone(),
            Operation::Put | Operation::Get | Operation::Del => vec![],
        })
        .filter(|&a| a != AttrIndex::KEY && schema.attribute(a).ty.is_primitive())
        .collect();
    attributes.sort();
    attributes.dedup();
    attributes
}

/// Rule 2: some search contacts fewer regions in this subspace than in the key subspace.
fn beats_the_key_for_some_search(model: &Model, terms: &SubspaceTerms) -> bool {
    let key = model.key_terms();
    terms
        .classes
        .iter()
        .zip(&key.classes)
        .any(|pair| match pair {
            (
                ClassInSubspace::Search { regions, .. },
                ClassInSubspace::Search {
                    regions: key_regions,
                    ..
                },
            ) => regions < key_regions,
            _ => false,
        })
}

/// The configurations scored so far, over a table of subspaces: the candidates, then any
/// other subspace a baseline brings.
struct Enumeration<'m> {
    model: &'m Model<'m>,
    subspaces: Vec<Candidate>,
    ranked: Vec<Scored>,
    scored: u64,
    dominated: u64,
}

impl Enumeration<'_> {
    /// Scores the configuration of candidates `ids` in its best declaration order; ranks it
    /// unless dominated (rule 3). Returns its cost if ranked.
    fn score(&mut self, ids: &[u32]) -> Option<f64> {
        self.scored += 1;
        let evaluate = |order: &[u32]| {
            let terms: Vec<&SubspaceTerms> = order
                .iter()
                .map(|&i| &self.subspaces[i as usize].terms)
                .collect();
            self.model.evaluate(&terms, |_, _| {})
        };
        let mut best_order = ids.to_vec();
        let mut best = evaluate(ids);
        if best.order_sensitive && ids.len() <= ORDERS_SUBSPACES_MAX {
            let mut order = ids.to_vec();
            while next_permutation(&mut order) {
                let totals = evaluate(&order);
                if totals.cost_s < best.cost_s {
                    (best, best_order) = (totals, order.clone());
                }
            }
        }
        let all_used = if ids.is_empty() {
            0
        } else {
            u64::MAX >> (64 - ids.len())
        };
        if best.used != all_used {
            self.dominated += 1;
            return None;
        }
        let dimensions = ids
            .iter()
            .map(|&i| self.subspaces[i as usize].dimensions.len())
            .sum();
        self.ranked.push(Scored {
            cost_s: best.cost_s,
            ids: best_order,
            dimensions,
        });
        Some(best.cost_s)
    }

    /// The ids of `configuration`'s subspaces, adding those not in the table yet.
    fn ids_of(&mut self, configuration: &Configuration) -> Vec<u32> {
        configuration
            .subspaces()
            .iter()
            .map(|dims| {
                let found = self.subspaces.iter().position(|c| &c.dimensions == dims);
                found.unwrap_or_else(|| {
                    let terms = self.model.subspace_terms(dims);
                    self.subspaces.push(Candidate {
                        dimensions: dims.clone(),
                        terms,
                    });
                    self.subspaces.len() - 1
                }) as u32
            })
            .collect()
    }

    /// Whether a configuration of the same subspaces as `ids`, in any order, is ranked.
    fn ranks_the_set_of(&self, ids: &[u32]) -> bool {
        let mut set = ids.to_vec();
        set.sort();
        self.ranked.iter().any(|s| {
            let mut other = s.ids.clone();
            other.sort();
            other == set
        })
    }

    /// Configurations of 1 to `size_max` of the first `candidates` subspaces, keeping the
    /// `width` best of each size to extend by one more.
    fn beam(&mut self, candidates: usize, size_max: usize, width: usize) {
        let mut level: Vec<Vec<u32>> = vec![vec![]];
        for _ in 0..size_max {
            let mut seen = HashSet::new();
            let mut next: Vec<(f64, Vec<u32>)> = Vec::new();
            for configuration in &level {
                for id in 0..candidates as u32 {
                    if configuration.contains(&id) {
                        continue;
                    }
                    let mut ids = configuration.clone();
                    ids.push(id);
                    ids.sort();
                    if seen.insert(ids.clone()) {
                        if let Some(cost) = self.score(&ids) {
                            next.push((cost, ids));
                        }
                    }
                }
            }
            next.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
            next.truncate(width);
            level = next.into_iter().map(|(_, ids)| ids).collect();
        }
    }
}

/// Clusters `ranked` (best first): each cluster holds the configurations within the tolerance
/// of its best one's throughput.
fn clusters(
    ranked: &[Scored],
    options: &AdvisorOptions,
    throughput: impl Fn(f64) -> f64,
    mut predict: impl FnMut(&Scored) -> Prediction,
) -> Vec<Cluster> {
    let mut clusters = Vec::new();
    let mut start = 0;
    while start < ranked.len() && clusters.len() < options.clusters_reported {
        // Throughput ≥ (1 − tolerance) × the best's, in costs.
        let cost_limit = ranked[start].cost_s / (1.0 - options.cluster_tolerance);
        let end = start
            + ranked[start..]
                .iter()
                .take_while(|s| s.cost_s <= cost_limit)
                .count();
        clusters.push(Cluster {
            rank: clusters.len() + 1,
            throughput_ops_s_max: throughput(ranked[start].cost_s),
            throughput_ops_s_min: throughput(ranked[end - 1].cost_s),
            configurations_count: (end - start) as u64,
            configurations: ranked[start..end]
                .iter()
                .take(options.configurations_per_cluster)
                .map(&mut predict)
                .collect(),
        });
        start = end;
    }
    clusters
}

/// Calls `f` with every k-subset of 0..n, in lexicographic order.
fn combinations(n: usize, k: usize, mut f: impl FnMut(&[usize])) {
    if k > n {
        return;
    }
    let mut picked: Vec<usize> = (0..k).collect();
    loop {
        f(&picked);
        let Some(i) = (0..k).rev().find(|&i| picked[i] < n - k + i) else {
            return;
        };
        picked[i] += 1;
        for j in i + 1..k {
            picked[j] = picked[j - 1] + 1;
        }
    }
}

/// Rearranges `v` into the next permutation in lexicographic order; false after the last.
fn next_permutation(v: &mut [u32]) -> bool {
    let Some(i) = (1..v.len()).rev().find(|&i| v[i - 1] < v[i]) else {
        return false;
    };
    let j = (i..v.len())
        .rev()
        .find(|&j| v[j] > v[i - 1])
        .expect("v[i] is greater");
    v.swap(i - 1, j);
    v[i..].reverse();
    true
}

/// C(n, k), saturating.
fn binomial(n: u64, k: u64) -> u64 {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut result: u64 = 1;
    for i in 0..k {
        // result · (n − i) / (i + 1) stays whole at every step.
        result = match result.checked_mul(n - i) {
            Some(r) => r / (i + 1),
            None => return u64::MAX,
        };
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_and_permutations() {
        let mut all = Vec::new();
        combinations(4, 2, |p| all.push(p.to_vec()));
        assert_eq!(
            all,
            vec![
                vec![0, 1],
                vec![0, 2],
                vec![0, 3],
                vec![1, 2],
                vec![1, 3],
                vec![2, 3]
            ]
        );
        let mut none = 0;
        combinations(2, 3, |_| none += 1);
        assert_eq!(none, 0);
        let mut v = vec![1u32, 2, 3];
        let mut orders = vec![v.clone()];
        while next_permutation(&mut v) {
            orders.push(v.clone());
        }
        assert_eq!(orders.len(), 6);
        assert_eq!(orders[5], vec![3, 2, 1]);
        assert_eq!(binomial(7, 3), 35);
        assert_eq!(binomial(3, 7), 0);
        assert_eq!(binomial(200, 100), u64::MAX);
    }
}
