//! Defaults and bounds of the model and the advisor, in one place, each with its reason.

/// Objects in the space when the workload does not say (`{"objects": N}`). Only searches
/// depend on it (objects read), so it sets how dear a broad search is against an update.
pub const OBJECTS_DEFAULT: u64 = 1_000_000;

/// Distinct values of an attribute when the workload does not say: equality on it matches
/// 1/100 of the objects. A guess of the right order for the seed's hotel attributes (cities,
/// stars, prices); `{"attribute": …, "distinct": N}` replaces it.
pub const DISTINCT_DEFAULT: u64 = 100;

/// Fraction of the objects a range predicate matches when the workload does not say.
pub const RANGE_SELECTIVITY_DEFAULT: f64 = 0.1;

/// Fraction of its coordinate axis an int or float attribute's values occupy when the workload
/// does not say: 1, values spread over the whole axis, as hashed strings are. Real ints and
/// floats rarely are (the axis is all of i64 or f64), see the crate documentation.
pub const SPREAD_DEFAULT: f64 = 1.0;

/// How far the probabilities of a workload's classes may sum from 1 (they are then scaled to
/// sum to exactly 1). Loose enough for three classes written `0.333`.
pub const PROBABILITY_SUM_TOLERANCE: f64 = 1e-3;

/// Most subspaces in a candidate configuration. Every subspace lengthens every update's chain
/// by K servers, so the best configurations of the seed's workloads have one to three.
pub const SUBSPACES_MAX_DEFAULT: usize = 3;

/// Most dimensions of a candidate subspace. A search leaving d' of d dimensions open contacts
/// R^(d'/d) regions, so wide subspaces pay off only for queries fixing most of them.
pub const DIMENSIONS_MAX_DEFAULT: usize = 3;

/// Most configurations the advisor scores exhaustively. About a second of scoring; past it
/// the advisor searches with a beam instead (and says so).
pub const CONFIGURATIONS_MAX_DEFAULT: u64 = 1_000_000;

/// Configurations kept per level by the beam search, when the space is too large to score
/// exhaustively.
pub const BEAM_WIDTH_DEFAULT: usize = 2_000;

/// Relative difference of predicted throughput within which configurations form one cluster
/// (seed 000 §5.1): 1 %, well inside the model's error of 5-10 % (seed 000 §4.5).
pub const CLUSTER_TOLERANCE_DEFAULT: f64 = 0.01;

/// Clusters an advice reports (`tessera advise --top K` sets it).
pub const CLUSTERS_REPORTED_DEFAULT: usize = 5;

/// Configurations reported per cluster; the cluster still counts all of them.
pub const CONFIGURATIONS_PER_CLUSTER_DEFAULT: usize = 5;

/// How much faster (predicted) another configuration must be before an adaptive space
/// changes to it: 20 %, well over the model's error on the configurations it ranks first, so a
/// change pays for its build (issue 9).
pub const ADAPT_GAIN_MIN_DEFAULT: f64 = 0.2;

/// Observations running that must find that gain before an adaptive space changes: with the
/// driver's default period of a minute, three minutes of a new workload, not a burst.
pub const ADAPT_OBSERVATIONS_DEFAULT: u32 = 3;

/// Fewest requests an observation must count to be evidence of a workload (an idle space is
/// never reconfigured).
pub const ADAPT_REQUESTS_MIN: f64 = 100.0;

const _: () = assert!(DISTINCT_DEFAULT >= 1);
const _: () = assert!(ADAPT_GAIN_MIN_DEFAULT >= 0.0 && ADAPT_OBSERVATIONS_DEFAULT >= 1);
const _: () = assert!(RANGE_SELECTIVITY_DEFAULT > 0.0 && RANGE_SELECTIVITY_DEFAULT <= 1.0);
const _: () = assert!(SPREAD_DEFAULT > 0.0 && SPREAD_DEFAULT <= 1.0);
const _: () = assert!(SUBSPACES_MAX_DEFAULT < tessera_types::constants::SUBSPACES_MAX);
const _: () = assert!(DIMENSIONS_MAX_DEFAULT <= tessera_types::constants::SUBSPACE_DIMENSIONS_MAX);
const _: () = assert!(CLUSTER_TOLERANCE_DEFAULT >= 0.0 && CLUSTER_TOLERANCE_DEFAULT < 1.0);
