//! The shapes of the requests this server serves, per space and minute, for `tessera trace` and
//! the advisor (`tessera_protocol::trace`). Counting a request is a hash-map update under a
//! lock; the last [`TRACE_MINUTES_MAX`] minutes are kept, older ones dropped, and a total since
//! the server started (the adaptation driver subtracts two totals to get any period's).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tessera_protocol::constants::TRACE_MINUTES_MAX;
use tessera_protocol::trace::{process_cpu_seconds, process_tag, ServerWork};
use tessera_protocol::{Constraint, RequestShape, ShapeCount, SpaceTrace};
use tessera_replication::KeyWrite;
use tessera_types::{CheckedPredicate, PredicateOp};

use crate::view::ServedSpace;

/// Requests and matched objects of one shape in one minute.
#[derive(Clone, Copy, Default)]
struct Tally {
    requests: f64,
    matched: f64,
}

/// One minute's counts, by space id and shape.
struct Minute {
    number: u64,
    tallies: HashMap<(u64, RequestShape), Tally>,
}

#[derive(Default)]
struct Counts {
    minutes: VecDeque<Minute>,
    totals: HashMap<(u64, RequestShape), Tally>,
}

#[derive(Default)]
pub struct Trace {
    counts: Mutex<Counts>,
    /// The chain loop's commits and the fsync thread's fsyncs, shared with that thread.
    pub work: Arc<WorkCounters>,
}

/// Counts of the write path's work since the server started (`ServerWork`).
#[derive(Default)]
pub struct WorkCounters {
    commits: AtomicU64,
    committed_writes: AtomicU64,
    fsyncs: AtomicU64,
    fsync_ns: AtomicU64,
}

impl WorkCounters {
    /// A group commit of `writes` object writes.
    pub fn commit(&self, writes: usize) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.committed_writes
            .fetch_add(writes as u64, Ordering::Relaxed);
    }

    /// An fsync that took `took`.
    pub fn fsync(&self, took: Duration) {
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.fsync_ns
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The totals, with this process's CPU.
    pub fn sample(&self) -> ServerWork {
        ServerWork {
            process: process_tag(),
            cpu_s: process_cpu_seconds(),
            commits: self.commits.load(Ordering::Relaxed),
            committed_writes: self.committed_writes.load(Ordering::Relaxed),
            fsyncs: self.fsyncs.load(Ordering::Relaxed),
            fsync_s: self.fsync_ns.load(Ordering::Relaxed) as f64 * 1e-9,
        }
    }
}

impl Tally {
    fn add(&mut self, requests: f64, matched: f64) {
        self.requests += requests;
        self.matched += matched;
    }
}

fn minute_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 60)
}

impl Trace {
    /// Counts `requests` requests of `shape` in `space` (a fraction for this server's share of
    /// a search), which matched `matched` objects.
    pub fn record(&self, space: &ServedSpace, shape: RequestShape, requests: f64, matched: f64) {
        self.record_at(minute_now(), space.config().id, shape, requests, matched);
    }

    fn record_at(&self, minute: u64, space: u64, shape: RequestShape, requests: f64, matched: f64) {
        let mut counts = self.counts.lock().expect("trace lock poisoned");
        counts
            .totals
            .entry((space, shape.clone()))
            .or_default()
            .add(requests, matched);
        let minutes = &mut counts.minutes;
        if minutes.back().is_none_or(|m| m.number < minute) {
            minutes.push_back(Minute {
                number: minute,
                tallies: HashMap::new(),
            });
            while minutes
                .front()
                .is_some_and(|m| m.number + u64::from(TRACE_MINUTES_MAX) <= minute)
            {
                minutes.pop_front();
            }
        }
        let current = minutes.back_mut().expect("pushed above");
        current
            .tallies
            .entry((space, shape))
            .or_default()
            .add(requests, matched);
    }

    /// What was counted in `space` over the last `minutes` minutes, this one included; with
    /// `minutes` 0, everything since the server started.
    pub fn summary(&self, space: &ServedSpace, minutes: u32) -> SpaceTrace {
        self.summary_at(minute_now(), space.config().id, space.name(), minutes)
    }

    fn summary_at(&self, now: u64, space: u64, name: &str, minutes: u32) -> SpaceTrace {
        let minutes = minutes.min(TRACE_MINUTES_MAX);
        let mut by_shape: HashMap<RequestShape, Tally> = HashMap::new();
        let mut add = |tallies: &HashMap<(u64, RequestShape), Tally>| {
            for ((s, shape), t) in tallies {
                if *s == space {
                    by_shape
                        .entry(shape.clone())
                        .or_default()
                        .add(t.requests, t.matched);
                }
            }
        };
        let counts = self.counts.lock().expect("trace lock poisoned");
        if minutes == 0 {
            add(&counts.totals);
        }
        for minute in &counts.minutes {
            if minutes > 0 && minute.number + u64::from(minutes) > now {
                add(&minute.tallies);
            }
        }
        drop(counts);
        let mut shapes: Vec<ShapeCount> = by_shape
            .into_iter()
            .map(|(shape, t)| ShapeCount {
                shape,
                requests: t.requests,
                matched: t.matched,
            })
            .collect();
        shapes.sort_by(|a, b| a.shape.cmp(&b.shape));
        SpaceTrace {
            space: name.to_owned(),
            minutes,
            servers: 1,
            shapes,
            work: vec![self.work.sample()],
        }
    }
}

