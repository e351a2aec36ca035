//! Hyperspace hashing as pure functions (docs/design.md §4-5). No I/O.
//!
//! * [`coordinate()`]: a primitive value onto its axis (`u64`): strings hashed (equality only),
//!   ints and floats order-preserving, so a range of values is an interval of the axis.
//! * [`Tessellation`]: a subspace of `d` dimensions cut into about `R` regions, each dimension
//!   into ⌈R^(1/d)⌉ or ⌊R^(1/d)⌋ intervals: equal slices of a hashed axis, an ordered one at
//!   its cut points (from the data, or a declared domain).
//! * [`SearchBox`]: the axis-aligned box of coordinates a set of predicates selects in one
//!   subspace, and the regions it crosses; [`plan_search`] picks the subspaces a search reads.
//! * [`dynamic`]: unispace hashing and compression formulas' overlays: a dynamic space's
//!   documents as points and its searches as one box per shape of document that can match.
//! * [`index`]: the inverted index of a dynamic space's shapes and formulas (property → shapes
//!   that have it, formula → shapes its documents took): structural queries as set operations.
//! * [`chain`]: the value-dependent chain of an update.
//! * [`assignment`]: which K servers hold each region, and in which chain order.
//! * [`hilbert`]: the Hilbert curve through a grid, the locality-preserving order of a tagged
//!   placement's tag points.
//! * [`tags`]: a tagged placement's tag subspace: tag sets on the Hilbert curve, spread over
//!   regions by the key's hash, and the cells a tag search reads.
//! * [`ordered`]: when an ordered placement's key region splits, so that key ranges follow the
//!   data, split when a region outgrows the others.
//! * [`statistics`]: mergeable sketches of an attribute's values (quantiles, distinct count).
//! * [`cuts`]: where to cut a subspace's axes so that its regions hold equal shares of the
//!   objects: ordered axes at their values' quantiles.
//! * [`cover`]: the fewest servers that hold every region a multi-item read needs (set cover
//!   over the regions' replicas).
//! * [`zorder`]: Z-order interleaving of a point, and the BIGMIN step that lets storage skip
//!   from a Z-value outside a box to the next one inside it.

#![forbid(unsafe_code)]

pub mod assignment;
pub mod chain;
pub mod coordinate;
pub mod cover;
pub mod cuts;
pub mod dynamic;
pub mod hilbert;
pub mod index;
pub mod ordered;
pub mod plan;
pub mod search;
pub mod statistics;
pub mod tags;
pub mod tessellation;
pub mod zorder;

pub use assignment::{assign_replicas, assign_subspace};
pub use chain::{chain_for_update, ChainHop, ReplicaMap};
pub use coordinate::{
    coordinate, key_coordinate, ordered_key_coordinate, ordered_key_position, overlay_point, point,
    property_axis, unispace_point, KeyPosition,
};
pub use cover::{cover_regions, Cover};
pub use cuts::{cuts_from_data, cuts_from_data_weighted, AxisData};
pub use dynamic::{overlay_boxes, unispace_boxes};
pub use hilbert::{hilbert_cell, hilbert_index};
pub use index::{PropertyIndex, ShapeSet};
pub use plan::{part_in, part_keeps, parts_in, plan_search, pointer_answers};
pub use search::{choose_typed_subspace, KeyInterval, SearchBox, SearchPlan};
pub use tags::{tag_point, tag_positions};

pub use statistics::Sketch;
pub use tessellation::{
    domain_cuts, key_region, region_of_object, region_of_point, tessellation_of, tessellations,
    RegionIndex, Tessellation,
};
pub use zorder::{deinterleave, deinterleave_into, interleave, next_in_box};
