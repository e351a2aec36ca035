//! The advisor (`tessera-advisor`) asked about a live space: its schema as writes see it, its
//! object count and distinct values from the servers' statistics, the constants `tessera
//! calibrate` kept. `tessera advise` (advise.rs) and the adaptation driver (adapt.rs) both ask
//! through [`advice_for`].

use tessera_advisor::{advise as rank, parse_workload, Advice, AdvisorOptions, Calibration};
use tessera_client::{Client, ModelConstants, SpaceSchema, SubspaceState};

use crate::failure::Failure;

/// The constants the configuration keeps, for the model.
pub fn from_model(m: &ModelConstants) -> Calibration {
    let s = |ns: u64| ns as f64 * 1e-9;
    Calibration {
        write_base_s: s(m.write_base_ns),
        write_hop_s: s(m.write_hop_ns),
        relocation_factor: m.relocation_factor_milli as f64 * 1e-3,
        get_s: s(m.get_ns),
        search_base_s: s(m.search_base_ns),
        search_region_s: s(m.search_region_ns),
        search_object_s: s(m.search_object_ns),
        search_skip_s: s(m.search_skip_ns),
        fsync_s: s(m.fsync_ns),
        fsync_cpu_s: s(m.fsync_cpu_ns),
        client_s: s(m.client_ns),
        client_object_s: s(m.client_object_ns),
        round_trip_s: s(m.round_trip_ns),
        server_cores: (m.server_cores_milli as f64 * 1e-3).max(1.0),
        mix_interference: m.mix_interference_milli as f64 * 1e-3,
    }
}

/// The space as the advisor sees it: its subspaces are those writes go through (a dropped
/// subspace is gone, one being built will serve), so that the `current` baseline is the
/// configuration the space is getting.
fn live_schema(mut schema: SpaceSchema) -> SpaceSchema {
    schema.subspaces.retain(|s| s.is_written());
    for s in &mut schema.subspaces {
        s.state = SubspaceState::Serving;
    }
    schema
}

/// Ranks `space`'s subspace configurations for the workload in `text`. Without an `objects`
/// line, the workload gets the space's current object count; an attribute it gives no
/// statistics for gets its distinct values as the servers sketch them (`tessera stats`), not
/// the advisor's default guess.
pub async fn advice_for(
    client: &Client,
    space: &str,
    text: &str,
    top: usize,
    calibration: Calibration,
) -> Result<Advice, Failure> {
    let mut schema = live_schema(client.describe_space(space).await?);
    if !client.is_cluster() {
        // A standalone server is every region's only replica, whatever the space tolerates.
        schema.tolerate = 0;
    }
    let mut text = text.to_owned();
    let statistics = client.statistics(space).await?;
    if !has_objects_line(&text) {
        let objects = match statistics.attributes.first() {
            Some(key) => key.count(),
            None => client.count(space, vec![]).await?,
        };
        text.push_str(&format!("\n{{\"objects\": {}}}\n", objects.max(1)));
    }
    text.push_str(&distinct_lines(&text, &schema, &statistics));
    let workload = parse_workload(&text, &schema)
        .map_err(|e| Failure::Error(format!("the workload for {space:?}: {e}")))?;
    let options = AdvisorOptions {
        clusters_reported: top,
        ..AdvisorOptions::default()
    };
    rank(&schema, &workload, calibration, options)
        .map_err(|e| Failure::Error(format!("advising on {space:?}: {e}")))
}

/// The subspaces of the best configuration (the first of the first cluster), each as its
/// attributes' names, besides the key subspace.
pub fn best_subspaces(advice: &Advice) -> Result<Vec<Vec<String>>, Failure> {
    advice
        .clusters
        .first()
        .and_then(|c| c.configurations.first())
        .map(|p| p.subspaces.clone())
        .ok_or_else(|| Failure::Error("the advice ranks no configuration: nothing to apply".into()))
}

/// `{"attribute": A, "distinct": N}` lines for the attributes (besides the key) that are
/// subspace dimensions in waiting (string, int, float) and that no line of `text` gives
/// statistics for, from the space's sketched statistics.
fn distinct_lines(
    text: &str,
    schema: &SpaceSchema,
    statistics: &tessera_client::SpaceStatistics,
) -> String {
    let named: std::collections::BTreeSet<String> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line.trim()).ok())
        .filter_map(|v| v.get("attribute")?.as_str().map(str::to_owned))
        .collect();
    let mut lines = String::new();
    for (a, sketch) in schema.attributes.iter().zip(&statistics.attributes).skip(1) {
        if a.ty.is_primitive() && !named.contains(&a.name) && sketch.count() > 0 {
            let line =
                serde_json::json!({"attribute": a.name, "distinct": sketch.distinct().max(1)});
            lines.push_str(&format!("{line}\n"));
        }
    }
    lines
}

/// Whether some line of the workload gives the object count.
fn has_objects_line(text: &str) -> bool {
    text.lines().any(|line| {
        serde_json::from_str::<serde_json::Value>(line.trim())
            .is_ok_and(|v| v.get("objects").is_some())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn live_distinct_counts_fill_what_the_workload_leaves_out() {
        let schema = tessera_types::parse_space(
            "space h key id attributes string city, int price, set(string) tags",
        )
        .unwrap();
        let mut statistics = tessera_client::SpaceStatistics::empty(4);
        for i in 0..50i64 {
            statistics.attributes[0].insert(&tessera_types::Value::from(format!("h{i}")));
            statistics.attributes[1].insert(&tessera_types::Value::from(format!("c{}", i % 7)));
            statistics.attributes[2].insert(&tessera_types::Value::Int(i));
        }
        // The workload names price already; tags are no dimension; the key is unique.
        let text = r#"{"attribute": "price", "distinct": 3}"#;
        assert_eq!(
            super::distinct_lines(text, &schema, &statistics),
            "{\"attribute\":\"city\",\"distinct\":7}\n"
        );
    }

    #[test]
    fn the_advisor_sees_the_subspaces_writes_go_through() {
        use tessera_client::SpaceChange;
        let schema = tessera_types::parse_space(
            "space h key id attributes string city, int stars subspace city subspace stars",
        )
        .unwrap();
        let mut space =
            tessera_client::SpaceConfig::owned_by(1, schema, &[tessera_client::ServerId(1)]);
        let one = |t: &tessera_geometry::Tessellation| {
            vec![vec![tessera_client::ServerId(1)]; t.regions_count() as usize]
        };
        space
            .alter(2, &SpaceChange::DropSubspace { subspace: 1 }, one)
            .unwrap();
        let attributes = vec!["stars".to_owned(), "city".to_owned()];
        space
            .alter(3, &SpaceChange::AddSubspace { attributes }, one)
            .unwrap();
        let live = super::live_schema(space.schema.clone());
        let names: Vec<Vec<&str>> = live
            .subspaces
            .iter()
            .map(|s| {
                s.dimensions
                    .iter()
                    .map(|&a| live.attribute(a).name.as_str())
                    .collect()
            })
            .collect();
        assert_eq!(names, [vec!["id"], vec!["stars"], vec!["stars", "city"]]);
        assert!(live.subspaces.iter().all(|s| s.is_searchable()));
    }

    #[test]
    fn an_objects_line_is_found_among_the_others() {
        assert!(super::has_objects_line(
            "{\"p\": 1, \"get\": true}\n  {\"objects\": 5}\n"
        ));
        assert!(!super::has_objects_line(
            "{\"p\": 1, \"get\": true}\n# {\"objects\": 5}\nnot json"
        ));
    }
}
