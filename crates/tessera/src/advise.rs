//! `tessera trace` (the workload a space served, as every server sampled it) and `tessera
//! advise`: the workload (a file's text, or the trace printed as the same lines), the space's
//! schema and object count, then the advisor (`tessera-advisor`), printed as JSON; with
//! `--apply`, the best configuration made the space's (alter.rs). The adaptation driver
//! (adapt.rs) asks the advisor through [`advice_for`] too.

use tessera_advisor::{advise as rank, parse_workload, Advice, AdvisorOptions, Calibration};
use tessera_client::{Client, SpaceSchema, SubspaceState};

use std::path::PathBuf;

use crate::failure::Failure;
use crate::stdio::{print_line, read_text};
use crate::target::{connect, Target};
use crate::{alter, calibrate, json};

// `tessera trace` (its help: `Command::Trace`).
#[derive(clap::Args)]
pub struct TraceArgs {
    space: String,
    /// How many minutes back (each server keeps the last 15); 0: everything since each
    /// server started (what the adaptation driver reads).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=15))]
    minutes: u32,
}

// `tessera advise` (its help: `Command::Advise`).
#[derive(clap::Args)]
pub struct AdviseArgs {
    space: String,
    /// The workload file (JSON lines); `-` reads stdin.
    #[arg(long)]
    workload: Option<PathBuf>,
    /// Use what the servers sampled over the last `--minutes` minutes instead.
    #[arg(long)]
    from_trace: bool,
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=15))]
    minutes: u32,
    /// How many groups of equally good configurations to print.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    top: u32,
    /// The model's constants, as `tessera calibrate --save` wrote them (default: those
    /// `tessera calibrate` kept with the configuration, else constants measured on a 2-core
    /// machine).
    #[arg(long)]
    calibration: Option<PathBuf>,
    /// Print, instead of the whole advice, one line per ranked group (its first
    /// configuration) and per baseline: `rank` or `baseline`, `subspaces`, and
    /// `throughput_ops_s` rounded to a whole operation a second.
    #[arg(long)]
    summary: bool,
    /// Make the best configuration the space's (see above).
    #[arg(long)]
    apply: bool,
    /// With --apply: give up waiting for a build after this many seconds (exit 2; the
    /// build goes on). Without it, wait as long as each build takes.
    #[arg(long, requires = "apply")]
    wait_timeout: Option<f64>,
}

/// `tessera trace`: the shapes of the requests a space served, one JSON line per kind.
pub async fn trace(args: TraceArgs, target: &Target) -> Result<(), Failure> {
    let TraceArgs { space, minutes } = args;
    let client = connect(target).await?;
    let trace = client.trace(&space, minutes).await?;
    let total = trace.requests();
    let window = match trace.minutes {
        0 => "since the servers started".to_owned(),
        m => format!("over the last {m} minutes"),
    };
    eprintln!(
        "tessera trace: {total:.0} requests in {space:?} {window}, as {} server(s) saw them",
        trace.servers
    );
    for line in json::workload_lines(&trace) {
        print_line(&line)?;
    }
    Ok(())
}

/// `tessera advise`: the configurations ranked for a workload (a file, or the live trace),
/// printed whole or in short; with `--apply`, the best made the space's.
pub async fn advise(args: AdviseArgs, target: &Target) -> Result<(), Failure> {
    let AdviseArgs {
        space,
        workload,
        from_trace: _,
        minutes,
        top,
        calibration,
        summary,
        apply,
        wait_timeout: seconds,
    } = args;
    let wait = alter::wait_timeout(seconds)?;
    let client = connect(target).await?;
    let calibration = match calibration {
        None => client
            .refresh()
            .await?
            .model
            .as_ref()
            .map_or_else(Calibration::default, calibrate::from_model),
        Some(path) => serde_json::from_str(&read_text(&path)?)
            .map_err(|e| Failure::Error(format!("the calibration in {}: {e}", path.display())))?,
    };
    let text = match workload {
        Some(path) => read_text(&path)?,
        None => {
            let trace = client.trace(&space, minutes).await?;
            let lines = json::workload_lines(&trace);
            if lines.is_empty() {
                return Err(Failure::Error(format!(
                    "no request to {space:?} was traced in the last {minutes} minutes: nothing to advise on"
                )));
            }
            lines
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    let advice = advice_for(&client, &space, &text, top as usize, calibration).await?;
    if summary {
        for line in summary_lines(&advice)? {
            print_line(&line)?;
        }
    } else {
        print_line(&to_json(&advice)?)?;
    }
    if !apply {
        return Ok(());
    }
    let best = best_subspaces(&advice)?;
    alter::apply(&client, &space, &best, wait).await
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

pub fn to_json(advice: &Advice) -> Result<serde_json::Value, Failure> {
    serde_json::to_value(advice).map_err(|e| Failure::Error(format!("the advice as JSON: {e}")))
}

/// The advice in short, one JSON line per ranked group (its first configuration) and per
/// baseline: the subspaces and the predicted throughput, rounded to a whole operation a
/// second (`tessera advise --summary`).
pub fn summary_lines(advice: &Advice) -> Result<Vec<serde_json::Value>, Failure> {
    let mut lines = Vec::new();
    for cluster in &advice.clusters {
        let Some(first) = cluster.configurations.first() else {
            continue;
        };
        lines.push(serde_json::json!({
            "rank": cluster.rank,
            "subspaces": first.subspaces,
            "throughput_ops_s": first.throughput_ops_s.round() as u64,
        }));
    }
    for baseline in &advice.baselines {
        lines.push(serde_json::json!({
            "baseline": baseline.name,
            "subspaces": baseline.prediction.subspaces,
            "throughput_ops_s": baseline.prediction.throughput_ops_s.round() as u64,
        }));
    }
    Ok(lines)
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
