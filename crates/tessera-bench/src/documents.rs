//! Workloads `documents` and `dblp` (issue "Dynamic spaces", item 6; docs/benchmarks.md
//! "Dynamic spaces"): the same records and queries against a Tessera dynamic space, a Tessera
//! typed space, or PostgreSQL's JSONB ([`crate::docsys`]), one system per run of `tessera
//! bench`; scripts/bench-documents.sh runs all three and compares.
//!
//! * `documents`: seed 004's micro-benchmark. The load phase writes `--records` objects of
//!   about five properties (writes/s); the run phase reads `--operations` of them by key
//!   (reads/s), then searches for one object by one property's value for `--query-duration-s`.
//! * `dblp`: the load phase writes the `--entries` bibliography; the run phase times each
//!   query kind ([`QueryKind::DBLP`]) for `--query-duration-s`, one kind after the other.
//!
//! Before anything is timed in the run phase, a sample of every query kind is run and its
//! count compared with the model's (the generator's entries filtered by
//! [`crate::bibliography::Query::matches`]): a system that disagrees fails the benchmark, so
//! three systems that pass agree with each other. For Tessera, `explain` is asked about a
//! sample of every kind, beside the regions tessera-geometry's plan predicts for the same
//! predicates over the shapes in the client's configuration, and (dynamic spaces) the regions
//! that actually hold the matches, the least any placement could read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use tessera_client::Client;

use crate::bibliography::{
    draw_queries, micro_key, micro_object, micro_query, Bibliography, Census, Entry, Query,
    QueryKind, PROPERTIES,
};
use crate::docsys::{to_document, Dataset, RegionsSample, SpaceKind, Support, System, DIMENSIONS};
use crate::driver::{run_closed_loop, task_rng, PhaseKind, TaskStats, Tickets};
use crate::report::{OpReport, PhaseReport};
use crate::target::TargetError;
use crate::workload::Operation;

/// `tessera bench` options of the document workloads.
#[derive(Clone, Debug, clap::Args)]
pub struct DocArgs {
    /// With a tessera:// target: a dynamic space (documents) or a typed space (every property
    /// an attribute, absent ones at their type's default) holding the same records.
    #[arg(long, value_enum, default_value_t = SpaceKind::Dynamic)]
    pub doc_space: SpaceKind,

    /// With --doc-space formula or pointers and workload documents: how many properties the
    /// formula's one overlay names (1 to 5, the seed's formulas of 1 to 5 queryable
    /// dimensions). The dblp formula is fixed: overlays title, year*4,journal and school
    /// (copies with formula, pointers — `&title` ... — with pointers).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=5))]
    pub formula_dims: u8,

    /// Workload dblp: entries of the generated bibliography (the seed's DBLP had 307 780).
    #[arg(long, default_value_t = crate::bibliography::DBLP_ENTRIES_DEFAULT)]
    pub entries: u64,

    /// Seconds each query kind is timed for (workload documents: its search).
    #[arg(long, default_value_t = 10.0)]
    pub query_duration_s: f64,

    /// Queries of each kind whose counts are checked against the model before timing.
    #[arg(long, default_value_t = 3)]
    pub agreement_samples: usize,

    /// Queries of each kind `explain` is asked about (Tessera targets).
    #[arg(long, default_value_t = 12)]
    pub explain_samples: usize,
}

/// Why a document benchmark stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentsError {
    #[error("{0}")]
    Target(#[from] TargetError),
    /// A system's count differs from the model's on a sampled query: its results would not be
    /// comparable with the others', so nothing is timed.
    #[error("{system} disagrees with the model: {details}")]
    Disagreement { system: String, details: String },
    #[error("invalid arguments: {0}")]
    InvalidArgs(String),
}

/// The section `documents` and `dblp` add to the report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DocumentsReport {
    /// tessera-dynamic, tessera-typed or postgres-jsonb.
    pub system: String,
    pub dataset: Dataset,
    /// Records of the data set.
    pub records: u64,
    /// The bibliography's structure (workload dblp, over its first 20 000 entries).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub census: Option<Census>,
    /// Sampled queries, the model's count and the system's.
    pub agreement: Vec<AgreementRow>,
    /// Per query kind (and the micro-benchmark's `read_by_key`).
    pub queries: BTreeMap<String, QueryReport>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct AgreementRow {
    pub kind: String,
    pub query: String,
    pub expected: u64,
    pub got: u64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct QueryReport {
    /// An example of the kind, as `tessera search` takes predicates.
    pub example: String,
    pub support: Support,
    #[serde(flatten)]
    pub op: OpReport,
    /// Records returned per successful query (what the timed run read).
    pub matches_mean: f64,
    pub elapsed_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regions: Option<RegionsSummary>,
}

/// `explain` against the geometry over a sample of one query kind.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RegionsSummary {
    pub samples: u64,
    pub subspace_regions: u64,
    pub explained_mean: f64,
    pub explained_min: u64,
    pub explained_max: u64,
    /// tessera-geometry's `choose_subspace` over the client's registered shapes.
    pub predicted_mean: f64,
    /// Samples where `explain` and the prediction differ (0 unless a shape registered between
    /// the client's refresh and the explain, or the server plans differently).
    pub prediction_mismatches: u64,
    /// Dynamic spaces: unispace regions holding at least one match (from the model's
    /// documents placed by tessera-geometry's `unispace_point`), the least any plan must read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holding_matches_mean: Option<f64>,
    pub shapes_read_mean: f64,
    pub shapes_known: u64,
}

