//! `tessera bench`: the YCSB core workloads A–F against Tessera, Redis, PostgreSQL, etcd or
//! Cassandra, searches on secondary attributes against Tessera, PostgreSQL or Cassandra
//! ([`secondary`]), and three benchmarks of Tessera's own: `s` (a search fixing a whole
//! subspace, against a get), `subspaces` (write latency against the number of subspaces, i.e.
//! chain length: [`subspaces`]) and `search-fixed` (searches fixing 0–3 attributes of a
//! subspace: [`search_fixed`]); and
//! `advisor-eval`, the evaluation of the performance model and configurator on seed 000's hotel
//! workloads ([`advisor_eval`], [`hotels`]; docs/advisor.md).
//!
//! The `tessera` binary embeds [`BenchArgs`] as its `bench` subcommand, calls [`run`] and prints
//! the [`Report`] as JSON. Everything that decides *what* is requested — the key distributions
//! ([`generator`]), the workloads and records ([`workload`]) — is pure and seeded; the driver
//! ([`driver`]) and the targets ([`target`]) are the I/O shell.
//!
//! Scans follow HyperDex's YCSB port (seed 002 §6.2): each record carries its number split into
//! two int attributes, `prefix = n / 1000` and `suffix = n % 1000`, and a scan is a search fixing
//! `prefix` and bounding `suffix` — a search on secondary attributes, not on the key.
//!
//! ```no_run
//! use clap::Parser;
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     bench: tessera_bench::BenchArgs,
//! }
//!
//! # async fn demo() -> Result<(), tessera_bench::BenchError> {
//! let cli = Cli::parse_from(["bench", "--target", "redis://127.0.0.1:6379", "--workload", "c"]);
//! let report = tessera_bench::run(cli.bench).await?;
//! println!("{}", serde_json::to_string(&report).expect("reports serialise"));
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
// Without feature `peers` the systems enums of the search workloads have their Tessera variant
// only, so a `let System::Tessera(..) = ... else` is irrefutable there and not in a full build.
#![cfg_attr(not(feature = "peers"), allow(irrefutable_let_patterns))]

use std::io::IsTerminal;
use std::time::Duration;

pub mod advisor_eval;
pub mod advisor_shift;
pub mod bibliography;
pub mod docsys;
pub mod documents;
pub mod driver;
pub mod generator;
pub mod hotels;
pub mod plan;
pub mod report;
#[cfg(feature = "peers")]
pub mod resp;
pub mod search_fixed;
pub mod secondary;
pub mod subspaces;
pub mod sweep;
pub mod target;
pub mod twitter;
pub mod twitter_bench;
pub mod workload;

pub use report::{OpReport, PhaseReport};
pub use workload::Workload;

use driver::{run_phase, PhaseKind, PhasePlan};
#[cfg(feature = "peers")]
use target::cassandra::CqlTarget;
#[cfg(feature = "peers")]
use target::etcd::EtcdTarget;
use target::memory::MemoryTarget;
#[cfg(feature = "peers")]
use target::postgres::PostgresTarget;
#[cfg(feature = "peers")]
use target::redis::RedisTarget;
use target::tessera::TesseraTarget;
use target::{Inexpressible, Target, TargetError};

/// Which phases to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Phase {
    /// Insert records `0..records`.
    Load,
    /// Run `operations` operations over already loaded records.
    Run,
    /// Load, then run (the default).
    Both,
}

/// When to draw a progress bar on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// Only when stderr is a terminal, so logs and CI output stay clean.
    Auto,
    Always,
    Never,
}

/// `tessera bench` options (YCSB's property names in parentheses).
#[derive(Clone, Debug, clap::Args)]
pub struct BenchArgs {
    /// What to benchmark: `tessera://HOST:PORT`, `redis://HOST:PORT`,
    /// `postgres://USER@HOST:PORT/DB` (table `ycsb`, a B-tree index on `prefix, suffix`; YCSB
    /// a-f, s, secondary, documents and dblp), `etcd://HOST:PORT` (etcd v3, a key per field;
    /// YCSB a-f, e as a key-range read), `cql://HOST:PORT` (Cassandra: keyspace
    /// `tessera_bench`, table `usertable` with SAI indexes on `prefix` and `suffix`; YCSB a-f,
    /// s and secondary), or `memory://` (an in-process map: measures the driver's own
    /// overhead). The other stores only in a build with cargo feature `peers`, as `make
    /// bench-build` makes. A workload a system cannot express is refused before anything
    /// connects.
    /// Before a run of e or s is timed, a sample of its queries is checked against what the
    /// load wrote.
    #[arg(long, default_value = "tessera://127.0.0.1:1982")]
    pub target: String,

    /// YCSB core workload: a (50/50 read/update), b (95/5 read/update), c (read only),
    /// d (95/5 read/insert, latest), e (95/5 scan/insert), f (50/50 read/read-modify-write);
    /// s (not YCSB: 100% searches fixing both dimensions of the `prefix, suffix` subspace, zipfian
    /// as c, to compare with c's gets; Tessera, PostgreSQL, Cassandra and memory targets).
    /// Not YCSB, Tessera only, each in a space of its own: subspaces (load --records objects of
    /// ten int attributes into space `subspacesS`, which has --subspaces one-attribute
    /// subspaces, then --operations puts rewriting all ten, each moving the object in every
    /// subspace: chain length K(1+2S)); search-fixed (load --records objects into space `fixed`
    /// with subspace x, y, z, then --operations searches fixing --fixed of the three by
    /// equality, plus what `explain` says of that query shape); advisor-eval (the performance
    /// model against measurements on seed 000's hotel workloads, docs/advisor.md: for each
    /// workload, --records hotels loaded into a fresh space per configuration, runs of
    /// --duration-s seconds, 10 by default; make bench-advisor runs it in full).
    #[arg(long, short = 'w', value_enum, default_value_t = Workload::A)]
    pub workload: Workload,

    /// Records loaded, and assumed loaded by `--phase run` (recordcount).
    #[arg(long, default_value_t = 100_000)]
    pub records: u64,

    /// Workload subspaces: non-key subspaces S of its space (0 to 10), subspace i being the one
    /// attribute a{i}.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=10))]
    pub subspaces: u32,

    /// Workload search-fixed: how many of the subspace's attributes x, y, z (in that order)
    /// each search fixes by equality (0 to 3); the others are left open.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=3))]
    pub fixed: u32,

    /// Workloads subspaces and search-fixed: partitions of their space (`create P partitions`;
    /// 64 gives 64 regions per one-attribute subspace and 4 x 4 x 4 for x, y, z).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(2..))]
    pub partitions: u32,

