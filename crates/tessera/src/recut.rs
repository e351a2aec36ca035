//! `tessera stats` (the statistics of a space's values, as the servers leading its key regions
//! read them) and `tessera recut` (a subspace's ordered axes cut again at those values'
//! quantiles, built beside it and swapped in while the space serves).

use std::time::Duration;

use serde_json::json;
use tessera_client::{
    Client, ClientOptions, SpaceChange, SpaceConfig, SpaceStatistics, SubspaceId,
};
use tessera_geometry::cuts::{out_of_balance, recut_pays};
use tessera_geometry::{tessellations, Sketch};

use crate::alter;
use crate::failure::Failure;
use crate::fitting::{axes, cuts_for, ordered};
use crate::json as tjson;
use crate::stdio::print_line;

/// `tessera stats SPACE [ATTRIBUTE]`: one JSON line per attribute (or the one named).
pub async fn print_stats(
    client: &Client,
    space: &str,
    attribute: Option<&str>,
) -> Result<(), Failure> {
    let schema = client.describe_space(space).await?;
    let statistics = client.statistics(space).await?;
    let path = attribute.and_then(|name| statistics.path(name).map(|s| (name, s)));
    let wanted = match attribute {
        Some(_) if path.is_some() => vec![],
        Some(name) => vec![schema.attribute_index(name).ok_or_else(|| {
            Failure::Error(format!(
                "space {space:?} has no attribute {name:?}{}",
                if schema.is_dynamic() {
                    " and no overlay names that path"
                } else {
                    ""
                }
            ))
        })?],
        None => (0..schema.attributes.len())
            .map(|i| tessera_types::AttrIndex(i as u16))
            .filter(|a| schema.attribute(*a).ty.is_primitive())
            .collect(),
    };
    let paths: Vec<(&str, &Sketch)> = match (attribute, path) {
        (_, Some(one)) => vec![one],
        (Some(_), None) => vec![],
        (None, None) => statistics
            .paths
            .iter()
            .map(|(p, s)| (p.as_str(), s))
            .collect(),
    };
    let key_regions = tessellations(&schema)[0].regions_count();
    let lines = wanted
        .into_iter()
        .map(|a| tjson::attribute_statistics(&schema, a, &statistics.attributes[a.get()]))
        .chain(paths.into_iter().map(|(p, s)| path_json(p, s)));
    for mut line in lines {
        line["key_regions_counted"] = json!(statistics.regions.len());
        line["key_regions"] = json!(key_regions);
        print_line(&line)?;
    }
    Ok(())
}

/// One document path's statistics as JSON (of the strings, ints and floats there): count,
/// distinct, min, max, and quantiles when it holds numbers.
fn path_json(path: &str, s: &Sketch) -> serde_json::Value {
    let mut line = json!({"path": path});
    tjson::add_sketch(&mut line, s, true);
    line
}

/// The primitive type of an int or float attribute: an ordered axis.
/// The subspaces `tessera recut` re-cuts when none is named: every serving subspace with an
/// ordered axis (hashed axes are even but for heavy values), the key's and tag subspaces
/// aside; in a dynamic space, every overlay (its paths' values decide which axes are ordered).
fn recuttable(space: &SpaceConfig) -> Vec<SubspaceId> {
    let schema = &space.schema;
    cuttable(space)
        .into_iter()
        .filter(|id| {
            let subspace = schema.subspace(*id);
            subspace.overlay.is_some()
                || subspace
                    .dimensions
                    .iter()
                    .any(|a| ordered(schema.attribute(*a).ty).is_some())
        })
        .collect()
}

/// The subspaces the re-cut driver weighs: every serving one but the key's, tag subspaces and
/// a dynamic space's unispace (it re-cuts only those out of balance whose re-cut pays).
fn cuttable(space: &SpaceConfig) -> Vec<SubspaceId> {
    let schema = &space.schema;
    schema
        .searchable_subspaces()
        .skip(1)
        .filter(|id| {
            let subspace = schema.subspace(*id);
            subspace.tags.is_none() && (subspace.overlay.is_some() || !schema.is_dynamic())
        })
        .collect()
}

/// `tessera recut SPACE [SUBSPACE]`: each subspace named (or every one with an ordered axis)
/// cut again at the quantiles of the space's values, one at a time: built beside the old one
/// while the space serves, then swapped in. One JSON line per subspace.
pub async fn recut(
    client: &Client,
    space: &str,
    subspace: Option<u16>,
    timeout: Option<Duration>,
) -> Result<(), Failure> {
    let config = client.refresh().await?;
    let Some(current) = config.space(space) else {
        return Err(Failure::Error(format!("no space named {space:?}")));
    };
    let ids = match subspace {
        Some(id) => vec![SubspaceId(id)],
        None => recuttable(current),
    };
    let statistics = client.statistics(space).await?;
    let objects = statistics.attributes.first().map_or(0, Sketch::count);
    if objects == 0 {
        return Err(Failure::Error(format!(
            "space {space:?} holds no objects: there is nothing to cut by yet"
        )));
    }
    for id in ids {
        recut_one(client, space, id, &statistics, timeout).await?;
    }
    Ok(())
}

