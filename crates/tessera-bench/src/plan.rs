//! Workload `plan` (docs/scale.md): what the server count costs a smart client and the
//! configuration, over clusters computed without running them.
//!
//! For each server count N of `--plan-servers`, the configuration is built by the coordinators'
//! own state machine (`tessera_coordinator::ClusterState`: N servers registered, then the
//! spaces of `tessera bench`'s YCSB load and of workload `secondary` added with K =
//! `--plan-replicas` replicas a region), exactly as a live cluster of N servers would hold it
//! but for the servers' addresses. Then, on this thread, nothing else in flight:
//!
//! * its encoded size (`Configuration::encoded_bytes`, what every server and client fetches at
//!   each epoch) and its regions;
//! * the time to compute every space's tessellations, which a client does once per epoch;
//! * the client's planning of a search, as a cluster client plans each one before it sends
//!   anything ([`tessera_client::plan_search`]: predicates checked, subspace chosen, regions
//!   crossed, a replica each, then one request's predicates per server asked), for three
//!   classes of search of `people`: `one` region (`city = C`), a `few` (`score` over 0.1 % of
//!   its values, `age` open: one column of the `age, score` grid), and `all` (`name = N`, no
//!   dimension), under both fan-outs. `--operations` plans per class and fan-out, in five
//!   batches after one more that warms up; the report gives the median batch's nanoseconds
//!   per plan.
//!
//! Pin the process (`taskset`) and keep the machine quiet: these are nanoseconds of one core.

use std::hint::black_box;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tessera_client::{plan_search, Configuration, Fanout, Predicate, PredicateOp, SpaceMap, Value};
use tessera_coordinator::{ClusterState, Command};

use crate::secondary::{self, QueryKind};
use crate::twitter_bench::FanoutChoice;

/// `tessera bench -w plan` options (with `--operations`, plans per class and fan-out, and
/// `--seed`).
#[derive(Clone, Debug, clap::Args)]
pub struct PlanArgs {
    /// Server counts of the computed clusters, comma-separated.
    #[arg(
        id = "plan_servers",
        long = "plan-servers",
        value_delimiter = ',',
        default_value = "8,16,32,64,128"
    )]
    pub servers: Vec<u32>,
    /// Replicas of every region (K = failures tolerated + 1).
    #[arg(id = "plan_replicas", long = "plan-replicas", default_value_t = 2)]
    pub replicas: u32,
}

/// What `-w plan` measured.
#[derive(Clone, Debug, Serialize)]
pub struct PlanReport {
    pub replicas: u32,
    /// Plans timed per class and fan-out (in five batches).
    pub plans: u64,
    /// The spaces of every configuration, in creation order.
    pub spaces: Vec<String>,
    pub clusters: Vec<PlanCluster>,
}

/// One computed cluster.
#[derive(Clone, Debug, Serialize)]
pub struct PlanCluster {
    pub servers: u32,
    /// `Configuration::encoded_bytes`.
    pub configuration_bytes: usize,
    /// Regions of every subspace of every space.
    pub regions: u64,
    /// Computing every space's tessellations (once per epoch at a client), µs.
    pub tessellations_us: f64,
    pub searches: Vec<PlannedSearch>,
}

/// One class of search under one fan-out.
#[derive(Clone, Debug, Serialize)]
pub struct PlannedSearch {
    /// `one`, `few` or `all`.
    pub class: &'static str,
    /// The shape of its predicates.
    pub query: &'static str,
    pub fanout: FanoutChoice,
    /// Regions each search crosses (the same for every search of the class).
    pub regions: u64,
    /// Servers asked, mean and most over the plans.
    pub servers_mean: f64,
    pub servers_max: u64,
    /// The median batch's time per plan.
    pub ns_per_plan: f64,
}

/// Why `-w plan` could not run.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("{0}")]
    InvalidArgs(String),
}

/// The spaces every computed configuration holds: YCSB's and `secondary`'s.
const SPACES: [&str; 2] = [crate::workload::SPACE_DESCRIPTION, secondary::DESCRIPTION];