    /// Operations in the run phase (operationcount).
    #[arg(long, default_value_t = 100_000)]
    pub operations: u64,

    /// Concurrent closed-loop clients (threadcount). Redis gets one connection each; Tessera
    /// shares one pipelined client among them.
    #[arg(long, short = 't', visible_alias = "connections", default_value_t = 8)]
    pub threads: usize,

    /// Which phases to run.
    #[arg(long, value_enum, default_value_t = Phase::Both)]
    pub phase: Phase,

    /// Seed of every random choice: the same seed replays the same requests per task.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Progress bar on stderr.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,

    /// Stop the run phase after this many seconds even if operations remain (maxexecutiontime).
    /// The load phase always completes, so a later run finds every record.
    #[arg(long)]
    pub duration_s: Option<f64>,

    /// YCSB run phase: issue OPS operations per second in all, spread evenly over time (YCSB's
    /// -target), instead of as fast as the tasks go. Each operation is timed from its turn, so
    /// a target that falls behind shows in the latencies. Use it to measure latency at a given
    /// load, e.g. half the throughput of an unpaced run.
    #[arg(long, value_name = "OPS")]
    pub rate: Option<f64>,

    #[command(flatten, next_help_heading = "Workload advisor-eval")]
    pub eval: advisor_eval::AdvisorEvalArgs,

    #[command(flatten, next_help_heading = "Workload advisor-shift")]
    pub shift: advisor_shift::AdvisorShiftArgs,

    #[command(flatten, next_help_heading = "Workloads documents and dblp")]
    pub docs: documents::DocArgs,

    #[command(flatten, next_help_heading = "Workload twitter")]
    pub twitter: twitter_bench::TwitterArgs,

    #[command(flatten, next_help_heading = "Workload plan")]
    pub plan: plan::PlanArgs,

    /// Workload secondary: the query every operation runs — eq1 (`city = C`, ~100 matches),
    /// eq2 (`city = C AND age = A`, ~1), range (`score` over 0.1 % of its values).
    #[arg(long, value_enum, default_value_t = secondary::QueryKind::Eq1)]
    pub query: secondary::QueryKind,

    /// Workload secondary: the subspaces of Tessera's space `people`, made by the load —
    /// grid (`city` and `age, score`) or per-index (`city`, `age` and `score`, one per
    /// PostgreSQL index).
    #[arg(long, value_enum, default_value_t = secondary::Subspaces::Grid)]
    pub people_subspaces: secondary::Subspaces,

    /// Workload secondary: the most seconds the load waits, at its end, for Tessera's re-cut
    /// driver to cut the int axes by the data (queries timed before would read equal slices of
    /// the 64-bit range, beside the re-cut's own work). It stops waiting once they are cut, or
    /// once no build has been under way for 30 s (the driver leaves balanced or small
    /// subspaces alone); still building after this long is an error. 0: no wait.
    #[arg(long, default_value_t = 600)]
    pub recut_wait_s: u64,

    /// YCSB on a Tessera cluster: which replica a get asks — any complete replica of the key's
    /// region, in turn (the client's default), or the key's point leader only.
    #[arg(long, value_enum, default_value_t = ReadFromChoice::Any)]
    pub read_from: ReadFromChoice,

    /// How YCSB's Tessera client connects: the global `--token` and `--tls-ca`.
    #[arg(skip)]
    pub client: tessera_client::ClientOptions,
}

/// `--read-from`: [`tessera_client::ReadFrom`] on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReadFromChoice {
    Any,
    Leader,
}

impl From<ReadFromChoice> for tessera_client::ReadFrom {
    fn from(choice: ReadFromChoice) -> Self {
        match choice {
            ReadFromChoice::Any => tessera_client::ReadFrom::AnyReplica,
            ReadFromChoice::Leader => tessera_client::ReadFrom::Leader,
        }
    }
}

/// The whole run, as `tessera bench` prints it (JSON): its parameters, then one section per
/// phase that ran, and the section of a workload that has one. Here rather than in `report`,
/// which the workloads' sections build on.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// The `--target` URL.
    pub target: String,
    pub workload: Workload,
    pub records: u64,
    pub operations: u64,
    pub threads: usize,
    pub seed: u64,
    /// Present when the load phase ran.
    pub load: Option<PhaseReport>,
    /// Present when the run phase ran.
    pub run: Option<PhaseReport>,
    /// Workload `subspaces` only: S, K, the chain length and where it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subspaces: Option<report::SubspacesReport>,
    /// Workload `search-fixed` only: F, objects returned, and servers and regions contacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_fixed: Option<report::SearchFixedReport>,
    /// Workload `advisor-eval` only: every workload's configurations, predicted and measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advisor_eval: Option<advisor_eval::AdvisorEvalReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advisor_shift: Option<advisor_shift::AdvisorShiftReport>,
    /// Workloads `documents` and `dblp`: the system, the agreement check, and every query
    /// kind timed (the load phase's writes are in `load`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documents: Option<documents::DocumentsReport>,
    /// Workload `twitter`: per operation, throughput, latency, servers and requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub twitter: Option<twitter_bench::TwitterReport>,
    /// Workload `secondary`: the query timed and the agreement check made before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secondary: Option<secondary::SecondaryReport>,
    /// Workload `plan`: per computed cluster, the configuration's size and the client's
    /// planning time per search.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<plan::PlanReport>,
}

/// Why a benchmark could not run. Failures of single operations are not errors: they are
/// counted in the report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The options are inconsistent (zero records or threads, a bad URL, a negative duration).
    #[error("invalid arguments: {0}")]
    InvalidArgs(String),
    /// The target could not be reached at start.
    #[error("cannot connect to {target}: {source}")]
    Connect {
        target: String,
        #[source]
        source: TargetError,
    },
    /// The target's preparation (creating the benchmark space) failed.
    #[error("cannot prepare {target}: {source}")]
    Prepare {
        target: String,
        #[source]
        source: TargetError,
    },
    /// The target kind exists but cannot be driven by this build.
    #[error("target not supported: {0}")]
    TargetUnsupported(String),
    /// The target's system cannot express the workload (etcd has no search on values):
    /// refused before anything connects.
    #[error("workload {workload} cannot run against {target}: {reason}")]
    WorkloadInexpressible {
        target: String,
        workload: Workload,
        reason: Inexpressible,
    },
    /// A system returned counts that differ from what was loaded (a document benchmark's
    /// model, or the records a YCSB load wrote).
    #[error("{0}")]
    Disagreement(String),
}

