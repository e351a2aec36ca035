//! Tessera's performance model and automatic configurator (docs/design.md §8; seed 000 ch. 4 and 5,
//! rebuilt for how Tessera works). Pure: no I/O, no clocks, no network.
//!
//! Given a space (its attributes, partitions and tolerance), a workload (query classes with
//! probabilities, [`parse_workload`]) and hardware constants ([`Calibration`]), the
//! [`Model`] predicts the throughput of the workload under any configuration of subspaces, and
//! [`advise`] ranks configurations and compares them with the heuristics of seed 000
//! ([`baselines()`]). [`fit()`] turns measured micro-workloads into constants.
//!
//! # The model
//!
//! Notation: O objects, K = f + 1 servers per region, R partitions. A subspace S of d
//! dimensions is cut along its j-th dimension into n_j slices, ⌊R^(1/d)⌋ or ⌈R^(1/d)⌉ of them
//! with the product closest to R (`tessera_geometry::Tessellation`; 2 dimensions and R = 8 give
//! 3 × 3). The model uses those exact slices, not R^(1/d). Costs are seconds of the cluster's
//! capacity; a class's throughput is 1 / cost.
//!
//! **Search.** A search of class Q, run in subspace S, crosses along dimension j (attribute x):
//!
//! * 1 slice if Q fixes x by equality;
//! * min(n_j, 1 + s_x·f_x·n_j) slices if Q bounds x by a range and x's axis keeps order (int
//!   or float, not the key): s_x is the fraction of objects the range matches, f_x the fraction
//!   of the axis x's values occupy (`spread`), and a range covering a fraction s·f of an axis
//!   cut into n equal slices crosses 1 + s·f·n of them on average;
//! * all n_j slices otherwise (x not in Q, or a range on a hashed axis: strings and the key).
//!
//! The regions it contacts are the product, CR(Q, S) = Π_j slices_j. With equalities only this
//! is seed 000's eq. 4.1, CR = R^(|E|/|S|), E the dimensions Q leaves open, whenever R has an
//! exact d-th root (else it is the product of the actual slices: 256 regions in 3 dimensions
//! are 7 × 6 × 6, so one fixed dimension leaves 36, not 256^(2/3) = 40.3).
//!
//! Objects read: read(Q, S) = O × Π sel_x over the dimensions of S that Q narrows
//! (sel = 1/distinct_x for equality, s_x for a range on an ordered axis). Objects matched:
//! O × Π sel_x over all of Q's predicates; a search's measured `matches` (the trace gives it)
//! replaces this. The box holds every match, so read(Q, S) is at least the matches (and at
//! most O): correlated attributes (a hotel's city and its tel) match far more than
//! independence predicts, and the box on one of them still holds what it holds. Cost:
//!
//! cost(Q, S) = c0 + a · CR(Q, S) + b · read(Q, S) + s · skipped(Q, S)
//!
//! skipped(Q, S) counts the storage entries outside the box that the Z-order walk reads (each
//! followed by a BIGMIN seek) when Q fixes some of S's d dimensions by equality and leaves
//! `open` others open: about m^(open/d) per region crossed, m the distinct points per region
//! holding objects (O, or the product of the dimensions' distinct values if smaller, over the
//! occupied regions), at most what those regions hold besides the box ([`partial_match_entries`];
//! the partial-match cost of a Z-order or k-d trie, checked against the store in
//! `tessera-storage/tests/search_cost.rs`). A point (open = 0) reads its matches only, a box
//! fixing nothing reads whole regions (all in `read`). This is what makes a search by city
//! in <city, address, postcode, tel> far slower than in <city>: 18 regions, and about
//! 312^(3/4) = 74 entries skipped in each at 20,000 hotels.
//!
//! This replaces seed 000's eq. 4.2, cost = CR × (O / R) × β: HyperDex scanned each contacted
//! region whole, while Tessera's storage walks only the search's box inside a region, in
//! Z-order with BIGMIN skips, so the cost follows the regions contacted and the objects in the
//! box, not the regions' size (ARCHITECTURE.md, `tessera-storage/tests/search_cost.rs`).
//!
//! The subspace a search uses is the one Tessera's client and server pick
//! (`tessera_geometry::plan_search`): fewest regions, then fewest dimensions, then the
//! first declared, the key subspace first. The model applies that rule to expected region
//! counts; the code applies it per search to actual ones, which for ranges can differ from
//! search to search. A search that no subspace narrows uses the key subspace: R regions, all O
//! objects read. The rule looks at regions only, never at objects read, so of two subspaces
//! crossing one region each it picks the one with fewer dimensions even when the other's box
//! holds far fewer objects: in Tessera (and so in the model), adding a subspace, or adding a
//! predicate on an attribute of another subspace, can make a search dearer.
//!
//! **Update** of an existing object assigning attributes U. The chain is the key region's K
//! servers, then for each subspace S_i the K servers of the object's region, and, when the
//! update moves the object to another region of S_i, the K servers of the new one too
//! (`tessera_geometry::chain_for_update`). A subspace U does not touch keeps the object in
//! place (it is in N). One it touches moves the object with probability
//! P_i = 1 − Π_{x ∈ S_i ∩ U} 1 / max(1, f_x · n_x): a new value lands in the old slice with
//! probability 1/n on a hashed axis, and never leaves it when the values fill less than one
//! slice of an ordered axis. Then:
//!
//! chain length = K (1 + Σ_i (1 + P_i)),
//! cost = base + hop · K (1 + Σ_i w_i), with w_i = 1 if S_i ∈ N, else (1 − P_i) + 2α P_i.
//!
//! `base` is the fixed cost of a write whatever its chain (request, ordering, commit, reply).
//!
//! With every touched subspace relocated (P_i = 1) these are seed 000's eq. 4.3 and 4.5,
//! length = K(1 + |N| + 2|M|) and T = Tmax / (K(1 + |N| + 2α|M|)) with Tmax = 1/hop (and
//! base = 0), except
//! for the 1 that eq. 4.5 adds for the read by key preceding each modification in the seed's
//! experiments: Tessera does no such read (a put names only the attributes it assigns, and the
//! point leader, the chain's first server, applies it to the object it holds), so the model
//! drops it. An application that reads before it writes has a get class as well.
//!
//! **Put** of a new object: a chain of K(1 + |S|) servers (no old region), cost
//! base + hop · K(1 + |S|).
//! **Get**: one server, the point leader; cost g.
//!
//! **Mix** (eq. 4.6-4.7): the capacity, T = 1 / (m · Σ_i p_i · cost_i) = 1 / (m · Σ_i (p_i / T_i)).
//!
//! m is the mix's interference, m = 1 + μ · min(1, w / 0.05) · min(1, r / 0.05), w and r the
//! shares of writes and of reads (searches, gets) in the mix ([`Calibration::mix_scale`]):
//! servers spend more on reads and writes together than on the same operations in runs of
//! their kind alone. Measured, not derived: docs/advisor.md's check of 29 November found mixes
//! with 10, 50 and 95 % of writes alike about 30 % dearer than the constants fitted on runs of
//! searches alone and of modifications alone predict, and `tessera calibrate` measures μ on a
//! mix of its own (1 for a workload of one kind: seed 000's calibration has no such term).
//! It is the same for every configuration of a workload, so it changes no ranking.
//!
//! Every cost is seconds of the servers' CPU (`tessera calibrate` measures them so, from the
//! servers' own account of their CPU, not from throughput). A workload that names its
//! closed-loop clients (`{"clients": N}`) gets, instead of the capacity, what those N clients
//! get of it ([`closed_loop`]): each waits for its answer, a write also for the fsync that
//! makes it durable (shared by the writes that arrive during the one before), and every
//! request for the client's own CPU and the round trip. The map from capacity to that
//! throughput is the same for every configuration of one workload and falls as the cost rises,
//! so it ranks configurations exactly as the capacity does.
//!
//! The model counts the cluster's work, as the seed's does: it assumes requests spread over the
//! servers. Tessera cuts every axis where the data is (ints and floats at their values'
//! quantiles, strings at their hashes' quantiles, once the statistics are in: docs/cuts.md),
//! so a subspace's regions hold about equal shares; `spread` (default 1) remains for axes still
//! in equal slices of the whole i64 or f64 axis, where ordinary values sit in one or two slices.
//!
//! # The configurator
//!
//! [`advise`] enumerates configurations within bounds (subspaces per configuration, dimensions
//! per subspace), prunes those that cannot be best (see the [`advisor`] module), scores the rest,
//! clusters the configurations whose throughputs agree within a tolerance (seed 000 §5.1), and
//! reports the best clusters with each class's terms, beside the baselines of seed 000 §5.2.3
//! (no subspace, hyperspace, subspaces-all, dominant, greedy) and the space's current
//! configuration.
//!
//! # Adaptation
//!
//! [`Adapter`] decides when a space declared `adapt on` changes its subspaces: when the best
//! configuration for each period's traced workload is predicted at least 20 % faster than the
//! current one for several periods running (see the [`adapt`] module).

#![forbid(unsafe_code)]

pub mod adapt;
pub mod advisor;
pub mod baselines;
pub mod calibration;
pub mod closed_loop;
pub mod configuration;
pub mod constants;
pub mod fit;
pub mod model;
pub mod parse;
pub mod prediction;
pub mod workload;

pub use adapt::{AdaptPolicy, Adapter, Observation, Verdict};
pub use advisor::{advise, Advice, AdviseError, AdvisorOptions, Baseline, Cluster, SearchSummary};
pub use baselines::{baselines, BaselineName};
pub use calibration::{Calibration, CalibrationError};
pub use configuration::Configuration;
pub use fit::{fit, FitError, Measurements, SearchMeasurement, WriteMeasurement};
pub use model::{partial_match_entries, Model, ModelError};
pub use parse::parse_workload;
pub use prediction::{ClassPrediction, ClassTerms, Prediction};
pub use workload::{
    AttributeStatistics, Operation, PredicateKind, QueryClass, Workload, WorkloadError,
};
