//! The I/O shell of the two workloads that are not YCSB, `subspaces` and `search-fixed`
//! (their spaces, keys, values and queries are in [`crate::subspaces`] and
//! [`crate::search_fixed`]). Tessera only: they exist to measure subspaces and search routing.
//!
//! Each task holds a clone of one `tessera_client::Client` (pipelined; in cluster mode it routes
//! every put to its point leader and fans searches out to the regions' servers) and runs through
//! the same closed-loop driver as YCSB, so the phase reports have the same shape.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use tessera_client::{Client, Predicate, Status, Value};

use crate::driver::{phase_name, run_closed_loop, task_rng, PhaseKind, TaskStats, Tickets};
use crate::report::{Deployment, ExplainSummary, PhaseReport, SearchFixedReport, SubspacesReport};
use crate::search_fixed::{self, SearchFixedPlan};
use crate::subspaces::{self, SubspacesPlan};
use crate::target::{client_error, TargetError};
use crate::workload::Operation;

/// How many queries `search-fixed` asks `explain` about (seeded, like the run's queries).
pub const EXPLAIN_SAMPLES: u64 = 32;

/// What a phase needs to know besides its workload.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Phases {
    pub load: bool,
    pub run: bool,
    pub records: u64,
    pub operations: u64,
    pub threads: usize,
    pub seed: u64,
    pub duration: Option<Duration>,
    pub progress: bool,
}

/// Creates the space unless it exists; an existing one must have the same attributes,
/// subspaces and partitions (its failures tolerated may differ).
async fn prepare(client: &Client, description: &str) -> Result<(), TargetError> {
    let wanted = tessera_types::parse_space(description)
        .map_err(|e| TargetError::Protocol(format!("{e}")))?;
    match client.add_space(description).await {
        Ok(()) => return Ok(()),
        Err(e) if e.status() == Some(Status::SpaceExists) => {}
        Err(e) => return Err(client_error(e)),
    }
    let have = client
        .describe_space(&wanted.name)
        .await
        .map_err(client_error)?;
    if have.attributes != wanted.attributes
        || have.subspaces != wanted.subspaces
        || have.partitions != wanted.partitions
    {
        return Err(TargetError::Server(format!(
            "space {:?} exists with another shape: remove it (tessera rm-space {}) and load again",
            wanted.name, wanted.name
        )));
    }
    Ok(())
}

/// Servers, replicas and mode, once `space` is in the client's configuration.
pub(crate) async fn deployment(client: &Client, space: &str) -> Result<Deployment, TargetError> {
    let mut config = client.configuration();
    if config.space(space).is_none() {
        config = client.refresh().await.map_err(client_error)?;
    }
    let replicas = config
        .space(space)
        .and_then(|s| s.replicas.first()?.first().map(|set| set.len() as u64))
        .unwrap_or(0);
    Ok(Deployment {
        servers: config.servers.len(),
        replicas,
    })
}