/// The target named by a `--target` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
/// The other stores exist with feature `peers` only: a build without it refuses their URLs
/// in [`parse_target`].
enum TargetKind {
    Tessera(String),
    Memory,
    #[cfg(feature = "peers")]
    Redis(String),
    /// A libpq connection URL (`postgres://USER@HOST:PORT/DB`).
    #[cfg(feature = "peers")]
    Postgres(String),
    /// An etcd member's client address, `HOST:PORT`.
    #[cfg(feature = "peers")]
    Etcd(String),
    /// A Cassandra node's CQL address, `HOST:PORT`.
    #[cfg(feature = "peers")]
    Cql(String),
}

/// The URL schemes of the other stores.
const PEER_SCHEMES: [&str; 5] = [
    "redis://",
    "postgres://",
    "postgresql://",
    "etcd://",
    "cql://",
];

/// Why `target` cannot express `workload`, if it cannot: decided before anything connects.
fn inexpressible(target: &TargetKind, workload: Workload) -> Option<Inexpressible> {
    match (target, workload) {
        #[cfg(feature = "peers")]
        (
            TargetKind::Etcd(_),
            Workload::S | Workload::Secondary | Workload::Documents | Workload::Dblp,
        ) => Some(Inexpressible::EtcdSearch),
        #[cfg(feature = "peers")]
        (TargetKind::Cql(_), Workload::Documents | Workload::Dblp) => {
            Some(Inexpressible::CqlDocuments)
        }
        _ => None,
    }
}

fn parse_target(url: &str) -> Result<TargetKind, BenchError> {
    if url.starts_with("tessera://") {
        target::tessera::parse_url(url)
            .map(TargetKind::Tessera)
            .map_err(BenchError::InvalidArgs)
    } else if url == "memory://" || url == "memory" {
        Ok(TargetKind::Memory)
    } else if PEER_SCHEMES.iter().any(|scheme| url.starts_with(scheme)) {
        parse_peer(url)
    } else {
        Err(BenchError::InvalidArgs(format!(
            "unknown target {url:?}: expected tessera://HOST:PORT, redis://HOST:PORT, postgres://…, etcd://HOST:PORT, cql://HOST:PORT or memory://"
        )))
    }
}

/// Parses a URL of one of [`PEER_SCHEMES`], each by its own target's parser (PostgreSQL's by
/// the driver's, so a bad URL fails before any work).
#[cfg(feature = "peers")]
fn parse_peer(url: &str) -> Result<TargetKind, BenchError> {
    let kind = if url.starts_with("redis://") {
        target::redis::parse_url(url).map(TargetKind::Redis)
    } else if url.starts_with("etcd://") {
        target::etcd::parse_url(url).map(TargetKind::Etcd)
    } else if url.starts_with("cql://") {
        target::cassandra::parse_url(url).map(TargetKind::Cql)
    } else {
        url.parse::<tokio_postgres::Config>()
            .map(|_| TargetKind::Postgres(url.to_owned()))
            .map_err(|e| format!("{url:?}: {e}"))
    };
    kind.map_err(BenchError::InvalidArgs)
}

/// A build without the other stores' clients refuses their URLs, saying how to get one with.
#[cfg(not(feature = "peers"))]
fn parse_peer(url: &str) -> Result<TargetKind, BenchError> {
    Err(BenchError::TargetUnsupported(format!(
        "{url}: this build has no clients for other stores; build `tessera` with `--features peers` (`make bench-build` does; it needs protoc)"
    )))
}

/// Runs the benchmark `args` describes and returns what it measured.
pub async fn run(args: BenchArgs) -> Result<Report, BenchError> {
    if args.records == 0 {
        return Err(BenchError::InvalidArgs(
            "--records must be at least 1".into(),
        ));
    }
    if args.threads == 0 {
        return Err(BenchError::InvalidArgs(
            "--threads must be at least 1".into(),
        ));
    }
    let duration = match args.duration_s {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => {
            return Err(BenchError::InvalidArgs(format!(
                "--duration-s {s} is not a positive number"
            )))
        }
    };
    if let Some(rate) = args.rate {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(BenchError::InvalidArgs(format!(
                "--rate {rate} is not a positive number of operations per second"
            )));
        }
        if !args.workload.is_ycsb() {
            return Err(BenchError::InvalidArgs(format!(
                "--rate paces the YCSB workloads (a-f, s) only, not {}",
                args.workload
            )));
        }
    }
    let connect_error = |source: TargetError| match source {
        TargetError::Unsupported(why) => BenchError::TargetUnsupported(why),
        source => BenchError::Connect {
            target: args.target.clone(),
            source,
        },
    };
    if args.workload == Workload::Plan {
        // Computed clusters only: no target is contacted.
        let report = plan::run(&args.plan, args.operations, args.seed)
            .map_err(|plan::PlanError::InvalidArgs(why)| BenchError::InvalidArgs(why))?;
        return Ok(Report {
            plan: Some(report),
            ..report_of(&args)
        });
    }
    let target = parse_target(&args.target)?;
    if let Some(reason) = inexpressible(&target, args.workload) {
        return Err(BenchError::WorkloadInexpressible {
            target: args.target.clone(),
            workload: args.workload,
            reason,
        });
    }
    if matches!(args.workload, Workload::Documents | Workload::Dblp) {
        return run_documents(target, args).await;
    }
    if args.workload == Workload::Twitter {
        return run_twitter(target, args, duration).await;
    }
    if args.workload == Workload::Secondary {
        return run_secondary(target, args, duration).await;
    }
    #[cfg(feature = "peers")]
    if matches!(target, TargetKind::Postgres(_)) && !args.workload.is_ycsb() {
        return Err(BenchError::TargetUnsupported(format!(
            "workload {} does not run against PostgreSQL: YCSB a-f, s, documents and dblp do",
            args.workload
        )));
    }
    if !args.workload.is_ycsb() {
        return run_sweep(target, args, duration).await;
    }
    let (load, run) = match target {
        #[cfg(feature = "peers")]
        TargetKind::Postgres(url) => {
            // One connection per task, as for Redis: PostgreSQL runs one connection's
            // statements one at a time. Connected one after another (the first creates the
            // table).
            let mut targets = Vec::with_capacity(args.threads);
            for _ in 0..args.threads {
                targets.push(PostgresTarget::connect(&url).await.map_err(connect_error)?);
            }
            drive(targets, &args, duration).await?
        }
        TargetKind::Memory => {
            let shared = MemoryTarget::new();
            drive(vec![shared; args.threads], &args, duration).await?
        }
        #[cfg(feature = "peers")]
        TargetKind::Redis(_) if args.workload == Workload::S => {
            return Err(BenchError::TargetUnsupported(
                "workload s (search-read) needs searches on secondary attributes: run it against tessera:// and compare with workload c there".into(),
            ));
        }
        #[cfg(feature = "peers")]
        TargetKind::Redis(addr) => {
            // One connection per task: Redis answers one connection's commands in order, so
            // concurrency comes from connections.
            let mut targets = Vec::with_capacity(args.threads);
            for _ in 0..args.threads {
                targets.push(RedisTarget::connect(&addr).await.map_err(connect_error)?);
            }
            drive(targets, &args, duration).await?
        }
        TargetKind::Tessera(addr) => {
            // One pipelined client shared by every task: concurrency comes from requests in
            // flight on one connection.
            let options = args.client.clone().with_read_from(args.read_from.into());
            let client = TesseraTarget::connect(&addr, options)
                .await
                .map_err(connect_error)?;
            drive(vec![client; args.threads], &args, duration).await?
        }
        #[cfg(feature = "peers")]
        TargetKind::Etcd(addr) => {
            // One gRPC client shared by every task: its requests are multiplexed on one
            // HTTP/2 connection.
            let client = EtcdTarget::connect(&addr).await.map_err(connect_error)?;
            drive(vec![client; args.threads], &args, duration).await?
        }
        #[cfg(feature = "peers")]
        TargetKind::Cql(addr) => {
            // One session shared by every task: the driver multiplexes their requests.
            let session = target::cassandra::connect(&addr)
                .await
                .map_err(connect_error)?;
            let client = CqlTarget::connect(session).await.map_err(connect_error)?;
            drive(vec![client; args.threads], &args, duration).await?
        }
    };
    Ok(Report {
        load,
        run,
        ..report_of(&args)
    })
}

