//! What a benchmark run measured, serialised as JSON by `tessera bench`.
//!
//! Units are in the field names: `_us` microseconds, `_s` seconds; throughputs are operations
//! per second of the phase's wall-clock time.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

/// One phase (load or run).
#[derive(Clone, Debug, Serialize)]
pub struct PhaseReport {
    /// Successful operations of every type per second.
    pub overall_throughput: f64,
    pub elapsed_s: f64,
    /// Successful operations of every type.
    pub operations: u64,
    /// Failed operations of every type.
    pub errors: u64,
    /// True when `--duration-s` stopped the phase before all its operations were issued.
    pub stopped_by_duration: bool,
    /// Per operation type that was attempted: `read`, `update`, `insert`, `scan`,
    /// `read_modify_write`, `search`.
    pub ops: BTreeMap<String, OpReport>,
    /// The first few distinct errors (operation: message), if any failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub error_samples: Vec<String>,
}

/// One operation type within a phase. Latencies cover successful operations only, from the call
/// into the target until its reply, in microseconds (HdrHistogram, 3 significant digits).
#[derive(Clone, Debug, Serialize)]
pub struct OpReport {
    /// Successful operations.
    pub count: u64,
    /// Failed operations: connection or server errors, and reads of records that were not found
    /// (YCSB counts `NOT_FOUND` as a failure too).
    pub errors: u64,
    /// The part of `errors` that were reads finding no record.
    pub not_found: u64,
    /// `count` per second of the phase.
    pub throughput: f64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// Scans only: records returned in total, to check that scans found data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records_scanned: Option<u64>,
    /// Searches only: records returned in total (divide by `count` for the mean per search).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records_returned: Option<u64>,
}

impl OpReport {
    pub(crate) fn new(
        histogram: &Histogram<u64>,
        errors: u64,
        not_found: u64,
        elapsed_s: f64,
        records_scanned: Option<u64>,
    ) -> OpReport {
        let count = histogram.len();
        let empty = count == 0;
        let q = |quantile: f64| {
            if empty {
                0
            } else {
                histogram.value_at_quantile(quantile)
            }
        };
        OpReport {
            count,
            errors,
            not_found,
            throughput: if elapsed_s > 0.0 {
                count as f64 / elapsed_s
            } else {
                0.0
            },
            mean_us: if empty { 0.0 } else { histogram.mean() },
            p50_us: q(0.50),
            p95_us: q(0.95),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: if empty { 0 } else { histogram.max() },
            records_scanned,
            records_returned: None,
        }
    }
}

/// Where the benchmark ran: read from the client's configuration after the space exists.
#[derive(Clone, Debug, Serialize)]
pub struct Deployment {
    /// Servers in the configuration (1 for a standalone server).
    pub servers: usize,
    /// Replicas of each region of the benchmark space (K; 1 on a standalone server).
    pub replicas: u64,
}

/// The `subspaces` section of the report.
#[derive(Clone, Debug, Serialize)]
pub struct SubspacesReport {
    pub space: String,
    /// Non-key subspaces (S), one attribute each.
    pub subspaces: u32,
    pub partitions: u32,
    #[serde(flatten)]
    pub deployment: Deployment,
    /// Chain of every run-phase put: K(1 + 2S) (each put moves the object in every subspace).
    pub chain_length: u64,
    /// Chain of every load-phase put (an insert): K(1 + S).
    pub insert_chain_length: u64,
}

/// The `search_fixed` section of the report.
#[derive(Clone, Debug, Serialize)]
pub struct SearchFixedReport {
    pub space: String,
    /// Attributes of `x, y, z` each search fixes (F).
    pub fixed: u32,
    pub partitions: u32,
    /// Distinct values each attribute takes.
    pub values_per_attribute: u32,
    #[serde(flatten)]
    pub deployment: Deployment,
    /// records / values_per_attribute^F.
    pub expected_objects_per_search: f64,
    /// Objects returned per successful run-phase search (absent without a run phase).
    pub mean_objects_returned: Option<f64>,
    /// What `Client::explain` says of this query shape, over `EXPLAIN_SAMPLES` queries.
    pub explain: ExplainSummary,
}

/// `Client::explain` over several queries of one shape.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ExplainSummary {
    pub queries: u64,
    /// The subspace the search chose (of the first query), by its dimensions.
    pub subspace_dimensions: Vec<String>,
    pub subspace_regions: u64,
    pub servers_contacted_mean: f64,
    pub servers_contacted_min: u64,
    pub servers_contacted_max: u64,
    pub regions_contacted_mean: f64,
    pub regions_contacted_min: u64,
    pub regions_contacted_max: u64,
}

impl ExplainSummary {
    /// Folds `(servers_contacted, regions_contacted)` pairs.
    pub fn from_samples(
        dimensions: Vec<String>,
        subspace_regions: u64,
        samples: &[(u64, u64)],
    ) -> ExplainSummary {
        let n = samples.len() as u64;
        if n == 0 {
            return ExplainSummary {
                subspace_dimensions: dimensions,
                subspace_regions,
                ..ExplainSummary::default()
            };
        }
        let mean = |f: fn(&(u64, u64)) -> u64| samples.iter().map(f).sum::<u64>() as f64 / n as f64;
        ExplainSummary {
            queries: n,
            subspace_dimensions: dimensions,
            subspace_regions,
            servers_contacted_mean: mean(|s| s.0),
            servers_contacted_min: samples.iter().map(|s| s.0).min().unwrap_or(0),
            servers_contacted_max: samples.iter().map(|s| s.0).max().unwrap_or(0),
            regions_contacted_mean: mean(|s| s.1),
            regions_contacted_min: samples.iter().map(|s| s.1).min().unwrap_or(0),
            regions_contacted_max: samples.iter().map(|s| s.1).max().unwrap_or(0),
        }
    }
}
