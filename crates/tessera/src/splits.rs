//! Key regions that follow the data (seed 003 §2.1.2): an ordered space's key regions start
//! as equal slices of the key axis, and real keys are skewed, so a region that outgrows the
//! others is split at its middle key (`SpaceChange::SplitKeyRegion`); the new region starts
//! on the same servers, and the coordinators' balancing moves it (or others) by state
//! transfer until every server holds its share.
//!
//! The split driver does that by itself. Like the adaptation driver (`adapt.rs`) it runs in
//! every coordinator process and acts only in the Raft leader's (`tessera coordinator`,
//! `tessera dev --servers N`), as a client of the database: every period, for each ordered
//! space, it asks the servers leading its key regions for their loads
//! (`Client::key_region_loads`) and splits the fullest region if it holds at least
//! `min_objects` and more than twice the mean of the others
//! (`tessera_geometry::ordered::region_to_split`), one split per space and period. A
//! region gaining a replica is not split (the coordinators refuse); the next period tries
//! again.
//!
//! `tessera key-regions` and `tessera split-region` do the same by hand.

use std::time::Duration;

use tessera_client::{Client, ClientOptions, KeyRegionLoad, SpaceConfig};
use tessera_geometry::ordered::region_to_split;
use tessera_types::Value;

use crate::failure::Failure;

/// How the split driver runs.
#[derive(Clone, Copy, Debug)]
pub struct SplitOptions {
    /// How often the loads are read; `None`: the driver does not run.
    pub period: Option<Duration>,
    /// The fewest objects a region holds before it is split.
    pub min_objects: u64,
}

/// The split driver's flags, shared by `tessera dev` and `tessera coordinator`.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct SplitArgs {
    /// Seconds between two looks at the key regions of ordered spaces (`placement ordered`)
    /// in a cluster: a region holding at least --split-min-objects and more than twice the
    /// mean of the others is split at its middle key, and the cluster moves the new region by
    /// state transfer. 0 turns automatic splits off (`tessera split-region` still works). A
    /// standalone server (`tessera dev` without --servers) does not split by itself.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=86400))]
    pub split_period_s: u64,
    /// The fewest objects a key region holds before it is split automatically.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(2..))]
    pub split_min_objects: u64,
}

impl SplitArgs {
    pub fn options(self) -> SplitOptions {
        SplitOptions {
            period: (self.split_period_s > 0).then(|| Duration::from_secs(self.split_period_s)),
            min_objects: self.split_min_objects,
        }
    }
}

/// Runs the driver until the process stops (if it runs at all). `leads` says whether this
/// process should act; `addr` is where its client connects, and `connect` how.
pub fn spawn(
    to: (String, ClientOptions),
    options: SplitOptions,
    leads: impl Fn() -> bool + Send + 'static,
) {
    let Some(period) = options.period else {
        return;
    };
    tokio::spawn(async move {
        let mut ticks = crate::driver::ticks(period);
        let mut client = crate::driver::DriverClient::new("splits", to);
        loop {
            ticks.tick().await;
            if !leads() {
                continue;
            }
            let Some(c) = client.get().await else {
                continue;
            };
            if let Err(e) = split_all(c, options.min_objects).await {
                tracing::info!(error = %e, "splits: this period's look failed");
            }
        }
    });
}

/// One period: each ordered space's fullest region split, if it is due.
async fn split_all(client: &Client, min_objects: u64) -> Result<(), tessera_client::ClientError> {
    let config = client.refresh().await?;
    for space in config.spaces.iter().filter(|s| s.schema.keys_ordered()) {
        let name = &space.schema.name;
        let loads = client.key_region_loads(name).await?;
        let Some((region, at)) = due_split(space, &loads, min_objects) else {
            continue;
        };
        let objects = loads[region as usize].objects;
        match client.split_key_region(name, region, at.clone()).await {
            Ok(()) => eprintln!(
                "tessera: space {name}: key region {region} ({objects} objects) split at {at}"
            ),
            Err(e) => tracing::info!(space = %name, region, error = %e, "splits: not split"),
        }
    }
    Ok(())
}

/// The split the driver makes of `space` given its regions' `loads`: the region
/// [`region_to_split`] picks and its middle key. `None` unless every region answered.
fn due_split(
    space: &SpaceConfig,
    loads: &[KeyRegionLoad],
    min_objects: u64,
) -> Option<(u32, Value)> {
    let regions = space.replicas[0].len();
    let complete = loads.len() == regions
        && loads
            .iter()
            .enumerate()
            .all(|(i, l)| l.region as usize == i);
    if !complete {
        return None;
    }
    let counts: Vec<u64> = loads.iter().map(|l| l.objects).collect();
    let region = region_to_split(&counts, min_objects)?;
    let at = loads[region.0 as usize].split_at.clone()?;
    Some((region.0, at))
}

