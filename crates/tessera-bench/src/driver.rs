//! The benchmark driver: N tokio tasks, each a closed loop (issue an operation, wait for its
//! reply, issue the next) over its own `Target`, as YCSB's client threads are. Closed loops keep
//! the offered load honest: throughput is what the target sustains at that concurrency.
//!
//! Each task keeps its own histograms, merged when the phase ends, so measuring costs no
//! synchronisation between tasks. Shared state is two atomics (operations issued, operations
//! done) and, in the run phase, YCSB's acknowledged insert counter.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::generator::{AcknowledgedCounter, Uniform};
use crate::report::{OpReport, PhaseReport};
use crate::target::{Target, TargetError};
use crate::workload::{
    random_field, KeyChooser, Operation, Record, WorkloadSpec, FIELD_COUNT, MAX_SCAN_LENGTH,
};

/// The largest latency the histograms hold exactly; longer ones are recorded as this (an hour,
/// far beyond any timeout, so in practice nothing saturates).
const LATENCY_MAX_US: u64 = 3_600_000_000;
/// HdrHistogram precision: 3 significant digits, 0.1% error on every percentile.
const LATENCY_SIGNIFICANT_DIGITS: u8 = 3;
/// How often the progress bar is redrawn.
const PROGRESS_TICK_MS: u64 = 200;

/// Which part of a benchmark a phase is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhaseKind {
    /// Insert records `0..records`.
    Load,
    /// Issue `operations` operations of the workload mix over the loaded records.
    Run,
}

/// Everything a phase needs besides its targets.
#[derive(Clone, Debug)]
pub struct PhasePlan {
    pub kind: PhaseKind,
    pub spec: WorkloadSpec,
    pub records: u64,
    pub operations: u64,
    pub seed: u64,
    /// Stop issuing operations after this long (the run phase's `--duration-s`).
    pub duration: Option<Duration>,
    /// Run phase: operations per second in all (`--rate`), each issued at its turn and timed
    /// from it; `None` issues them as fast as the tasks go (closed loop).
    pub rate: Option<f64>,
    pub progress: bool,
}

/// One task's measurements.
pub(crate) struct TaskStats {
    latency_us: Vec<Histogram<u64>>,
    errors: [u64; Operation::ALL.len()],
    not_found: [u64; Operation::ALL.len()],
    /// Records returned by successful operations of each type (scans and searches).
    records: [u64; Operation::ALL.len()],
    /// The first few distinct errors, to say why operations failed.
    error_samples: Vec<String>,
}

/// Distinct errors a phase reports at most.
const ERROR_SAMPLES_MAX: usize = 5;

impl TaskStats {
    pub(crate) fn new() -> TaskStats {
        let histogram = || {
            Histogram::new_with_bounds(1, LATENCY_MAX_US, LATENCY_SIGNIFICANT_DIGITS)
                .expect("constant histogram bounds are valid")
        };
        TaskStats {
            latency_us: Operation::ALL.iter().map(|_| histogram()).collect(),
            errors: [0; Operation::ALL.len()],
            not_found: [0; Operation::ALL.len()],
            records: [0; Operation::ALL.len()],
            error_samples: Vec::new(),
        }
    }

    fn sample_error(&mut self, error: String) {
        if self.error_samples.len() < ERROR_SAMPLES_MAX && !self.error_samples.contains(&error) {
            self.error_samples.push(error);
        }
    }

    /// Records one finished operation. `Ok(false)` means the record was not found.
    pub(crate) fn record(
        &mut self,
        op: Operation,
        started: Instant,
        outcome: Result<bool, TargetError>,
    ) {
        let i = op.index();
        match outcome {
            Ok(true) => {
                let us = started.elapsed().as_micros().min(LATENCY_MAX_US as u128) as u64;
                self.latency_us[i].saturating_record(us.max(1));
            }
            Ok(false) => {
                self.errors[i] += 1;
                self.not_found[i] += 1;
            }
            Err(e) => {
                self.errors[i] += 1;
                self.sample_error(format!("{}: {e}", op.name()));
            }
        }
    }

    /// Counts `n` records returned by one successful operation of type `op`.
    pub(crate) fn returned(&mut self, op: Operation, n: u64) {
        self.records[op.index()] += n;
    }

    fn merge(&mut self, other: &TaskStats) {
        for (mine, theirs) in self.latency_us.iter_mut().zip(&other.latency_us) {
            // Same bounds on both sides, so adding cannot fail.
            let _ = mine.add(theirs);
        }
        for i in 0..Operation::ALL.len() {
            self.errors[i] += other.errors[i];
            self.not_found[i] += other.not_found[i];
            self.records[i] += other.records[i];
        }
        for e in &other.error_samples {
            self.sample_error(e.clone());
        }
    }
}

/// The operation counters of one phase, shared by its tasks: each task takes the index of its
/// next operation here until the phase's operations are handed out or its time is up.
pub(crate) struct Tickets {
    total: u64,
    /// Operations handed out so far; a task stops when it reaches the total.
    issued: AtomicU64,
    /// Operations finished, for the progress bar.
    done: AtomicU64,
    started: Instant,
    deadline: Option<Instant>,
}