/// What the run needs besides the systems.
#[derive(Clone, Debug)]
pub struct DocPlan {
    pub dataset: Dataset,
    pub load: bool,
    pub run: bool,
    /// `documents`: objects; `dblp`: entries.
    pub records: u64,
    /// `documents`: reads by key.
    pub operations: u64,
    pub threads: usize,
    pub seed: u64,
    pub query_duration: Duration,
    pub agreement_samples: usize,
    pub explain_samples: usize,
    pub progress: bool,
}

/// The records of a data set, by number.
fn record(
    dataset: Dataset,
    seed: u64,
    records: u64,
) -> impl Fn(u64) -> Entry + Send + Sync + Clone + 'static {
    let bib = Bibliography::new(seed, records);
    move |n| match dataset {
        Dataset::Micro => micro_object(seed, n),
        Dataset::Dblp => bib.entry(n),
    }
}

/// Runs the plan over `systems` (one per task; Tessera's share a client). Returns the load
/// phase's report (writes) and the document section.
pub async fn run(
    systems: Vec<System>,
    plan: DocPlan,
) -> Result<(Option<PhaseReport>, DocumentsReport), DocumentsError> {
    let first = systems
        .first()
        .cloned()
        .ok_or_else(|| DocumentsError::InvalidArgs("no system".into()))?;
    let records = record(plan.dataset, plan.seed, plan.records);
    let mut load = None;
    if plan.load {
        first.prepare(plan.dataset).await?;
        load = Some(load_phase(systems.clone(), &plan, records.clone()).await);
    }
    let mut report = DocumentsReport {
        system: first.label().to_owned(),
        dataset: plan.dataset,
        records: plan.records,
        census: (plan.dataset == Dataset::Dblp)
            .then(|| Census::of(&Bibliography::new(plan.seed, plan.records), 20_000)),
        agreement: Vec::new(),
        queries: BTreeMap::new(),
    };
    if !plan.run {
        return Ok((load, report));
    }
    first.after_load(plan.dataset).await?;

    // The queries: a sample checked and explained, and a pool the timed runs cycle through.
    let pool_size = 2_000;
    let checked = plan.agreement_samples.max(plan.explain_samples).max(1);
    let (samples, pools) = match plan.dataset {
        Dataset::Dblp => {
            let bib = Bibliography::new(plan.seed, plan.records);
            let draws = plan.records.saturating_mul(4).max(100_000);
            (
                draw_queries(&bib, &QueryKind::DBLP, checked, 0x5A4D, draws),
                draw_queries(&bib, &QueryKind::DBLP, pool_size, 0x9001, draws),
            )
        }
        Dataset::Micro => {
            let draw = |salt: u64, count: usize| {
                let mut rng = task_rng(plan.seed ^ salt, PhaseKind::Run, 0);
                let queries = (0..count)
                    .map(|_| {
                        micro_query(
                            plan.seed,
                            rng.random_range(0..plan.records.max(1)),
                            rng.random_range(0..6),
                        )
                    })
                    .collect();
                BTreeMap::from([(QueryKind::MicroProperty, queries)])
            };
            (draw(0x5A4D, checked), draw(0x9001, pool_size))
        }
    };
    let dynamic = first.label() == "tessera-dynamic";
    let (expected, holding) = model(&plan, &records, &samples, dynamic);
    // Where each kind's samples start in the flattened lists `model` returns.
    let mut offsets = BTreeMap::new();
    let mut at = 0;
    for (kind, queries) in &samples {
        offsets.insert(*kind, at);
        at += queries.len();
    }
    report.agreement = check_agreement(&first, &plan, &samples, &expected).await?;

    if plan.dataset == Dataset::Micro {
        let op = reads_phase(systems.clone(), &plan).await;
        report.queries.insert(
            "read_by_key".into(),
            QueryReport {
                example: format!("get {}", micro_key(0)),
                support: first.support(&samples[&QueryKind::MicroProperty][0]),
                matches_mean: if op.0.count > 0 { 1.0 } else { 0.0 },
                op: op.0,
                elapsed_s: op.1,
                regions: None,
            },
        );
    }
    for (kind, pool) in pools {
        let Some(example) = pool.first().cloned() else {
            continue;
        };
        let (op, elapsed_s) = queries_phase(systems.clone(), &plan, Arc::new(pool)).await;
        let matches_mean = if op.count > 0 {
            op.records_returned.unwrap_or(0) as f64 / op.count as f64
        } else {
            0.0
        };
        let sample = samples.get(&kind).map(Vec::as_slice).unwrap_or(&[]);
        let k = sample.len().min(plan.explain_samples);
        let start = offsets.get(&kind).copied().unwrap_or(0);
        let holding = dynamic.then(|| &holding[start..start + k]);
        let regions = explain(&first, &sample[..k], holding).await?;
        report.queries.insert(
            kind.name().to_owned(),
            QueryReport {
                example: example.describe(),
                support: first.support(&example),
                op,
                matches_mean,
                elapsed_s,
                regions,
            },
        );
    }
    Ok((load, report))
}