/// A report of what `args` asks for, with nothing measured yet.
fn report_of(args: &BenchArgs) -> Report {
    Report {
        target: args.target.clone(),
        workload: args.workload,
        records: args.records,
        operations: args.operations,
        threads: args.threads,
        seed: args.seed,
        load: None,
        run: None,
        subspaces: None,
        search_fixed: None,
        advisor_eval: None,
        advisor_shift: None,
        documents: None,
        twitter: None,
        secondary: None,
        plan: None,
    }
}

/// Workload `secondary` ([`secondary`]): against Tessera (one shared pipelined client) or
/// PostgreSQL (a connection per task).
async fn run_secondary(
    target: TargetKind,
    args: BenchArgs,
    duration: Option<Duration>,
) -> Result<Report, BenchError> {
    let connect_error = |source| BenchError::Connect {
        target: args.target.clone(),
        source,
    };
    let systems = match &target {
        TargetKind::Tessera(addr) => {
            let first = secondary::System::tessera(addr).await.map_err(connect_error)?;
            let secondary::System::Tessera(client) = &first else {
                unreachable!("made above")
            };
            let client = client.clone();
            let mut systems = vec![first];
            systems.extend((1..args.threads).map(|_| secondary::System::Tessera(client.clone())));
            systems
        }
        #[cfg(feature = "peers")]
        TargetKind::Postgres(url) => {
            let mut systems = Vec::with_capacity(args.threads);
            for _ in 0..args.threads {
                let people = target::postgres::People::connect(url)
                    .await
                    .map_err(connect_error)?;
                systems.push(secondary::System::Postgres(Box::new(people)));
            }
            systems
        }
        #[cfg(feature = "peers")]
        TargetKind::Cql(addr) => {
            let session = target::cassandra::connect(addr)
                .await
                .map_err(connect_error)?;
            let people = std::sync::Arc::new(
                target::cassandra::People::connect(session)
                    .await
                    .map_err(connect_error)?,
            );
            (0..args.threads)
                .map(|_| secondary::System::Cassandra(people.clone()))
                .collect()
        }
        // etcd was refused before this (`inexpressible`), with its reason.
        _ => {
            return Err(BenchError::TargetUnsupported(
                "workload secondary searches secondary attributes: run it against tessera://, postgres:// or cql://".into(),
            ))
        }
    };
    let plan = secondary::Plan {
        kind: args.query,
        subspaces: args.people_subspaces,
        recut_wait: Duration::from_secs(args.recut_wait_s),
        load: matches!(args.phase, Phase::Load | Phase::Both),
        run: matches!(args.phase, Phase::Run | Phase::Both),
        records: args.records,
        operations: args.operations,
        seed: args.seed,
        duration,
        progress: show_progress(args.progress),
    };
    let (load, run, extra) = secondary::run(systems, plan).await.map_err(|e| match e {
        secondary::SecondaryError::Disagreement(why) => {
            BenchError::Disagreement(format!("{}: {why}", args.target))
        }
        secondary::SecondaryError::Target(source) => BenchError::Prepare {
            target: args.target.clone(),
            source,
        },
    })?;
    Ok(Report {
        load,
        run,
        secondary: Some(extra),
        ..report_of(&args)
    })
}

/// Workload `twitter` ([`twitter_bench`]): against a Tessera server or cluster, or routed over
/// a computed cluster (`--twitter-route-servers`).
async fn run_twitter(
    target: TargetKind,
    args: BenchArgs,
    duration: Option<Duration>,
) -> Result<Report, BenchError> {
    let fail = |e: twitter_bench::TwitterError| match e {
        twitter_bench::TwitterError::InvalidArgs(why) => BenchError::InvalidArgs(why),
        e => BenchError::Prepare {
            target: args.target.clone(),
            source: TargetError::Server(e.to_string()),
        },
    };
    let t = &args.twitter;
    if t.route_servers > 0 {
        let report =
            twitter_bench::route_only(t, args.records, args.operations, args.seed).map_err(fail)?;
        return Ok(Report {
            twitter: Some(report),
            ..report_of(&args)
        });
    }
    let TargetKind::Tessera(addr) = target else {
        return Err(BenchError::TargetUnsupported(
            "workload twitter runs against tessera:// (or --twitter-route-servers N)".into(),
        ));
    };
    let (report, load_s) = twitter_bench::run_live(
        &addr,
        t,
        args.records,
        args.operations,
        args.threads,
        args.seed,
        duration,
    )
    .await
    .map_err(fail)?;
    let mut out = report_of(&args);
    out.twitter = Some(report);
    if load_s > 0.0 {
        eprintln!("twitter: loaded in {load_s:.1} s");
    }
    Ok(out)
}

