//! Workload `secondary` (issue 12, item 1): searches on secondary attributes, the reason
//! Tessera exists, against the stores users would pick instead, with the same data, queries,
//! concurrency and report.
//!
//! Record `n` is the person `p{n}` with `city` (one of `records / 100` cities, so a city
//! holds ~100 people), `age` (0..100, so a city and an age hold ~1), `score` (0..1 000 000) and
//! `name`, each drawn from a hash of `n` ([`person`]): pure, so the expected answer of any
//! query is known without asking anyone ([`expected`]). A run times one query kind
//! (`--query`):
//! * `eq1`: `city = C` (~100 matches);
//! * `eq2`: `city = C AND age = A` (~1 match);
//! * `range`: `score BETWEEN L AND L + 999` (0.1 % of the records, ~100 at 100 000).
//!
//! Tessera: space `people` with subspaces `city` and `age, score` (`--people-subspaces grid`,
//! the default), or `city`, `age` and `score` (`per-index`: one subspace per PostgreSQL index).
//! PostgreSQL: table `people` with B-tree indexes on `city`, `age` and `score`. Cassandra: table `people` with
//! storage-attached indexes on the same three (`target::cassandra::People`). After Tessera's
//! load, the benchmark waits for its re-cut driver to cut the int axes by the data
//! ([`System::after_load`]). Before a run is timed, a sample of its queries must return exactly
//! the expected counts on the system under test.

use std::sync::Arc;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use serde::Serialize;
use tessera_client::{Client, Predicate, PredicateOp, Status, Value};
use tessera_types::{AttributeType, PrimitiveType};

use crate::driver::{phase_name, run_closed_loop, task_rng, PhaseKind, TaskStats, Tickets};
use crate::report::PhaseReport;
use crate::target::{client_error, tessera, TargetError};
use crate::workload::Operation;

/// The space (Tessera) or table (PostgreSQL).
pub const NAME: &str = "people";
/// People per city, on average.
pub const PER_CITY: u64 = 100;
/// Ages are `0..AGES`.
pub const AGES: i64 = 100;
/// Scores are `0..SCORES`; a range query spans [`RANGE_WIDTH`] of them (0.1 %).
pub const SCORES: i64 = 1_000_000;
pub const RANGE_WIDTH: i64 = 1_000;
/// Queries checked against [`expected`] before a run is timed.
pub const AGREEMENT_SAMPLES: u64 = 16;

/// Tessera's space, as `--people-subspaces grid` makes it (and workload `plan` computes it).
pub const DESCRIPTION: &str = "space people key id attributes string city, int age, int score, string name subspace city subspace age, score create 64 partitions";
/// Tessera's space as `--people-subspaces per-index` makes it.
pub const DESCRIPTION_PER_INDEX: &str = "space people key id attributes string city, int age, int score, string name subspace city subspace age subspace score create 64 partitions";

/// Which subspaces Tessera's space has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Subspaces {
    /// `city` and `age, score`: a `score` range reads one column of the `age, score` grid,
    /// a seek per age in each region it crosses.
    #[default]
    Grid,
    /// `city`, `age` and `score`: one subspace per PostgreSQL index, so every query reads
    /// the structure PostgreSQL reads.
    PerIndex,
}

impl Subspaces {
    pub fn description(self) -> &'static str {
        match self {
            Subspaces::Grid => DESCRIPTION,
            Subspaces::PerIndex => DESCRIPTION_PER_INDEX,
        }
    }
}

/// Which query a run times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum QueryKind {
    /// `city = C` (~100 matches).
    Eq1,
    /// `city = C AND age = A` (~1 match).
    Eq2,
    /// `score BETWEEN L AND L + 999` (0.1 % of the records).
    Range,
}

/// One person.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Person {
    pub key: String,
    pub city: String,
    pub age: i64,
    pub score: i64,
    pub name: String,
}

/// One query, with its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    Eq1 { city: String },
    Eq2 { city: String, age: i64 },
    Range { lo: i64, hi: i64 },
}

