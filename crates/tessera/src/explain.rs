//! `tessera explain`: a search's plan as JSON (explanation.rs), with what the space's
//! statistics predict of it.

use crate::explanation::{dynamic_explanation, typed_explanation};
use crate::failure::Failure;
use crate::predicates;
use crate::stdio::print_line;
use crate::target::{connect, Target};

// `tessera explain` (its help: `Command::Explain`).
#[derive(clap::Args)]
pub struct ExplainArgs {
    /// The space's name.
    space: String,
    /// Predicates that must all hold: attr=value, attr<value, attr<=value, attr>value,
    /// attr>=value, attr~regex (values read as the attribute's type; quote them for the
    /// shell). In a dynamic space, dotted paths and exists(path), missing(path). None: every
    /// object.
    predicates: Vec<String>,
}

/// `tessera explain`: how a search would run (JSON); in a typed space with what the space's
/// statistics predict of it, in a dynamic space with the axes and shapes it reads.
pub async fn explain(args: ExplainArgs, target: &Target) -> Result<(), Failure> {
    let ExplainArgs {
        space,
        predicates: texts,
    } = args;
    let client = connect(target).await?;
    let schema = client.describe_space(&space).await?;
    let preds = predicates::parse_predicates(&schema, &texts)?;
    let paths: Vec<String> = preds.iter().map(|p| p.attr.clone()).collect();
    let e = client.explain(&space, preds.clone()).await?;
    if let tessera_types::SpaceKind::Dynamic { dimensions } = schema.kind {
        return print_line(&dynamic_explanation(&e, &paths, dimensions));
    }
    let mut line = typed_explanation(&schema, &e, false);
    let statistics = client.statistics(&space).await?;
    let config = client.configuration();
    if let Some(space) = config.space(&space) {
        let estimates = estimates(space, &e, &preds, &statistics);
        if let (Some(line), Some(estimates)) = (line.as_object_mut(), estimates.as_object()) {
            line.extend(estimates.clone());
        }
    }
    print_line(&line)
}

/// What the space's statistics (`tessera stats`) predict of a typed search: the objects in the
/// regions it contacts and the objects that match, each estimated with the axes (and the
/// predicates) independent of each other. The first is what the search costs, the second what
/// it returns; a search whose regions fit the data reads not many more than it returns.
pub fn estimates(
    space: &tessera_client::SpaceConfig,
    e: &tessera_client::Explanation,
    predicates: &[tessera_client::Predicate],
    statistics: &tessera_client::SpaceStatistics,
) -> serde_json::Value {
    let schema = &space.schema;
    let objects = statistics.attributes.first().map_or(0, |key| key.count());
    let tessellation = &space.tessellations()[e.subspace.get()];
    let axes = crate::fitting::axes(space, e.subspace, statistics);
    let regions: std::collections::BTreeSet<u32> = e
        .contacted
        .iter()
        .filter(|(_, s, _)| *s == e.subspace)
        .flat_map(|(_, _, regions)| regions.iter().copied())
        .collect();
    let read: f64 = regions
        .iter()
        .map(|&r| {
            let bounds = tessellation.region_bounds(tessera_geometry::RegionIndex(r));
            tessera_geometry::cuts::region_share(&axes, &bounds)
        })
        .sum();
    // Predicates on one attribute together (a range is two), attributes independent.
    let mut by_attribute: std::collections::BTreeMap<usize, Vec<&tessera_types::PredicateOp>> =
        Default::default();
    for p in predicates {
        if let Some(a) = schema.attribute_index(&p.attr) {
            by_attribute.entry(a.get()).or_default().push(&p.op);
        }
    }
    let matching: f64 = by_attribute
        .iter()
        .map(|(&a, ops)| statistics.attributes[a].share_of(ops))
        .product();
    let estimate = |share: f64| (share.min(1.0) * objects as f64).round() as u64;
    serde_json::json!({
        "objects": objects,
        "estimated_objects_read": estimate(read),
        "estimated_matches": estimate(matching),
    })
}