impl Tickets {
    /// The index (`0..total`) of the next operation to issue, or `None` when the phase is over.
    pub(crate) fn next(&self) -> Option<u64> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        let issued = self.issued.fetch_add(1, Ordering::Relaxed);
        if issued >= self.total {
            // Undo the overshoot so `issued` reads as the number really issued.
            self.issued.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(issued)
    }

    /// Waits until operation `issued` is due at `rate` operations per second from the phase's
    /// start, and returns the instant the operation is timed from: its turn if the task came
    /// to it late (busy with its previous operation: the target's delay, counted), or when the
    /// task woke for it (the timer's lateness, up to a millisecond, is not the target's).
    async fn turn(&self, issued: u64, rate: f64) -> Instant {
        let due = self.started + Duration::from_secs_f64(issued as f64 / rate);
        if Instant::now() >= due {
            return due;
        }
        tokio::time::sleep_until(due.into()).await;
        Instant::now()
    }

    /// Marks one operation finished (for the progress bar).
    pub(crate) fn finished(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs `total` operations (fewer when `duration` runs out) as one closed-loop task per target:
/// `task(target, task_id, tickets)` takes operation indices from `tickets` until it gets `None`,
/// measures each in its own [`TaskStats`] and gives the target back. Every workload's phases
/// run through here, so they share one way of counting, timing and reporting.
pub(crate) async fn run_closed_loop<T, F, Fut>(
    targets: Vec<T>,
    name: &str,
    total: u64,
    duration: Option<Duration>,
    progress: bool,
    task: F,
) -> (Vec<T>, PhaseReport)
where
    T: Send + 'static,
    F: Fn(T, u64, Arc<Tickets>) -> Fut,
    Fut: Future<Output = (T, TaskStats)> + Send + 'static,
{
    let bar = progress_bar(progress, name, total);
    let started = Instant::now();
    let tickets = Arc::new(Tickets {
        total,
        issued: AtomicU64::new(0),
        done: AtomicU64::new(0),
        started,
        deadline: duration.map(|d| started + d),
    });

    let ticker = {
        let tickets = Arc::clone(&tickets);
        let bar = bar.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(PROGRESS_TICK_MS));
            loop {
                tick.tick().await;
                bar.set_position(tickets.done.load(Ordering::Relaxed));
            }
        })
    };

    let handles: Vec<_> = targets
        .into_iter()
        .enumerate()
        .map(|(id, target)| tokio::spawn(task(target, id as u64, Arc::clone(&tickets))))
        .collect();
    let mut targets = Vec::with_capacity(handles.len());
    let mut stats = TaskStats::new();
    let mut lost_tasks = 0u64;
    for handle in handles {
        match handle.await {
            Ok((target, task_stats)) => {
                stats.merge(&task_stats);
                targets.push(target);
            }
            // A panicking task is a bug in a target; its measurements are lost, the rest stand.
            Err(_) => lost_tasks += 1,
        }
    }
    let elapsed = started.elapsed();
    ticker.abort();
    bar.set_position(tickets.done.load(Ordering::Relaxed));
    bar.finish_and_clear();

    let elapsed_s = elapsed.as_secs_f64();
    let mut ops = BTreeMap::new();
    let mut operations = 0;
    let mut errors = lost_tasks;
    for op in Operation::ALL {
        let i = op.index();
        let histogram = &stats.latency_us[i];
        if histogram.is_empty() && stats.errors[i] == 0 {
            continue;
        }
        let mut report = OpReport::new(
            histogram,
            stats.errors[i],
            stats.not_found[i],
            elapsed_s,
            None,
        );
        match op {
            Operation::Scan => report.records_scanned = Some(stats.records[i]),
            Operation::Search => report.records_returned = Some(stats.records[i]),
            _ => {}
        }
        operations += report.count;
        errors += report.errors;
        ops.insert(op.name().to_owned(), report);
    }
    let report = PhaseReport {
        overall_throughput: if elapsed_s > 0.0 {
            operations as f64 / elapsed_s
        } else {
            0.0
        },
        elapsed_s,
        operations,
        errors,
        stopped_by_duration: tickets.issued.load(Ordering::Relaxed) < total,
        ops,
        error_samples: stats.error_samples,
    };
    (targets, report)
}

/// State the tasks of one YCSB phase share besides their tickets.
struct Shared {
    plan: PhasePlan,
    /// Keys of run-phase inserts, and which of them readers may use.
    insert_keys: Arc<AcknowledgedCounter>,
}