/// Re-cuts one subspace and waits until its replacement serves.
async fn recut_one(
    client: &Client,
    space: &str,
    id: SubspaceId,
    statistics: &SpaceStatistics,
    timeout: Option<Duration>,
) -> Result<(), Failure> {
    let config = client.refresh().await?;
    let current = config
        .space(space)
        .ok_or_else(|| Failure::Error(format!("no space named {space:?}")))?;
    if current.schema.subspaces.get(id.get()).is_none() {
        return Err(Failure::Error(format!(
            "space {space:?} has no subspace {} (tessera status lists them)",
            id.0
        )));
    }
    let cuts = cuts_for(current, id, statistics);
    let before = tessellations(&current.schema)[id.get()].clone();
    let attributes = alter::attribute_names(current, id);
    if before.axis_cuts() == cuts {
        return print_line(&json!({
            "space": space, "subspace": id.0, "attributes": attributes,
            "action": "none: already cut at these points", "regions": before.regions_count(),
        }));
    }
    let new = SubspaceId(current.schema.subspaces.len() as u16);
    let change = SpaceChange::RecutSubspace {
        subspace: id.0,
        cuts,
    };
    client.alter_space(space, change).await.map_err(|e| {
        Failure::Error(format!("cannot re-cut subspace {} of {space:?}: {e}", id.0))
    })?;
    let held_before = spread(client, space, id).await?;
    alter::wait_for(client, space, new, timeout).await?;
    let held_after = spread(client, space, new).await?;
    print_line(&json!({
        "space": space,
        "subspace": id.0,
        "attributes": attributes,
        "action": "recut",
        "replaced_by": new.0,
        "before": held_before,
        "after": held_after,
    }))
}

/// How a subspace's objects spread over its regions, as their leaders count them: regions,
/// regions holding objects, and the fullest region's objects of all.
async fn spread(
    client: &Client,
    space: &str,
    id: SubspaceId,
) -> Result<serde_json::Value, Failure> {
    let counts = client.region_counts(space, id).await?;
    let regions = client
        .configuration()
        .space(space)
        .map_or(0, |s| s.replicas[id.get()].len());
    let objects: u64 = counts.iter().map(|c| c.objects).sum();
    Ok(json!({
        "regions": regions,
        "regions_holding_objects": counts.iter().filter(|c| c.objects > 0).count(),
        "fullest_region_objects": counts.iter().map(|c| c.objects).max().unwrap_or(0),
        "objects": objects,
    }))
}

/// How the re-cut driver runs.
#[derive(Clone, Copy, Debug)]
pub struct RecutOptions {
    /// How often the subspaces' balance is read; `None`: the driver does not run.
    pub period: Option<Duration>,
    /// The fewest objects a subspace holds before it is re-cut.
    pub min_objects: u64,
}

/// The re-cut driver's flags, shared by `tessera dev` and `tessera coordinator`.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct RecutArgs {
    /// Seconds between two looks at the balance of subspaces: a subspace with an int or float
    /// axis (or a document overlay) holding at least --recut-min-objects, whose fullest region holds more
    /// than twice the mean, is re-cut at its values' quantiles (`tessera recut`) if that is
    /// predicted to shrink the fullest region by a quarter or more. One re-cut at a time per
    /// space. 0 turns automatic re-cuts off (`tessera recut` still works).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=86400))]
    pub recut_period_s: u64,
    /// The fewest objects a subspace holds before it is re-cut automatically.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub recut_min_objects: u64,
}

impl RecutArgs {
    pub fn options(self) -> RecutOptions {
        RecutOptions {
            period: (self.recut_period_s > 0).then(|| Duration::from_secs(self.recut_period_s)),
            min_objects: self.recut_min_objects,
        }
    }
}

/// Runs the driver until the process stops (if it runs at all), acting only while `leads`
/// (the coordinators' Raft leader; a standalone `tessera dev` always). Like the split and
/// adaptation drivers, it is a client of the database.
pub fn spawn(
    to: (String, ClientOptions),
    options: RecutOptions,
    leads: impl Fn() -> bool + Send + 'static,
) {
    let Some(period) = options.period else {
        return;
    };
    tokio::spawn(async move {
        let mut ticks = crate::driver::ticks(period);
        let mut client = crate::driver::DriverClient::new("recut", to);
        loop {
            ticks.tick().await;
            if !leads() {
                continue;
            }
            let Some(c) = client.get().await else {
                continue;
            };
            if let Err(e) = recut_all(c, options.min_objects).await {
                tracing::info!(error = %e, "recut: this period's look failed");
            }
        }
    });
}

/// One period: in each space with no build under way, the first subspace out of
/// balance whose re-cut pays is re-cut (the build goes on after this returns).
async fn recut_all(client: &Client, min_objects: u64) -> Result<(), tessera_client::ClientError> {
    let config = client.refresh().await?;
    for space in config.spaces.iter() {
        if space.build.is_some() {
            continue;
        }
        let name = &space.schema.name;
        let mut statistics = None;
        for id in cuttable(space) {
            let counts = client.region_counts(name, id).await?;
            let counts: Vec<u64> = counts.iter().map(|c| c.objects).collect();
            if counts.len() != space.replicas[id.get()].len()
                || !out_of_balance(&counts, min_objects)
            {
                continue;
            }
            if statistics.is_none() {
                statistics = Some(client.statistics(name).await?);
            }
            let statistics = statistics.as_ref().expect("read above");
            if statistics.regions.len() != space.replicas[0].len() {
                continue; // a key region's leader did not answer
            }
            let now = tessellations(&space.schema)[id.get()].axis_cuts();
            let new = cuts_for(space, id, statistics);
            if !recut_pays(&axes(space, id, statistics), &now, &new) {
                continue;
            }
            let change = SpaceChange::RecutSubspace {
                subspace: id.0,
                cuts: new,
            };
            match client.alter_space(name, change).await {
                Ok(()) => eprintln!(
                    "tessera: space {name}: re-cutting subspace {} ({}): its fullest region held {} of {} objects",
                    id.0,
                    alter::attribute_names(space, id).join(", "),
                    counts.iter().max().unwrap_or(&0),
                    counts.iter().sum::<u64>()
                ),
                Err(e) => tracing::info!(space = %name, subspace = id.0, error = %e, "recut: not re-cut"),
            }
            break;
        }
    }
    Ok(())
}