/// The configuration the coordinators would hold for `servers` servers (addresses
/// `127.0.0.1:PORT`, ports from 20 000) and the benchmark spaces, K replicas a region.
pub fn configuration(servers: u32, replicas: u32) -> Result<Configuration, PlanError> {
    if replicas == 0 || replicas > servers {
        return Err(PlanError::InvalidArgs(format!(
            "--plan-replicas {replicas} must be between 1 and the servers ({servers})"
        )));
    }
    let mut state = ClusterState::default();
    for i in 0..servers {
        state
            .apply(Command::RegisterServer {
                token: u128::from(i) + 1,
                address: format!("127.0.0.1:{}", 20_000 + i),
                incarnation: 1,
            })
            .map_err(|e| PlanError::InvalidArgs(format!("registering server {i}: {e}")))?;
    }
    for text in SPACES {
        let schema = tessera_types::parse_space_tolerating(text, replicas - 1)
            .map_err(|e| PlanError::InvalidArgs(e.to_string()))?;
        state
            .apply(Command::AddSpace { schema })
            .map_err(|e| PlanError::InvalidArgs(e.to_string()))?;
    }
    Ok(state.configuration())
}

/// The three classes of search of `people`: name, predicate shape, and `count` searches of it
/// with their parameters drawn from `rng`.
fn searches(
    rng: &mut SmallRng,
    count: usize,
) -> Vec<(&'static str, &'static str, Vec<Vec<Predicate>>)> {
    let records = 100_000;
    let one = (0..count)
        .map(|_| match secondary::query(QueryKind::Eq1, records, rng) {
            secondary::Query::Eq1 { city } => vec![Predicate::equals("city", city.as_str())],
            other => unreachable!("asked for eq1, got {other:?}"),
        })
        .collect();
    let few = (0..count)
        .map(|_| match secondary::query(QueryKind::Range, records, rng) {
            secondary::Query::Range { lo, hi } => vec![Predicate::new(
                "score",
                PredicateOp::Range(Value::Int(lo), Value::Int(hi)),
            )],
            other => unreachable!("asked for a range, got {other:?}"),
        })
        .collect();
    let all = (0..count)
        .map(|_| {
            let name = format!("name{:08x}", rng.random::<u32>());
            vec![Predicate::equals("name", name.as_str())]
        })
        .collect();
    vec![
        ("one", "city = C", one),
        ("few", "score in [lo, lo + 999]", few),
        ("all", "name = N", all),
    ]
}

/// Runs `-w plan`: `plans` plans per class and fan-out on each computed cluster.
pub fn run(args: &PlanArgs, plans: u64, seed: u64) -> Result<PlanReport, PlanError> {
    if args.servers.is_empty() {
        return Err(PlanError::InvalidArgs(
            "--plan-servers names no count".into(),
        ));
    }
    let batch = (plans / 5).max(1);
    let mut clusters = Vec::new();
    for &servers in &args.servers {
        let config = configuration(servers, args.replicas)?;
        let people = config
            .space(secondary::NAME)
            .expect("the people space was added");
        let regions = config
            .spaces
            .iter()
            .flat_map(|s| &s.replicas)
            .map(|sets| sets.len() as u64)
            .sum();
        let started = Instant::now();
        let rounds = 20;
        for _ in 0..rounds {
            for space in &config.spaces {
                black_box(space.tessellations());
            }
        }
        let tessellations_us = started.elapsed().as_secs_f64() * 1e6 / f64::from(rounds);
        let people = SpaceMap::new(people.clone());
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut out = Vec::new();
        for (class, query, pool) in searches(&mut rng, 1024) {
            for fanout in [FanoutChoice::Fewest, FanoutChoice::EachRegion] {
                let f = match fanout {
                    FanoutChoice::Fewest => Fanout::Fewest,
                    FanoutChoice::EachRegion => Fanout::EachRegion,
                };
                // Shape first (untimed): regions and servers of every plan of the pool.
                let (mut servers_sum, mut servers_max, mut regions_of) = (0u64, 0u64, None);
                for (turn, predicates) in pool.iter().enumerate() {
                    let planned = plan_search(&people, predicates, f, turn as u64)
                        .map_err(|e| PlanError::InvalidArgs(format!("{class}: {e}")))?;
                    let asked = planned.len() as u64;
                    servers_sum += asked;
                    servers_max = servers_max.max(asked);
                    let crossed: u64 = planned.iter().map(|(_, _, r)| r.len() as u64).sum();
                    if *regions_of.get_or_insert(crossed) != crossed {
                        return Err(PlanError::InvalidArgs(format!(
                            "{class}: searches of one class crossed {crossed} and {regions_of:?} regions"
                        )));
                    }
                }
                let mut per_batch = Vec::with_capacity(6);
                let mut turn = 0u64;
                // A first batch warms caches and the branch predictor, and is not counted.
                for _ in 0..6 {
                    let started = Instant::now();
                    for _ in 0..batch {
                        let predicates = &pool[(turn % pool.len() as u64) as usize];
                        let planned = plan_search(&people, predicates, f, turn);
                        // The requests it makes: the predicates go to each server asked.
                        for part in planned.iter().flatten() {
                            black_box((part, predicates.to_vec()));
                        }
                        black_box(planned).ok();
                        turn += 1;
                    }
                    per_batch.push(started.elapsed().as_nanos() as f64 / batch as f64);
                }
                per_batch.remove(0);
                per_batch.sort_by(f64::total_cmp);
                out.push(PlannedSearch {
                    class,
                    query,
                    fanout,
                    regions: regions_of.unwrap_or(0),
                    servers_mean: servers_sum as f64 / pool.len() as f64,
                    servers_max,
                    ns_per_plan: per_batch[2],
                });
            }
        }
        clusters.push(PlanCluster {
            servers,
            configuration_bytes: config.encoded_bytes(),
            regions,
            tessellations_us,
            searches: out,
        });
    }
    Ok(PlanReport {
        replicas: args.replicas,
        plans: batch * 5,
        spaces: config_names(),
        clusters,
    })
}