/// Writes records `0..records`.
async fn load_phase(
    systems: Vec<System>,
    plan: &DocPlan,
    records: impl Fn(u64) -> Entry + Send + Sync + Clone + 'static,
) -> PhaseReport {
    let (_, report) = run_closed_loop(
        systems,
        "load",
        plan.records,
        None,
        plan.progress,
        move |system: System, _id, tickets: Arc<Tickets>| {
            let records = records.clone();
            async move {
                let mut stats = TaskStats::new();
                while let Some(n) = tickets.next() {
                    let entry = records(n);
                    let started = Instant::now();
                    let outcome = system.put(&entry).await.map(|()| true);
                    stats.record(Operation::Insert, started, outcome);
                    tickets.finished();
                }
                (system, stats)
            }
        },
    )
    .await;
    report
}

/// `documents`: reads of uniformly chosen keys.
async fn reads_phase(systems: Vec<System>, plan: &DocPlan) -> (OpReport, f64) {
    let (records, seed) = (plan.records.max(1), plan.seed);
    let (_, report) = run_closed_loop(
        systems,
        "read",
        plan.operations,
        None,
        plan.progress,
        move |system: System, id, tickets: Arc<Tickets>| async move {
            let mut rng = task_rng(seed, PhaseKind::Run, id);
            let mut stats = TaskStats::new();
            while tickets.next().is_some() {
                let key = micro_key(rng.random_range(0..records));
                let started = Instant::now();
                let outcome = system.get(&key).await;
                stats.record(Operation::Read, started, outcome);
                tickets.finished();
            }
            (system, stats)
        },
    )
    .await;
    (op_of(&report, Operation::Read), report.elapsed_s)
}

/// One query kind for `plan.query_duration`: task `id` runs the pool's queries from its own
/// offset on, so tasks do not ask the same query at the same moment.
async fn queries_phase(
    systems: Vec<System>,
    plan: &DocPlan,
    pool: Arc<Vec<Query>>,
) -> (OpReport, f64) {
    let (_, report) = run_closed_loop(
        systems,
        "query",
        u64::MAX,
        Some(plan.query_duration),
        plan.progress,
        move |system: System, id, tickets: Arc<Tickets>| {
            let pool = Arc::clone(&pool);
            async move {
                let mut stats = TaskStats::new();
                let mut i = (id as usize).wrapping_mul(131);
                while tickets.next().is_some() {
                    let q = &pool[i % pool.len()];
                    i += 1;
                    let started = Instant::now();
                    let outcome = system.query(q).await;
                    if let Ok(found) = outcome {
                        stats.returned(Operation::Search, found);
                    }
                    // Every pooled query has a match (its values came from a record).
                    stats.record(Operation::Search, started, outcome.map(|found| found > 0));
                    tickets.finished();
                }
                (system, stats)
            }
        },
    )
    .await;
    (op_of(&report, Operation::Search), report.elapsed_s)
}

fn op_of(report: &PhaseReport, op: Operation) -> OpReport {
    report.ops.get(op.name()).cloned().unwrap_or(OpReport {
        count: 0,
        errors: report.errors,
        not_found: 0,
        throughput: 0.0,
        mean_us: 0.0,
        p50_us: 0,
        p95_us: 0,
        p99_us: 0,
        p999_us: 0,
        max_us: 0,
        records_scanned: None,
        records_returned: Some(0),
    })
}

