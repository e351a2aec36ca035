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