/// Runs one YCSB phase with one task per target, and returns the targets for the next phase.
pub async fn run_phase<T: Target>(targets: Vec<T>, plan: PhasePlan) -> (Vec<T>, PhaseReport) {
    let total = match plan.kind {
        PhaseKind::Load => plan.records,
        PhaseKind::Run => plan.operations,
    };
    let (duration, progress) = (plan.duration, plan.progress);
    let name = phase_name(plan.kind);
    let shared = Arc::new(Shared {
        insert_keys: Arc::new(AcknowledgedCounter::new(plan.records.max(1))),
        plan,
    });
    run_closed_loop(
        targets,
        name,
        total,
        duration,
        progress,
        move |target, id, tickets| task(target, id, Arc::clone(&shared), tickets),
    )
    .await
}

pub(crate) fn phase_name(kind: PhaseKind) -> &'static str {
    match kind {
        PhaseKind::Load => "load",
        PhaseKind::Run => "run",
    }
}

fn progress_bar(progress: bool, name: &str, total: u64) -> ProgressBar {
    if !progress {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{prefix:>4} [{elapsed_precise}] {wide_bar} {pos}/{len} {per_sec} eta {eta}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(name.to_owned());
    bar
}

/// Distinct, reproducible random streams per phase and task from one `--seed`.
pub(crate) fn task_rng(seed: u64, kind: PhaseKind, id: u64) -> SmallRng {
    let phase_salt = match kind {
        PhaseKind::Load => 0x4c4f_4144, // "LOAD"
        PhaseKind::Run => 0x5255_4e00,  // "RUN"
    };
    SmallRng::seed_from_u64(seed ^ phase_salt ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// One closed-loop client.
async fn task<T: Target>(
    mut target: T,
    id: u64,
    shared: Arc<Shared>,
    tickets: Arc<Tickets>,
) -> (T, TaskStats) {
    let plan = &shared.plan;
    let mut rng = task_rng(plan.seed, plan.kind, id);
    let mut stats = TaskStats::new();
    let mut chooser = KeyChooser::new(
        &plan.spec,
        plan.records.max(1),
        plan.operations,
        &shared.insert_keys,
    );
    let scan_length = Uniform::new(1, MAX_SCAN_LENGTH);
    while let Some(issued) = tickets.next() {
        // Paced, an operation is timed from its turn, not from when a task got to it: a server
        // that falls behind shows in the latencies (no coordinated omission).
        let due = match (plan.kind, plan.rate) {
            (PhaseKind::Run, Some(rate)) => Some(tickets.turn(issued, rate).await),
            _ => None,
        };
        let start = || due.unwrap_or_else(Instant::now);
        match plan.kind {
            PhaseKind::Load => {
                let record = Record::random(&mut rng);
                let started = Instant::now();
                let outcome = target.insert(issued, &record).await.map(|()| true);
                stats.record(Operation::Insert, started, outcome);
            }
            PhaseKind::Run => {
                let op = plan.spec.choose(&mut rng);
                match op {
                    Operation::Read => {
                        let n = chooser.next(&mut rng, &shared.insert_keys);
                        let started = start();
                        let outcome = target.read(n).await;
                        stats.record(op, started, outcome);
                    }
                    Operation::Update => {
                        let n = chooser.next(&mut rng, &shared.insert_keys);
                        let field = rng.random_range(0..FIELD_COUNT);
                        let value = random_field(&mut rng);
                        let started = start();
                        let outcome = target.update(n, field, &value).await.map(|()| true);
                        stats.record(op, started, outcome);
                    }
                    Operation::Insert => {
                        let n = shared.insert_keys.next_key();
                        let record = Record::random(&mut rng);
                        let started = start();
                        let outcome = target.insert(n, &record).await.map(|()| true);
                        // Acknowledge even a failed insert (as YCSB does), or readers would never
                        // see keys past it.
                        shared.insert_keys.acknowledge(n);
                        stats.record(op, started, outcome);
                    }
                    Operation::Scan => {
                        let n = chooser.next(&mut rng, &shared.insert_keys);
                        let len = scan_length.next(&mut rng);
                        let started = start();
                        let outcome = target.scan(n, len).await;
                        if let Ok(found) = outcome {
                            stats.returned(op, found);
                        }
                        // An empty scan is a valid answer, not a failure.
                        stats.record(op, started, outcome.map(|_| true));
                    }
                    Operation::Search => {
                        let n = chooser.next(&mut rng, &shared.insert_keys);
                        let started = start();
                        let outcome = target.search(n).await.and_then(|found| match found {
                            0 => Ok(false),
                            1 => Ok(true),
                            k => Err(TargetError::Protocol(format!(
                                "search for record {n} by (prefix, suffix) returned {k} records, expected 1"
                            ))),
                        });
                        if let Ok(true) = outcome {
                            stats.returned(op, 1);
                        }
                        stats.record(op, started, outcome);
                    }
                    Operation::ReadModifyWrite => {
                        let n = chooser.next(&mut rng, &shared.insert_keys);
                        let field = rng.random_range(0..FIELD_COUNT);
                        let value = random_field(&mut rng);
                        let started = start();
                        let outcome = target.read_modify_write(n, field, &value).await;
                        stats.record(op, started, outcome);
                    }
                }
            }
        }
        tickets.finished();
    }
    (target, stats)
}