/// A 64-bit mix (splitmix64's finalizer): independent-looking values from `n` and a salt.
fn mix(n: u64, salt: u64) -> u64 {
    let mut z = n ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn cities(records: u64) -> u64 {
    (records / PER_CITY).max(1)
}

fn city_name(i: u64) -> String {
    format!("city{i:05}")
}

/// Record `n` of a load of `records`.
pub fn person(n: u64, records: u64) -> Person {
    Person {
        key: format!("p{n}"),
        city: city_name(mix(n, 1) % cities(records)),
        age: (mix(n, 2) % AGES as u64) as i64,
        score: (mix(n, 3) % SCORES as u64) as i64,
        name: format!("name{:08x}", mix(n, 4) as u32),
    }
}

/// A query of `kind`, its parameters drawn uniformly.
pub fn query(kind: QueryKind, records: u64, rng: &mut impl Rng) -> Query {
    let city = |rng: &mut _| city_name(Rng::random_range(rng, 0..cities(records)));
    match kind {
        QueryKind::Eq1 => Query::Eq1 { city: city(rng) },
        QueryKind::Eq2 => Query::Eq2 {
            city: city(rng),
            age: rng.random_range(0..AGES),
        },
        QueryKind::Range => {
            let lo = rng.random_range(0..=SCORES - RANGE_WIDTH);
            Query::Range {
                lo,
                hi: lo + RANGE_WIDTH - 1,
            }
        }
    }
}

/// Whether `p` matches `q`.
pub fn matches(q: &Query, p: &Person) -> bool {
    match q {
        Query::Eq1 { city } => p.city == *city,
        Query::Eq2 { city, age } => p.city == *city && p.age == *age,
        Query::Range { lo, hi } => (*lo..=*hi).contains(&p.score),
    }
}

/// How many of records `0..records` match `q`, by brute force.
pub fn expected(q: &Query, records: u64) -> u64 {
    (0..records)
        .filter(|&n| matches(q, &person(n, records)))
        .count() as u64
}

/// A system the workload runs against. One value per driver task.
pub enum System {
    /// One pipelined client shared by the tasks (cloned).
    Tessera(Client),
    /// One connection per task, statements prepared.
    #[cfg(feature = "peers")]
    Postgres(Box<crate::target::postgres::People>),
    /// One session and its prepared statements, shared by the tasks.
    #[cfg(feature = "peers")]
    Cassandra(Arc<crate::target::cassandra::People>),
}

impl System {
    pub async fn tessera(addr: &str) -> Result<System, TargetError> {
        Ok(System::Tessera(
            Client::connect(addr).await.map_err(client_error)?,
        ))
    }

    /// Tessera: creates the space unless it exists (PostgreSQL's and Cassandra's tables were
    /// made when they connected).
    async fn prepare(&self, subspaces: Subspaces) -> Result<(), TargetError> {
        if let System::Tessera(client) = self {
            match client.add_space(subspaces.description()).await {
                Ok(()) => {}
                Err(e) if e.status() == Some(Status::SpaceExists) => {}
                Err(e) => return Err(client_error(e)),
            }
        }
        Ok(())
    }

    async fn insert(&self, p: &Person) -> Result<(), TargetError> {
        match self {
            System::Tessera(client) => client
                .put(
                    NAME,
                    p.key.as_str(),
                    [
                        ("city", Value::from(p.city.as_str())),
                        ("age", Value::Int(p.age)),
                        ("score", Value::Int(p.score)),
                        ("name", Value::from(p.name.as_str())),
                    ],
                )
                .await
                .map_err(client_error),
            #[cfg(feature = "peers")]
            System::Postgres(people) => people.insert(p).await,
            #[cfg(feature = "peers")]
            System::Cassandra(people) => people.insert(p).await,
        }
    }

    /// After the load, before any query: Tessera's re-cut driver has cut the int axes (`age`,
    /// `score`) by the data ([`tessera::wait_for_recuts`]), so that queries are timed on the
    /// space a user would have, not on equal slices of the 64-bit range or beside the re-cut.
    pub async fn after_load(&self, most: std::time::Duration) -> Result<(), TargetError> {
        let System::Tessera(client) = self else {
            return Ok(());
        };
        let found = tessera::wait_for_recuts(client, NAME, most, |schema, subspace| {
            subspace.dimensions.iter().any(|d| {
                matches!(
                    schema.attribute(*d).ty,
                    AttributeType::Primitive(PrimitiveType::Int | PrimitiveType::Float)
                )
            })
        })
        .await?;
        tessera::report_recuts(NAME, &found);
        Ok(())
    }

    /// Runs `q`, reading every matching object whole; returns how many matched.
    pub async fn query(&self, q: &Query) -> Result<u64, TargetError> {
        match self {
            System::Tessera(client) => {
                let predicates = match q {
                    Query::Eq1 { city } => vec![Predicate::equals("city", city.as_str())],
                    Query::Eq2 { city, age } => vec![
                        Predicate::equals("city", city.as_str()),
                        Predicate::equals("age", *age),
                    ],
                    Query::Range { lo, hi } => vec![Predicate::new(
                        "score",
                        PredicateOp::Range(Value::Int(*lo), Value::Int(*hi)),
                    )],
                };
                let found = client
                    .search(NAME, predicates)
                    .await
                    .map_err(client_error)?;
                Ok(found.len() as u64)
            }
            #[cfg(feature = "peers")]
            System::Postgres(people) => people.query(q).await,
            #[cfg(feature = "peers")]
            System::Cassandra(people) => people.query(q).await,
        }
    }
}

/// What the workload reports besides its phases.
#[derive(Clone, Debug, Serialize)]
pub struct SecondaryReport {
    pub query: QueryKind,
    /// Queries checked against the expected counts before the run was timed.
    pub agreement_samples: u64,
    /// Mean matches of those queries.
    pub mean_expected_matches: f64,
}

/// The phases to run.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub kind: QueryKind,
    /// Tessera's subspaces, when the load makes its space.
    pub subspaces: Subspaces,
    /// How long the load waits for Tessera's re-cut driver ([`System::after_load`]); zero:
    /// not at all.
    pub recut_wait: std::time::Duration,
    pub load: bool,
    pub run: bool,
    pub records: u64,
    pub operations: u64,
    pub seed: u64,
    pub duration: Option<std::time::Duration>,
    pub progress: bool,
}