/// Workloads `documents` and `dblp` ([`documents`]): Tessera (dynamic or typed space) or
/// PostgreSQL.
async fn run_documents(target: TargetKind, args: BenchArgs) -> Result<Report, BenchError> {
    let doc_target = match target {
        TargetKind::Tessera(addr) => documents::DocTarget::Tessera(addr),
        #[cfg(feature = "peers")]
        TargetKind::Postgres(url) => documents::DocTarget::Postgres(url),
        // etcd and Cassandra were refused before this (`inexpressible`), with their reasons.
        _ => {
            return Err(BenchError::TargetUnsupported(format!(
                "workload {} runs against tessera:// or postgres://",
                args.workload
            )))
        }
    };
    let d = &args.docs;
    if !(d.query_duration_s.is_finite() && d.query_duration_s > 0.0) {
        return Err(BenchError::InvalidArgs(format!(
            "--query-duration-s {} is not a positive number",
            d.query_duration_s
        )));
    }
    let (dataset, records) = match args.workload {
        Workload::Dblp => (docsys::Dataset::Dblp, d.entries),
        _ => (docsys::Dataset::Micro, args.records),
    };
    if records == 0 {
        return Err(BenchError::InvalidArgs("no records to load".into()));
    }
    let systems = documents::systems(
        &doc_target,
        d.doc_space,
        dataset,
        usize::from(d.formula_dims),
        args.threads,
    )
    .await
    .map_err(|source| BenchError::Connect {
        target: args.target.clone(),
        source,
    })?;
    let plan = documents::DocPlan {
        dataset,
        load: matches!(args.phase, Phase::Load | Phase::Both),
        run: matches!(args.phase, Phase::Run | Phase::Both),
        records,
        operations: args.operations,
        threads: args.threads,
        seed: args.seed,
        query_duration: Duration::from_secs_f64(d.query_duration_s),
        agreement_samples: d.agreement_samples,
        explain_samples: d.explain_samples,
        progress: show_progress(args.progress),
    };
    let (load, report) = documents::run(systems, plan).await.map_err(|e| match e {
        documents::DocumentsError::Disagreement { .. } => BenchError::Disagreement(e.to_string()),
        documents::DocumentsError::InvalidArgs(why) => BenchError::InvalidArgs(why),
        documents::DocumentsError::Target(source) => BenchError::Prepare {
            target: args.target.clone(),
            source,
        },
    })?;
    Ok(Report {
        load,
        documents: Some(report),
        records,
        ..report_of(&args)
    })
}

/// Workloads `subspaces` and `search-fixed` ([`sweep`]): Tessera only.
async fn run_sweep(
    target: TargetKind,
    args: BenchArgs,
    duration: Option<Duration>,
) -> Result<Report, BenchError> {
    let TargetKind::Tessera(addr) = target else {
        return Err(BenchError::TargetUnsupported(format!(
            "workload {} creates its own Tessera space: run it against tessera://",
            args.workload
        )));
    };
    if args.workload == Workload::AdvisorEval {
        return run_advisor_eval(addr, args, duration).await;
    }
    if args.workload == Workload::AdvisorShift {
        return run_advisor_shift(addr, args).await;
    }
    let subspaces_plan = subspaces::SubspacesPlan::new(args.subspaces, args.partitions)
        .map_err(BenchError::InvalidArgs)?;
    let search_plan = search_fixed::SearchFixedPlan::new(args.fixed, args.partitions)
        .map_err(BenchError::InvalidArgs)?;
    let client = tessera_client::Client::connect(&addr)
        .await
        .map_err(|e| BenchError::Connect {
            target: args.target.clone(),
            source: target::client_error(e),
        })?;
    let phases = sweep::Phases {
        load: matches!(args.phase, Phase::Load | Phase::Both),
        run: matches!(args.phase, Phase::Run | Phase::Both),
        records: args.records,
        operations: args.operations,
        threads: args.threads,
        seed: args.seed,
        duration,
        progress: show_progress(args.progress),
    };
    let prepare_error = |source| BenchError::Prepare {
        target: args.target.clone(),
        source,
    };
    let mut report = report_of(&args);
    if args.workload == Workload::Subspaces {
        let (load, run, extra) = sweep::run_subspaces(client, subspaces_plan, phases)
            .await
            .map_err(prepare_error)?;
        (report.load, report.run, report.subspaces) = (load, run, Some(extra));
    } else {
        let (load, run, extra) = sweep::run_search_fixed(client, search_plan, phases)
            .await
            .map_err(prepare_error)?;
        (report.load, report.run, report.search_fixed) = (load, run, Some(extra));
    }
    Ok(report)
}

/// Workload `advisor-eval` ([`advisor_eval`]): plans every workload (pure, so bad options fail
/// before anything is created), then measures.
async fn run_advisor_eval(
    addr: String,
    args: BenchArgs,
    duration: Option<Duration>,
) -> Result<Report, BenchError> {
    let eval = &args.eval;
    let workloads = if eval.eval_workloads.is_empty() {
        // The step-by-step scenarios, then the nine (seed 000 §4.5, then §5.2).
        let mut all = hotels::HotelWorkload::micro();
        all.extend(hotels::HotelWorkload::all());
        all
    } else {
        eval.eval_workloads
            .iter()
            .map(|name| {
                hotels::HotelWorkload::from_name(name)
                    .filter(|w| w.family != hotels::Family::D)
                    .ok_or_else(|| {
                    BenchError::InvalidArgs(format!(
                        "--eval-workloads: no workload {name:?} (A-RH, A-BAL, A-WH, B-RH, B-BAL, B-WH, C-RH, C-BAL, C-WH; micro-scenarios A-S, A-M, B-S, B-M)"
                    ))
                })
            })
            .collect::<Result<_, _>>()?
    };
    if !(eval.warmup_s.is_finite() && eval.warmup_s >= 0.0) {
        return Err(BenchError::InvalidArgs(format!(
            "--warmup-s {} is not a number of seconds",
            eval.warmup_s
        )));
    }
    let (calibration, calibration_source) = calibration_of(eval)?;
    let options = advisor_eval::EvalOptions {
        hotels: args.records,
        partitions: args.partitions,
        clients: u32::try_from(args.threads).unwrap_or(u32::MAX),
        seed: args.seed,
        workloads,
        calibration,
        top: eval.sample_top,
        random: eval.sample_random,
    };
    let (census, planned) = advisor_eval::plan(&options).map_err(BenchError::InvalidArgs)?;
    let settings = advisor_eval::Measure {
        addr,
        threads: args.threads,
        duration: duration.unwrap_or(Duration::from_secs_f64(advisor_eval::DURATION_S_DEFAULT)),
        warmup: Duration::from_secs_f64(eval.warmup_s),
        repetitions: eval.repetitions,
        progress: args.progress != ProgressMode::Never,
    };
    let report = advisor_eval::measure(settings, &options, calibration_source, census, planned)
        .await
        .map_err(|source| BenchError::Prepare {
            target: args.target.clone(),
            source,
        })?;
    Ok(Report {
        advisor_eval: Some(report),
        ..report_of(&args)
    })
}