/// A search's shape: each attribute its predicates name, with the strongest constraint.
pub fn search_shape(space: &ServedSpace, predicates: &[CheckedPredicate]) -> RequestShape {
    let schema = &space.config().schema;
    let mut constraints: Vec<(String, Constraint)> = Vec::new();
    for p in predicates {
        let constraint = match p.op {
            PredicateOp::Equals(_) => Constraint::Eq,
            PredicateOp::LessThan(_)
            | PredicateOp::LessEqual(_)
            | PredicateOp::GreaterThan(_)
            | PredicateOp::GreaterEqual(_)
            | PredicateOp::Range(..) => Constraint::Range,
            _ => Constraint::Other,
        };
        let name = &schema.attribute(p.attr).name;
        match constraints.iter_mut().find(|(n, _)| n == name) {
            Some((_, c)) => *c = c.strongest(constraint),
            None => constraints.push((name.clone(), constraint)),
        }
    }
    constraints.sort();
    RequestShape::Search(constraints)
}

/// A write's shape: the attributes a put sets, or a delete.
pub fn write_shape(space: &ServedSpace, write: &KeyWrite) -> RequestShape {
    match write {
        KeyWrite::Put { funcalls, .. } => {
            let schema = &space.config().schema;
            let mut names: Vec<String> = funcalls
                .iter()
                .map(|f| schema.attribute(f.attr).name.clone())
                .collect();
            names.sort();
            names.dedup();
            RequestShape::Write(names)
        }
        KeyWrite::Del { .. } => RequestShape::Del,
        // A backfill's, made by the state machine: never a client's.
        KeyWrite::Rewrite { .. } => RequestShape::Write(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get() -> RequestShape {
        RequestShape::Get
    }

    #[test]
    fn a_summary_sums_the_minutes_asked_for_and_only_its_space() {
        let trace = Trace::default();
        trace.record_at(100, 7, get(), 1.0, 1.0);
        trace.record_at(101, 7, get(), 2.0, 0.0);
        trace.record_at(101, 8, get(), 5.0, 5.0);
        trace.record_at(103, 7, RequestShape::Del, 1.0, 0.0);
        // The last 2 minutes at 103: minutes 102 and 103.
        let s = trace.summary_at(103, 7, "t", 2);
        assert_eq!(
            s.shapes,
            vec![ShapeCount {
                shape: RequestShape::Del,
                requests: 1.0,
                matched: 0.0
            }]
        );
        // The last 4: 100 to 103.
        let s = trace.summary_at(103, 7, "t", 4);
        let gets = s.shapes.iter().find(|c| c.shape == get()).expect("gets");
        assert_eq!((gets.requests, gets.matched), (3.0, 1.0));
        assert_eq!(s.requests(), 4.0);
    }

    #[test]
    fn minutes_older_than_the_window_kept_are_dropped() {
        let trace = Trace::default();
        trace.record_at(10, 1, get(), 1.0, 0.0);
        trace.record_at(10 + u64::from(TRACE_MINUTES_MAX), 1, get(), 1.0, 0.0);
        assert_eq!(trace.counts.lock().unwrap().minutes.len(), 1);
        // Asking for more than is kept asks for what is kept.
        assert_eq!(
            trace
                .summary_at(10 + u64::from(TRACE_MINUTES_MAX), 1, "t", 1000)
                .minutes,
            TRACE_MINUTES_MAX
        );
        // The total since the start keeps what the minutes dropped.
        let total = trace.summary_at(10 + u64::from(TRACE_MINUTES_MAX), 1, "t", 0);
        assert_eq!((total.minutes, total.requests()), (0, 2.0));
    }

    #[test]
    fn the_total_counts_every_minute_of_its_space() {
        let trace = Trace::default();
        trace.record_at(100, 7, get(), 1.0, 1.0);
        trace.record_at(101, 7, get(), 2.0, 0.0);
        trace.record_at(101, 8, get(), 5.0, 5.0);
        let s = trace.summary_at(101, 7, "t", 0);
        assert_eq!(
            s.shapes,
            vec![ShapeCount {
                shape: get(),
                requests: 3.0,
                matched: 1.0
            }]
        );
    }
}