/// `tessera key-regions SPACE`: each key region's load and replicas, then the splits made.
pub async fn print_key_regions(client: &Client, space: &str) -> Result<(), Failure> {
    let config = client.refresh().await?;
    let Some(sc) = config.space(space) else {
        return Err(Failure::Error(format!("no space named {space:?}")));
    };
    let loads = client.key_region_loads(space).await?;
    let mut text = format!(
        "{:>6}  {:>10}  {:<24}  replicas\n",
        "region", "objects", "would split at"
    );
    for (r, set) in sc.replicas[0].iter().enumerate() {
        let load = loads.iter().find(|l| l.region as usize == r);
        let objects = load.map_or("?".to_owned(), |l| l.objects.to_string());
        let at = load
            .and_then(|l| l.split_at.as_ref())
            .map_or("-".to_owned(), Value::to_string);
        let replicas: Vec<String> = set.iter().map(|s| s.0.to_string()).collect();
        text += &format!("{r:>6}  {objects:>10}  {at:<24}  {}\n", replicas.join(","));
    }
    for split in &sc.schema.key_splits {
        text += &format!(
            "split: region {} at {} (epoch {})\n",
            split.region, split.at, split.epoch
        );
    }
    crate::stdio::print_text(&text)
}

/// `tessera split-region SPACE [REGION] [--at KEY]`: by default the fullest region at its
/// middle key.
pub async fn split_region(
    client: &Client,
    space: &str,
    region: Option<u32>,
    at: Option<Value>,
) -> Result<(), Failure> {
    let config = client.refresh().await?;
    let regions = config.space(space).map_or(0, |s| s.replicas[0].len());
    if let Some(r) = region.filter(|r| *r as usize >= regions) {
        return Err(Failure::Error(format!(
            "{space:?} has no key region {r}: it has {regions} (tessera key-regions {space} lists them)"
        )));
    }
    let (region, at) = match (region, at) {
        (Some(r), Some(at)) => (r, at),
        (region, None) => {
            let loads = client.key_region_loads(space).await?;
            let chosen = match region {
                Some(r) => loads.iter().find(|l| l.region == r),
                None => loads
                    .iter()
                    .max_by_key(|l| (l.objects, std::cmp::Reverse(l.region))),
            };
            let Some(load) = chosen else {
                return Err(Failure::Error(format!(
                    "no load known for that key region of {space:?} (tessera key-regions {space} lists them)"
                )));
            };
            let Some(at) = load.split_at.clone() else {
                return Err(Failure::Error(format!(
                    "key region {} of {space:?} holds {} objects, with no key to split it at: give --at",
                    load.region, load.objects
                )));
            };
            (load.region, at)
        }
        (None, Some(_)) => {
            return Err(Failure::Error("--at needs the REGION it splits".to_owned()))
        }
    };
    client.split_key_region(space, region, at.clone()).await?;
    let config = client.refresh().await?;
    let new = config.space(space).map_or(0, |s| s.replicas[0].len() - 1);
    crate::stdio::print_text(&format!(
        "split key region {region} of {space} at {at}: its keys from {at} up are region {new}\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::{parse_space, ServerId};

    fn load(region: u32, objects: u64, at: i64) -> KeyRegionLoad {
        KeyRegionLoad {
            region,
            objects,
            split_at: Some(Value::Int(at)),
        }
    }

    #[test]
    fn the_driver_splits_the_fullest_region_only_when_every_region_answered() {
        let schema =
            parse_space("space s key int k create 3 partitions placement ordered").unwrap();
        let space = SpaceConfig::owned_by(1, schema, &[ServerId(1)]);
        let loads = vec![load(0, 10, 5), load(1, 500, 700), load(2, 20, 2000)];
        assert_eq!(due_split(&space, &loads, 100), Some((1, Value::Int(700))));
        // Below the minimum, or not over twice the others' mean: no split.
        assert_eq!(due_split(&space, &loads, 1000), None);
        let even = vec![load(0, 300, 5), load(1, 500, 700), load(2, 300, 2000)];
        assert_eq!(due_split(&space, &even, 100), None);
        // A region missing (its leader did not answer): no split.
        assert_eq!(due_split(&space, &loads[..2], 100), None);
    }
}