/// The constants `--calibration` names (checked), or the defaults; and where they came from.
fn calibration_of(
    eval: &advisor_eval::AdvisorEvalArgs,
) -> Result<(tessera_advisor::Calibration, String), BenchError> {
    Ok(match &eval.calibration {
        None => (
            tessera_advisor::Calibration::default(),
            "default".to_owned(),
        ),
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                BenchError::InvalidArgs(format!("--calibration {}: {e}", path.display()))
            })?;
            let c: tessera_advisor::Calibration = serde_json::from_str(&text).map_err(|e| {
                BenchError::InvalidArgs(format!("--calibration {}: {e}", path.display()))
            })?;
            c.check().map_err(|e| {
                BenchError::InvalidArgs(format!("--calibration {}: {e}", path.display()))
            })?;
            (c, path.display().to_string())
        }
    })
}

/// Workload `advisor-shift` ([`advisor_shift`]).
async fn run_advisor_shift(addr: String, args: BenchArgs) -> Result<Report, BenchError> {
    let shift = &args.shift;
    let workload = |flag: &str, name: &str| {
        hotels::HotelWorkload::from_name(name).ok_or_else(|| {
            BenchError::InvalidArgs(format!(
                "{flag}: no workload {name:?} (A-RH … C-WH, D-RH, D-BAL, D-WH)"
            ))
        })
    };
    let seconds = |flag: &str, s: f64| {
        if s.is_finite() && s > 0.0 {
            Ok(Duration::from_secs_f64(s))
        } else {
            Err(BenchError::InvalidArgs(format!(
                "{flag} {s} is not a positive number of seconds"
            )))
        }
    };
    let (calibration, _) = calibration_of(&args.eval)?;
    let options = advisor_shift::ShiftOptions {
        hotels: args.records,
        partitions: args.partitions,
        seed: args.seed,
        from: workload("--shift-from", &shift.shift_from)?,
        to: workload("--shift-to", &shift.shift_to)?,
        before: seconds("--shift-before-s", shift.shift_before_s)?,
        after: seconds("--shift-after-s", shift.shift_after_s)?,
        reference: seconds("--shift-reference-s", shift.shift_reference_s)?,
        calibration,
    };
    let settings = advisor_eval::Measure {
        addr,
        threads: args.threads,
        duration: options.reference,
        warmup: Duration::from_secs_f64(args.eval.warmup_s.max(0.0)),
        repetitions: 1,
        progress: args.progress != ProgressMode::Never,
    };
    let report = advisor_shift::measure(settings, &options)
        .await
        .map_err(|source| BenchError::Prepare {
            target: args.target.clone(),
            source,
        })?;
    Ok(Report {
        advisor_shift: Some(report),
        ..report_of(&args)
    })
}

fn show_progress(mode: ProgressMode) -> bool {
    match mode {
        ProgressMode::Always => true,
        ProgressMode::Never => false,
        ProgressMode::Auto => std::io::stderr().is_terminal(),
    }
}

/// Runs the requested phases over `targets` (one per task).
async fn drive<T: Target>(
    mut targets: Vec<T>,
    args: &BenchArgs,
    duration: Option<Duration>,
) -> Result<(Option<PhaseReport>, Option<PhaseReport>), BenchError> {
    let progress = show_progress(args.progress);
    let plan = |kind, duration| PhasePlan {
        kind,
        spec: args.workload.spec(),
        records: args.records,
        operations: args.operations,
        seed: args.seed,
        duration,
        rate: args.rate,
        progress,
    };
    let mut load = None;
    if matches!(args.phase, Phase::Load | Phase::Both) {
        if let Some(first) = targets.first_mut() {
            first
                .prepare()
                .await
                .map_err(|source| BenchError::Prepare {
                    target: args.target.clone(),
                    source,
                })?;
        }
        let (back, report) = run_phase(targets, plan(PhaseKind::Load, None)).await;
        targets = back;
        load = Some(report);
    }
    let mut run = None;
    if matches!(args.phase, Phase::Run | Phase::Both) {
        // Only right after this invocation's load is what the target holds known exactly.
        if let (Phase::Both, Some(first)) = (args.phase, targets.first_mut()) {
            check_agreement(first, args).await?;
        }
        let (_, report) = run_phase(targets, plan(PhaseKind::Run, duration)).await;
        run = Some(report);
    }
    Ok((load, run))
}

/// Queries checked before a run is timed ([`check_agreement`]).
const AGREEMENT_SAMPLES: u64 = 32;