fn config_names() -> Vec<String> {
    SPACES
        .iter()
        .map(|t| {
            tessera_types::parse_space(t)
                .expect("the benchmark spaces parse")
                .name
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_computed_configuration_is_the_coordinators() {
        let config = configuration(8, 2).unwrap();
        assert!(config.check().is_ok());
        assert_eq!(config.servers.len(), 8);
        assert_eq!(config.spaces.len(), 2);
        for space in &config.spaces {
            for sets in &space.replicas {
                for set in sets {
                    assert_eq!(set.len(), 2, "K = 2 distinct servers");
                    assert_ne!(set[0], set[1]);
                }
            }
        }
        assert!(configuration(2, 3).is_err(), "more replicas than servers");
    }

    #[test]
    fn the_report_grows_with_the_servers_where_it_should() {
        let args = PlanArgs {
            servers: vec![4, 16, 64],
            replicas: 2,
        };
        let report = run(&args, 50, 1).unwrap();
        assert_eq!(report.spaces, ["ycsb", "people"]);
        assert_eq!(report.plans, 50);
        assert_eq!(report.clusters.len(), 3);
        let c = &report.clusters;
        assert_eq!(
            c[0].regions, c[2].regions,
            "regions follow partitions, not servers"
        );
        // Each server is listed once: the configuration grows with the servers by their
        // entries and ids, a little.
        assert!(c[0].configuration_bytes < c[1].configuration_bytes);
        assert!(c[1].configuration_bytes < c[2].configuration_bytes);
        for cluster in c {
            assert_eq!(cluster.searches.len(), 6, "3 classes, 2 fan-outs");
            assert!(cluster.tessellations_us > 0.0);
            let find = |class: &str, fanout| {
                cluster
                    .searches
                    .iter()
                    .find(|s| s.class == class && s.fanout == fanout)
                    .unwrap()
            };
            for fanout in [FanoutChoice::Fewest, FanoutChoice::EachRegion] {
                let (one, few, all) = (
                    find("one", fanout),
                    find("few", fanout),
                    find("all", fanout),
                );
                assert_eq!(one.regions, 1);
                assert_eq!(one.servers_max, 1);
                assert!(few.regions > 1 && few.regions < all.regions);
                assert_eq!(all.regions, 64, "every region of a 64-partition subspace");
                for s in [one, few, all] {
                    assert!(s.ns_per_plan > 0.0);
                    assert!(s.servers_mean >= 1.0 && s.servers_mean <= s.servers_max as f64);
                    assert!(s.servers_max <= cluster.servers as u64);
                }
            }
            // The fewest servers covering every region, never more than one replica per region
            // asks; no server holds more than ceil(64 K / N) + 1 regions of a subspace.
            let (fewest, each) = (
                find("all", FanoutChoice::Fewest),
                find("all", FanoutChoice::EachRegion),
            );
            assert!(fewest.servers_mean <= each.servers_mean);
            let most_held = (64 * 2_u64).div_ceil(u64::from(cluster.servers)) + 1;
            assert!(fewest.servers_mean * most_held as f64 >= 64.0);
        }
        // More servers: an all-region search asks more of them.
        let all = |i: usize| {
            c[i].searches
                .iter()
                .find(|s| s.class == "all" && s.fanout == FanoutChoice::Fewest)
                .unwrap()
                .servers_mean
        };
        assert!(all(0) < all(1) && all(1) < all(2));
    }
}