/// Why the workload stopped.
#[derive(Debug, thiserror::Error)]
pub enum SecondaryError {
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("{0}")]
    Disagreement(String),
}

/// Loads (if asked), checks a sample of queries against [`expected`], and times the run.
/// `systems` holds one value per task.
pub async fn run(
    systems: Vec<System>,
    plan: Plan,
) -> Result<(Option<PhaseReport>, Option<PhaseReport>, SecondaryReport), SecondaryError> {
    let systems: Vec<Arc<System>> = systems.into_iter().map(Arc::new).collect();
    let first = systems.first().expect("at least one task").clone();
    let mut load_report = None;
    if plan.load {
        first.prepare(plan.subspaces).await?;
        let (_, report) = run_closed_loop(
            systems.clone(),
            phase_name(PhaseKind::Load),
            plan.records,
            None,
            plan.progress,
            move |system: Arc<System>, _id, tickets: Arc<Tickets>| async move {
                let mut stats = TaskStats::new();
                while let Some(n) = tickets.next() {
                    let started = Instant::now();
                    let outcome = system.insert(&person(n, plan.records)).await;
                    stats.record(Operation::Insert, started, outcome.map(|()| true));
                    tickets.finished();
                }
                (system, stats)
            },
        )
        .await;
        load_report = Some(report);
        if !plan.recut_wait.is_zero() {
            first.after_load(plan.recut_wait).await?;
        }
    }
    // The agreement check: the same queries every system is timed on, answered exactly.
    let mut rng = rand::rngs::StdRng::seed_from_u64(plan.seed ^ 0x5EC0_0DA2_0000_0001);
    let mut expected_total = 0u64;
    for _ in 0..AGREEMENT_SAMPLES {
        let q = query(plan.kind, plan.records, &mut rng);
        let want = expected(&q, plan.records);
        let got = first.query(&q).await?;
        if got != want {
            return Err(SecondaryError::Disagreement(format!(
                "{q:?} found {got} records; the load wrote {want} that match"
            )));
        }
        expected_total += want;
    }
    let mut run_report = None;
    if plan.run {
        let (_, report) = run_closed_loop(
            systems,
            phase_name(PhaseKind::Run),
            plan.operations,
            plan.duration,
            plan.progress,
            move |system: Arc<System>, id, tickets: Arc<Tickets>| async move {
                let mut rng = task_rng(plan.seed, PhaseKind::Run, id);
                let mut stats = TaskStats::new();
                while tickets.next().is_some() {
                    let q = query(plan.kind, plan.records, &mut rng);
                    let started = Instant::now();
                    let outcome = system.query(&q).await;
                    if let Ok(found) = outcome {
                        stats.returned(Operation::Search, found);
                    }
                    stats.record(Operation::Search, started, outcome.map(|_| true));
                    tickets.finished();
                }
                (system, stats)
            },
        )
        .await;
        run_report = Some(report);
    }
    Ok((
        load_report,
        run_report,
        SecondaryReport {
            query: plan.kind,
            agreement_samples: AGREEMENT_SAMPLES,
            mean_expected_matches: expected_total as f64 / AGREEMENT_SAMPLES as f64,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The data has the selectivities the workload promises, and queries find what they
    /// should (a model check of [`expected`] against its definition on a small load).
    #[test]
    fn queries_have_the_promised_selectivity() {
        let records = 20_000;
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut mean = |kind| {
            let total: u64 = (0..40)
                .map(|_| expected(&query(kind, records, &mut rng), records))
                .sum();
            total as f64 / 40.0
        };
        let (eq1, eq2, range) = (
            mean(QueryKind::Eq1),
            mean(QueryKind::Eq2),
            mean(QueryKind::Range),
        );
        assert!((70.0..130.0).contains(&eq1), "eq1 {eq1}");
        assert!((0.3..3.0).contains(&eq2), "eq2 {eq2}");
        assert!(
            (12.0..30.0).contains(&range),
            "range {range} (0.1 % of 20 000)"
        );
        let p = person(7, records);
        assert!(matches(
            &Query::Eq1 {
                city: p.city.clone()
            },
            &p
        ));
        assert!(!matches(
            &Query::Eq2 {
                city: p.city.clone(),
                age: p.age + 1
            },
            &p
        ));
        assert!(matches(
            &Query::Range {
                lo: p.score,
                hi: p.score
            },
            &p
        ));
    }
}