/// Before a run of workload E or S is timed, a sample of its queries against what the load
/// just wrote (records `0..records`): each scan must find exactly the loaded records in its
/// bounds (`workload::scan_bounds`), each search its one record. So every target's timed
/// queries are known to return the same results, whatever system answers them.
async fn check_agreement<T: Target>(target: &mut T, args: &BenchArgs) -> Result<(), BenchError> {
    use rand::{Rng, SeedableRng};
    if !matches!(args.workload, Workload::E | Workload::S) {
        return Ok(());
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed ^ 0xA9EE_0000_0000_0001);
    let failed = |source| BenchError::Prepare {
        target: args.target.clone(),
        source,
    };
    for _ in 0..AGREEMENT_SAMPLES {
        let n = rng.random_range(0..args.records);
        let (query, found, expected) = if args.workload == Workload::S {
            let found = target.search(n).await.map_err(failed)?;
            (format!("search of record {n}"), found, 1)
        } else {
            let len = rng.random_range(1..=workload::MAX_SCAN_LENGTH);
            let (prefix, _, hi) = workload::scan_bounds(n, len);
            let last =
                (prefix as u64 * workload::SCAN_GROUP_SIZE + hi as u64).min(args.records - 1);
            let found = target.scan(n, len).await.map_err(failed)?;
            (
                format!("scan of {len} from record {n}"),
                found,
                last - n + 1,
            )
        };
        if found != expected {
            return Err(BenchError::Disagreement(format!(
                "{}: the {query} found {found} records, the load wrote {expected} there",
                args.target
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn args(extra: &[&str]) -> BenchArgs {
        let mut argv = vec!["bench", "--progress", "never"];
        argv.extend_from_slice(extra);
        Cli::parse_from(argv).bench
    }

    #[test]
    fn cli_definition_is_valid_and_defaults_match_the_docs() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let a = Cli::parse_from(["bench"]).bench;
        assert_eq!(a.target, "tessera://127.0.0.1:1982");
        assert_eq!(a.workload, Workload::A);
        assert_eq!(a.phase, Phase::Both);
        assert_eq!(a.progress, ProgressMode::Auto);
        let b = Cli::parse_from([
            "bench",
            "--connections",
            "3",
            "-w",
            "e",
            "--duration-s",
            "1.5",
        ])
        .bench;
        assert_eq!(
            (b.threads, b.workload, b.duration_s),
            (3, Workload::E, Some(1.5))
        );
    }

    #[test]
    fn subspaces_and_search_fixed_flags() {
        use clap::CommandFactory;
        let a = Cli::parse_from(["bench", "-w", "subspaces", "--subspaces", "0"]).bench;
        assert_eq!(
            (a.workload, a.subspaces, a.partitions),
            (Workload::Subspaces, 0, 64)
        );
        let b = Cli::parse_from([
            "bench",
            "-w",
            "search-fixed",
            "--fixed",
            "2",
            "--partitions",
            "27",
        ])
        .bench;
        assert_eq!(
            (b.workload, b.fixed, b.partitions),
            (Workload::SearchFixed, 2, 27)
        );
        assert_eq!(
            (b.subspaces, Cli::parse_from(["bench"]).bench.fixed),
            (10, 3),
            "documented defaults"
        );
        for bad in [
            &["--subspaces", "11"][..],
            &["--fixed", "4"],
            &["--partitions", "1"],
            &["-w", "searchfixed"],
        ] {
            let mut argv = vec!["bench"];
            argv.extend_from_slice(bad);
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?} is refused");
        }
        let help = Cli::command().render_long_help().to_string();
        for flag in [
            "--subspaces",
            "--fixed",
            "--partitions",
            "search-fixed",
            "subspaces",
        ] {
            assert!(help.contains(flag), "--help mentions {flag}");
        }
        assert_eq!(Workload::SearchFixed.to_string(), "search-fixed");
        assert_eq!(
            serde_json::to_value(Workload::SearchFixed).unwrap(),
            "search-fixed"
        );
        assert!(Workload::E.is_ycsb() && Workload::S.is_ycsb() && !Workload::Subspaces.is_ycsb());
    }

    #[tokio::test]
    async fn subspaces_and_search_fixed_need_tessera() {
        for w in ["subspaces", "search-fixed", "advisor-eval"] {
            // Redis only where this build has it (a build without refuses it sooner).
            let peer = cfg!(feature = "peers").then_some("redis://127.0.0.1:1");
            for target in ["memory://"].into_iter().chain(peer) {
                let r = run(args(&["--target", target, "-w", w])).await;
                assert!(
                    matches!(&r, Err(BenchError::TargetUnsupported(why)) if why.contains(w)),
                    "{w} {target}: {r:?}"
                );
            }
        }
    }

    #[test]
    fn target_urls() {
        assert_eq!(
            parse_target("tessera://h").ok(),
            Some(TargetKind::Tessera("h:1982".into()))
        );
        assert_eq!(parse_target("memory://").ok(), Some(TargetKind::Memory));
        assert!(matches!(
            parse_target("http://h"),
            Err(BenchError::InvalidArgs(_))
        ));
    }

    #[cfg(feature = "peers")]
    #[test]
    fn peer_urls() {
        assert_eq!(
            parse_target("redis://h:1").ok(),
            Some(TargetKind::Redis("h:1".into()))
        );
        assert_eq!(
            parse_target("etcd://127.0.0.1:2379").ok(),
            Some(TargetKind::Etcd("127.0.0.1:2379".into()))
        );
        assert_eq!(
            parse_target("cql://h").ok(),
            Some(TargetKind::Cql("h:9042".into()))
        );
        assert!(matches!(
            parse_target("postgres://u@h:1/db").ok(),
            Some(TargetKind::Postgres(_))
        ));
        assert!(matches!(
            parse_target("etcd://h:x"),
            Err(BenchError::InvalidArgs(_))
        ));
    }

    /// A build without the peers' clients refuses every peer URL, whatever the workload, and
    /// says how to get one with them.
    #[cfg(not(feature = "peers"))]
    #[tokio::test]
    async fn a_build_without_peers_refuses_their_urls() {
        for target in PEER_SCHEMES.map(|scheme| format!("{scheme}u@127.0.0.1:1/db")) {
            for w in ["c", "secondary", "documents"] {
                match run(args(&["--target", &target, "-w", w])).await {
                    Err(BenchError::TargetUnsupported(why)) => {
                        assert!(why.contains("--features peers"), "{why}")
                    }
                    r => panic!("{target} -w {w}: {r:?}"),
                }
            }
        }
    }

    /// What etcd and Cassandra cannot express is refused with its reason before anything
    /// connects (port 1: nothing listens, so reaching connect would be a Connect error).
    #[cfg(feature = "peers")]
    #[tokio::test]
    async fn inexpressible_workloads_are_refused_before_connecting() {
        for (target, workload, reason) in [
            ("etcd://127.0.0.1:1", "s", Inexpressible::EtcdSearch),
            ("etcd://127.0.0.1:1", "secondary", Inexpressible::EtcdSearch),
            ("etcd://127.0.0.1:1", "documents", Inexpressible::EtcdSearch),
            ("etcd://127.0.0.1:1", "dblp", Inexpressible::EtcdSearch),
            (
                "cql://127.0.0.1:1",
                "documents",
                Inexpressible::CqlDocuments,
            ),
            ("cql://127.0.0.1:1", "dblp", Inexpressible::CqlDocuments),
        ] {
            let r = run(args(&["--target", target, "-w", workload])).await;
            match &r {
                Err(BenchError::WorkloadInexpressible {
                    workload: w,
                    reason: why,
                    ..
                }) => {
                    assert_eq!((w.to_string().as_str(), *why), (workload, reason));
                    let message = r.as_ref().unwrap_err().to_string();
                    assert!(
                        message.contains(&format!("workload {workload}")),
                        "{message}"
                    );
                }
                other => panic!("{target} -w {workload}: {other:?}"),
            }
        }
        for target in ["etcd://127.0.0.1:1", "cql://127.0.0.1:1"] {
            for w in ["subspaces", "twitter"] {
                let r = run(args(&["--target", target, "-w", w])).await;
                assert!(
                    matches!(&r, Err(BenchError::TargetUnsupported(_))),
                    "{target} -w {w}: {r:?}"
                );
            }
            let r = run(args(&["--target", target, "-w", "c", "--records", "10"])).await;
            assert!(matches!(r, Err(BenchError::Connect { .. })), "{r:?}");
        }
    }

    #[tokio::test]
    async fn every_workload_runs_on_the_memory_target() {
        for w in ["a", "b", "c", "d", "e", "f", "s"] {
            let report = run(args(&[
                "--target",
                "memory://",
                "-w",
                w,
                "--records",
                "2000",
                "--operations",
                "3000",
                "-t",
                "4",
            ]))
            .await
            .expect("memory benchmark runs");
            let load = report.load.as_ref().expect("load ran");
            assert_eq!(load.operations, 2000);
            assert_eq!(load.errors, 0);
            let run = report.run.as_ref().expect("run ran");
            assert_eq!(run.operations + run.errors, 3000, "workload {w}");
            assert_eq!(run.errors, 0, "workload {w}: {run:?}");
            assert!(!run.stopped_by_duration);
            let names: Vec<&str> = run.ops.keys().map(|s| s.as_str()).collect();
            let expected: &[&str] = match w {
                "a" | "b" => &["read", "update"],
                "c" => &["read"],
                "d" => &["insert", "read"],
                "e" => &["insert", "scan"],
                "s" => &["search"],
                _ => &["read", "read_modify_write"],
            };
            assert_eq!(names, expected, "workload {w}");
            if w == "e" {
                let scan = &run.ops["scan"];
                // Scans average ~50 records when the prefix group has room.
                assert!(
                    scan.records_scanned.unwrap_or(0) > scan.count * 10,
                    "{scan:?}"
                );
            }
            let json = serde_json::to_value(&report).expect("serialises");
            assert!(json["run"]["ops"]["read"]["p999_us"].is_u64() || w == "e" || w == "s");
            assert!(json["run"]["overall_throughput"].is_f64());
        }
    }

    /// A system that loses every odd record: its scans and searches disagree with the load,
    /// and the run is refused before anything is timed.
    #[tokio::test]
    async fn queries_that_disagree_with_the_load_are_refused_before_timing() {
        struct LosesOdd(MemoryTarget);
        impl Target for LosesOdd {
            async fn prepare(&mut self) -> Result<(), TargetError> {
                Ok(())
            }
            async fn insert(&mut self, n: u64, r: &workload::Record) -> Result<(), TargetError> {
                if n.is_multiple_of(2) {
                    self.0.insert(n, r).await?;
                }
                Ok(())
            }
            async fn read(&mut self, n: u64) -> Result<bool, TargetError> {
                self.0.read(n).await
            }
            async fn update(&mut self, n: u64, f: usize, v: &str) -> Result<(), TargetError> {
                self.0.update(n, f, v).await
            }
            async fn scan(&mut self, n: u64, len: u64) -> Result<u64, TargetError> {
                self.0.scan(n, len).await
            }
            async fn search(&mut self, n: u64) -> Result<u64, TargetError> {
                self.0.search(n).await
            }
        }
        for w in ["e", "s"] {
            let args = args(&["--target", "memory://", "-w", w, "--records", "500"]);
            let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1);
            let (mut honest, mut lossy) = (MemoryTarget::new(), LosesOdd(MemoryTarget::new()));
            for n in 0..500 {
                let record = workload::Record::random(&mut rng);
                honest.insert(n, &record).await.unwrap();
                lossy.insert(n, &record).await.unwrap();
            }
            check_agreement(&mut honest, &args)
                .await
                .expect("the honest target agrees");
            assert!(matches!(
                check_agreement(&mut lossy, &args).await,
                Err(BenchError::Disagreement(_))
            ));
        }
    }

    #[tokio::test]
    async fn duration_caps_the_run_phase() {
        let report = run(args(&[
            "--target",
            "memory://",
            "--records",
            "100",
            "--operations",
            "1000000000",
            "--duration-s",
            "0.3",
        ]))
        .await
        .expect("runs");
        let run = report.run.expect("run ran");
        assert!(run.stopped_by_duration);
        assert!(run.elapsed_s < 5.0, "{}", run.elapsed_s);
    }

    #[tokio::test]
    async fn bad_arguments_are_refused() {
        assert!(matches!(
            run(args(&["--target", "memory://", "--records", "0"])).await,
            Err(BenchError::InvalidArgs(_))
        ));
        assert!(matches!(
            run(args(&["--target", "memory://", "-t", "0"])).await,
            Err(BenchError::InvalidArgs(_))
        ));
        assert!(matches!(
            run(args(&["--target", "memory://", "--duration-s=-1"])).await,
            Err(BenchError::InvalidArgs(_))
        ));
    }

    #[tokio::test]
    async fn search_read_finds_each_record_once_and_misses_absent_ones() {
        // Run only: nothing loaded, so every search finds nothing and counts as not found.
        let report = run(args(&[
            "--target",
            "memory://",
            "-w",
            "s",
            "--phase",
            "run",
            "--records",
            "50",
            "--operations",
            "200",
        ]))
        .await
        .expect("runs");
        let run = report.run.expect("run ran");
        let search = &run.ops["search"];
        assert_eq!(
            (search.count, search.errors, search.not_found),
            (0, 200, 200)
        );
        // Loaded: every search returns its record.
        let report = run_loaded_s().await;
        let search = &report.ops["search"];
        assert_eq!((search.count, search.errors), (500, 0));
    }

    async fn run_loaded_s() -> PhaseReport {
        run(args(&[
            "--target",
            "memory://",
            "-w",
            "s",
            "--records",
            "300",
            "--operations",
            "500",
            "-t",
            "3",
        ]))
        .await
        .expect("runs")
        .run
        .expect("run ran")
    }

    #[cfg(feature = "peers")]
    #[tokio::test]
    async fn workload_s_is_refused_for_redis_before_connecting() {
        // Port 1: nothing listens, so reaching connect would be a Connect error instead.
        let r = run(args(&["--target", "redis://127.0.0.1:1", "-w", "s"])).await;
        assert!(
            matches!(&r, Err(BenchError::TargetUnsupported(why)) if why.contains("workload s")),
            "{r:?}"
        );
    }

    #[cfg(feature = "peers")]
    #[tokio::test]
    async fn unreachable_redis_fails_at_connect() {
        // Port 1 on loopback: nothing listens there.
        let r = run(args(&[
            "--target",
            "redis://127.0.0.1:1",
            "--records",
            "10",
        ]))
        .await;
        assert!(matches!(r, Err(BenchError::Connect { .. })), "{r:?}");
    }
}