/// Puts `attrs` under `key`, recorded as `op`.
async fn put(
    client: &Client,
    space: &str,
    key: String,
    attrs: Vec<(&'static str, Value)>,
    op: Operation,
    stats: &mut TaskStats,
) {
    let started = Instant::now();
    let outcome = client
        .put(space, key, attrs)
        .await
        .map(|()| true)
        .map_err(client_error);
    stats.record(op, started, outcome);
}

/// Runs the load phase: object `n` for every ticket `n`, written by `attrs(n)`.
pub(crate) async fn load(
    client: &Client,
    space: &str,
    phases: &Phases,
    attrs: impl Fn(u64) -> (String, Vec<(&'static str, Value)>) + Send + Sync + 'static,
) -> PhaseReport {
    let attrs = Arc::new(attrs);
    let space: Arc<str> = space.into();
    let clients = vec![client.clone(); phases.threads];
    let (_, report) = run_closed_loop(
        clients,
        phase_name(PhaseKind::Load),
        phases.records,
        None,
        phases.progress,
        {
            move |client: Client, _id, tickets: Arc<Tickets>| {
                let (attrs, space) = (Arc::clone(&attrs), Arc::clone(&space));
                async move {
                    let mut stats = TaskStats::new();
                    while let Some(n) = tickets.next() {
                        let (key, values) = attrs(n);
                        put(&client, &space, key, values, Operation::Insert, &mut stats).await;
                        tickets.finished();
                    }
                    (client, stats)
                }
            }
        },
    )
    .await;
    report
}

/// `subspaces`: load `records` objects, then `operations` puts that move each object in every
/// subspace.
pub(crate) async fn run_subspaces(
    client: Client,
    plan: SubspacesPlan,
    phases: Phases,
) -> Result<(Option<PhaseReport>, Option<PhaseReport>, SubspacesReport), TargetError> {
    let space = plan.space_name();
    let attrs = move |n: u64, generation: u64| -> Vec<(&'static str, Value)> {
        plan.values(n, generation)
            .iter()
            .enumerate()
            .map(|(i, &v)| (subspaces::attribute(i), Value::Int(v)))
            .collect()
    };
    let mut load_report = None;
    if phases.load {
        prepare(&client, &plan.description()).await?;
        load_report = Some(
            load(&client, &space, &phases, move |n| {
                (subspaces::key(n), attrs(n, 0))
            })
            .await,
        );
    }
    let mut run_report = None;
    if phases.run {
        let space: Arc<str> = space.as_str().into();
        let clients = vec![client.clone(); phases.threads];
        let (_, report) = run_closed_loop(
            clients,
            phase_name(PhaseKind::Run),
            phases.operations,
            phases.duration,
            phases.progress,
            {
                move |client: Client, _id, tickets: Arc<Tickets>| {
                    let space = Arc::clone(&space);
                    async move {
                        let mut stats = TaskStats::new();
                        while let Some(i) = tickets.next() {
                            let (n, generation) = plan.update(i, phases.records);
                            put(
                                &client,
                                &space,
                                subspaces::key(n),
                                attrs(n, generation),
                                Operation::Update,
                                &mut stats,
                            )
                            .await;
                            tickets.finished();
                        }
                        (client, stats)
                    }
                }
            },
        )
        .await;
        run_report = Some(report);
    }
    let deployment = deployment(&client, &space).await?;
    let k = deployment.replicas;
    let report = SubspacesReport {
        space,
        subspaces: plan.subspaces,
        partitions: plan.partitions,
        deployment,
        chain_length: plan.update_chain_length(k),
        insert_chain_length: plan.insert_chain_length(k),
    };
    Ok((load_report, run_report, report))
}

fn predicates(query: &[(&'static str, i64)]) -> Vec<Predicate> {
    query
        .iter()
        .map(|&(a, v)| Predicate::equals(a, Value::Int(v)))
        .collect()
}

/// One search; every object returned must satisfy the query, or the search counts as failed.
async fn search(client: &Client, query: &[(&'static str, i64)]) -> Result<u64, TargetError> {
    let found = client
        .search(search_fixed::SPACE_NAME, predicates(query))
        .await
        .map_err(client_error)?;
    for record in &found {
        let int = |a: &str| match record.attributes.get(a) {
            Some(Value::Int(i)) => Ok(*i),
            other => Err(TargetError::Protocol(format!(
                "object {:?} has {a} = {other:?}",
                record.key
            ))),
        };
        let xyz = [int("x")?, int("y")?, int("z")?];
        if !SearchFixedPlan::matches(&xyz, query) {
            return Err(TargetError::Protocol(format!(
                "search {query:?} returned {:?} with {xyz:?}",
                record.key
            )));
        }
    }
    Ok(found.len() as u64)
}

/// `search-fixed`: load `records` objects, then `operations` searches fixing `plan.fixed` of
/// `x, y, z`; then ask `explain` about `EXPLAIN_SAMPLES` queries of the same shape.
pub(crate) async fn run_search_fixed(
    client: Client,
    plan: SearchFixedPlan,
    phases: Phases,
) -> Result<(Option<PhaseReport>, Option<PhaseReport>, SearchFixedReport), TargetError> {
    let space = search_fixed::SPACE_NAME;
    let mut load_report = None;
    if phases.load {
        prepare(&client, &plan.description()).await?;
        load_report = Some(
            load(&client, space, &phases, |n| {
                let xyz = search_fixed::object(n);
                let attrs = search_fixed::ATTRIBUTES
                    .iter()
                    .zip(xyz)
                    .map(|(&a, v)| (a, Value::Int(v)))
                    .collect();
                (search_fixed::key(n), attrs)
            })
            .await,
        );
    }
    let mut run_report = None;
    if phases.run {
        let clients = vec![client.clone(); phases.threads];
        let (_, report) = run_closed_loop(
            clients,
            phase_name(PhaseKind::Run),
            phases.operations,
            phases.duration,
            phases.progress,
            {
                move |client: Client, id, tickets: Arc<Tickets>| async move {
                    let mut rng = task_rng(phases.seed, PhaseKind::Run, id);
                    let mut stats = TaskStats::new();
                    while tickets.next().is_some() {
                        let query = plan.query(&mut rng);
                        let started = Instant::now();
                        let outcome = search(&client, &query).await;
                        if let Ok(found) = outcome {
                            stats.returned(Operation::Search, found);
                        }
                        // An empty result is a valid answer (a value combination nobody has).
                        stats.record(Operation::Search, started, outcome.map(|_| true));
                        tickets.finished();
                    }
                    (client, stats)
                }
            },
        )
        .await;
        run_report = Some(report);
    }

    let mut rng = SmallRng::seed_from_u64(phases.seed ^ 0xE4B1_A100);
    let mut samples = Vec::new();
    let (mut dimensions, mut subspace_regions) = (Vec::new(), 0);
    for i in 0..EXPLAIN_SAMPLES {
        let e = client
            .explain(space, predicates(&plan.query(&mut rng)))
            .await
            .map_err(client_error)?;
        if i == 0 {
            (dimensions, subspace_regions) = (e.dimensions.clone(), e.subspace_regions);
        }
        samples.push((e.servers_contacted, e.regions_contacted));
    }
    let mean_objects_returned = run_report.as_ref().and_then(|r| {
        let s = r.ops.get(Operation::Search.name())?;
        (s.count > 0).then(|| s.records_returned.unwrap_or(0) as f64 / s.count as f64)
    });
    let report = SearchFixedReport {
        space: space.to_owned(),
        fixed: plan.fixed,
        partitions: plan.partitions,
        values_per_attribute: search_fixed::VALUES,
        deployment: deployment(&client, space).await?,
        expected_objects_per_search: plan.expected_matches(phases.records),
        mean_objects_returned,
        explain: ExplainSummary::from_samples(dimensions, subspace_regions, &samples),
    };
    Ok((load_report, run_report, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explain_summary_folds_samples() {
        let s = ExplainSummary::from_samples(vec!["x".into()], 64, &[(4, 16), (3, 16), (2, 16)]);
        assert_eq!(
            (s.queries, s.servers_contacted_min, s.servers_contacted_max),
            (3, 2, 4)
        );
        assert_eq!(
            (s.servers_contacted_mean, s.regions_contacted_mean),
            (3.0, 16.0)
        );
        let empty = ExplainSummary::from_samples(vec![], 1, &[]);
        assert_eq!((empty.queries, empty.servers_contacted_mean), (0, 0.0));
    }

    #[test]
    fn predicates_fix_each_queried_attribute_by_equality() {
        let p = predicates(&[("x", 5), ("y", -1)]);
        assert_eq!(
            p,
            vec![
                Predicate::equals("x", Value::Int(5)),
                Predicate::equals("y", Value::Int(-1))
            ]
        );
        assert!(predicates(&[]).is_empty());
    }
}