/// The model's count of every sampled query, and (for a dynamic space) the unispace regions
/// holding each one's matches, in one pass over the records.
fn model(
    plan: &DocPlan,
    records: &impl Fn(u64) -> Entry,
    samples: &BTreeMap<QueryKind, Vec<Query>>,
    regions: bool,
) -> (Vec<u64>, Vec<u64>) {
    let all: Vec<&Query> = samples.values().flatten().collect();
    let mut counts = vec![0u64; all.len()];
    let mut holding: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); all.len()];
    let tessellation = tessera_types::parse_space(&plan.dataset.dynamic_description())
        .ok()
        .map(|schema| {
            tessera_geometry::tessellations(&schema).swap_remove(tessera_types::UNISPACE.get())
        });
    for n in 0..plan.records {
        let e = records(n);
        let mut point = None;
        for (i, q) in all.iter().enumerate() {
            if q.matches(&e) {
                counts[i] += 1;
                if let (true, Some(t)) = (regions, &tessellation) {
                    let p = point.get_or_insert_with(|| {
                        tessera_geometry::unispace_point(DIMENSIONS, &to_document(&e))
                    });
                    holding[i].insert(t.region_of(p).0);
                }
            }
        }
    }
    (counts, holding.iter().map(|h| h.len() as u64).collect())
}

/// Runs every sampled query (the first `agreement_samples` of each kind) and compares.
async fn check_agreement(
    system: &System,
    plan: &DocPlan,
    samples: &BTreeMap<QueryKind, Vec<Query>>,
    expected: &[u64],
) -> Result<Vec<AgreementRow>, DocumentsError> {
    let mut rows = Vec::new();
    let mut wrong = Vec::new();
    let mut i = 0;
    for (kind, queries) in samples {
        for (j, q) in queries.iter().enumerate() {
            let want = expected[i];
            i += 1;
            if j >= plan.agreement_samples {
                continue;
            }
            let got = system.query(q).await?;
            if got != want {
                wrong.push(format!(
                    "{} [{}]: expected {want}, got {got}",
                    kind.name(),
                    q.describe()
                ));
            }
            rows.push(AgreementRow {
                kind: kind.name().to_owned(),
                query: q.describe(),
                expected: want,
                got,
            });
        }
    }
    if wrong.is_empty() {
        Ok(rows)
    } else {
        Err(DocumentsError::Disagreement {
            system: system.label().to_owned(),
            details: wrong.join("; "),
        })
    }
}

/// `explain` and the prediction over `queries` (Tessera only; `None` otherwise).
async fn explain(
    system: &System,
    queries: &[Query],
    holding: Option<&[u64]>,
) -> Result<Option<RegionsSummary>, DocumentsError> {
    let mut samples: Vec<RegionsSample> = Vec::new();
    for q in queries {
        match system.regions(q).await? {
            Some(s) => samples.push(s),
            None => return Ok(None),
        }
    }
    Ok(summarise(&samples, holding))
}

fn summarise(samples: &[RegionsSample], holding: Option<&[u64]>) -> Option<RegionsSummary> {
    let n = samples.len() as u64;
    if n == 0 {
        return None;
    }
    let mean = |f: fn(&RegionsSample) -> u64| samples.iter().map(f).sum::<u64>() as f64 / n as f64;
    Some(RegionsSummary {
        samples: n,
        subspace_regions: samples[0].subspace_regions,
        explained_mean: mean(|s| s.explained),
        explained_min: samples.iter().map(|s| s.explained).min().unwrap_or(0),
        explained_max: samples.iter().map(|s| s.explained).max().unwrap_or(0),
        predicted_mean: mean(|s| s.predicted),
        prediction_mismatches: samples
            .iter()
            .filter(|s| s.explained != s.predicted)
            .count() as u64,
        holding_matches_mean: holding
            .filter(|h| !h.is_empty())
            .map(|h| h.iter().sum::<u64>() as f64 / h.len() as f64),
        shapes_read_mean: mean(|s| s.shapes_read),
        shapes_known: samples[0].shapes_known,
    })
}

/// The systems a target URL names, one per task.
pub async fn systems(
    target: &DocTarget,
    kind: SpaceKind,
    dataset: Dataset,
    formula_dims: usize,
    threads: usize,
) -> Result<Vec<System>, TargetError> {
    match target {
        DocTarget::Tessera(addr) => {
            let client = Client::connect(addr)
                .await
                .map_err(crate::target::client_error)?;
            Ok(vec![
                System::tessera(client, kind, dataset, formula_dims);
                threads
            ])
        }
        #[cfg(feature = "peers")]
        DocTarget::Postgres(conn) => {
            let mut out = Vec::with_capacity(threads);
            for _ in 0..threads {
                let table = crate::target::postgres::Documents::connect(conn, dataset).await?;
                out.push(System::Postgres(std::sync::Arc::new(table)));
            }
            Ok(out)
        }
    }
}

/// Where the document workloads run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DocTarget {
    Tessera(String),
    #[cfg(feature = "peers")]
    Postgres(String),
}

/// Properties the bibliography can hold (for the report).
pub fn property_count() -> usize {
    PROPERTIES.len()
}
