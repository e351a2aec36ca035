//! A search's plan as JSON, for `tessera explain` and the web console.

/// A typed space's search explained, as `explain`, `get-range --explain` and
/// `get-by-tags --explain` print it: the subspace, the regions, the servers contacted (as
/// this client asks them, one replica per region, and the fewest that hold every region),
/// the subspaces weighed and, with `contacted`, whom is asked for which regions.
pub fn typed_explanation(
    schema: &tessera_types::SpaceSchema,
    e: &tessera_client::Explanation,
    contacted: bool,
) -> serde_json::Value {
    let name = |s: tessera_types::SubspaceId| {
        schema
            .subspace(s)
            .dimensions
            .iter()
            .map(|&a| schema.attribute(a).name.clone())
            .collect::<Vec<_>>()
    };
    let mut out = serde_json::json!({
        "subspace": e.subspace.0,
        "dimensions": e.dimensions,
        "subspace_regions": e.subspace_regions,
        "regions_contacted": e.regions_contacted,
        "servers_contacted": e.servers_contacted,
        "servers_each_region": e.servers_each_region,
        "servers_fewest": e.servers_fewest,
        "candidates": e.candidates.iter().map(|(s, n)| serde_json::json!({
            "subspace": s.0, "dimensions": name(*s), "regions": n
        })).collect::<Vec<_>>(),
    });
    if contacted {
        out["contacted"] = e
            .contacted
            .iter()
            .map(|(server, s, regions)| {
                serde_json::json!({"server": server.0, "subspace": s.0, "regions": regions})
            })
            .collect();
    }
    out
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
