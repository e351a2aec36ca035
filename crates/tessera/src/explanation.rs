//! A search's plan as JSON: what `tessera explain`, `get-range --explain`, `get-by-tags
//! --explain` and the web console print of a client's [`Explanation`].

use tessera_client::Explanation;

/// A dynamic space's search explained: its parts (a subspace each), the unispace's axes, the
/// axis each predicate's property (`paths`) hashes onto, and the shapes of document it reads.
pub fn dynamic_explanation(
    e: &Explanation,
    paths: &[String],
    dimensions: u16,
) -> serde_json::Value {
    let shapes: Vec<_> = e
        .shapes
        .iter()
        .map(|shape| {
            shape
                .properties
                .iter()
                .map(|(p, k)| (p.clone(), serde_json::json!(k.name())))
                .collect::<serde_json::Map<_, _>>()
        })
        .collect();
    let axes: serde_json::Map<_, _> = paths
        .iter()
        .map(|p| {
            let axis = tessera_geometry::property_axis(p, dimensions);
            (p.clone(), serde_json::json!(axis))
        })
        .collect();
    let parts: Vec<_> = e
        .parts
        .iter()
        .map(|p| {
            serde_json::json!({
                "subspace": p.subspace.0,
                "dimensions": p.dimensions,
                "formulas": p.formulas,
                "regions_contacted": p.regions_contacted,
                "pointer": p.pointer,
            })
        })
        .collect();
    serde_json::json!({
        "subspace": e.subspace.0,
        "parts": parts,
        "axes": dimensions,
        "property_axes": axes,
        "subspace_regions": e.subspace_regions,
        "regions_contacted": e.regions_contacted,
        "servers_contacted": e.servers_contacted,
        "shapes_known": e.shapes_known,
        "shapes_read": shapes,
    })
}

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
