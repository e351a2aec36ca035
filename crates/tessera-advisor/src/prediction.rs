//! What the model predicts for one configuration, with the terms that explain it.

use serde::{Deserialize, Serialize};

/// The predicted throughput of a workload under one configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The configuration's subspaces (besides the key subspace), in declaration order.
    pub subspaces: Vec<Vec<String>>,
    /// Operations a second of the whole mix: the capacity, or what the workload's closed-loop
    /// clients get of it when it names them (`crate::Model::throughput`).
    pub throughput_ops_s: f64,
    /// The servers' capacity for the mix: 1 / Σ p_i · cost_i.
    #[serde(default)]
    pub capacity_ops_s: f64,
    /// The closed-loop clients the throughput is for, if the workload names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<u32>,
    /// Their closed loop: writes per fsync, the servers' CPU per operation with the fsyncs'
    /// share, how busy the servers are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_loop: Option<crate::closed_loop::ClosedLoop>,
    /// One entry per query class, in the workload's order.
    pub classes: Vec<ClassPrediction>,
}

/// One query class under one configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassPrediction {
    /// The class's line in the workload.
    pub line: usize,
    /// The class's probability (scaled so that all sum to 1).
    pub probability: f64,
    /// The operation, written out (`search city=eq price=range`, `update price`, `put`, `get`).
    pub operation: String,
    pub terms: ClassTerms,
    /// Seconds of cluster capacity one operation of the class takes.
    pub cost_s: f64,
    /// The throughput of this class alone: 1 / cost_s.
    pub throughput_ops_s: f64,
}

/// The model's terms for one class: what makes its cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClassTerms {
    Search {
        /// The dimensions of the subspace the search uses (the key alone for the key subspace).
        subspace: Vec<String>,
        /// Which subspace: 0 is the key subspace, i the i-th one declared.
        subspace_index: usize,
        /// Regions (so servers' scans) the search contacts; an expectation when it has ranges.
        regions_contacted: f64,
        /// Objects inside the search's box in that subspace: read, then filtered by the
        /// predicates that are not its dimensions.
        objects_read: f64,
        /// Objects the search returns.
        objects_matched: f64,
        /// Storage entries outside the box the search reads (each then seeks): about
        /// m^(open/d) per region crossed when its box fixes some of the subspace's d
        /// dimensions and leaves `open` others open, m the objects per region; 0 otherwise.
        entries_skipped: f64,
    },
    Update {
        /// Servers in the chain (expected: a subspace the update touches adds its new region's
        /// replica set only when the object leaves its region).
        chain_length: f64,
        /// Expected number of subspaces in which the update moves the object to another region.
        subspaces_relocated: f64,
    },
    Put {
        /// Servers in the chain: K (1 + subspaces).
        chain_length: f64,
    },
    Get,
}
