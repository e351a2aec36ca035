//! The shapes of the requests servers served, per space: what `tessera trace` prints and what the
//! advisor reads as a workload (docs/design.md §8, issue 9). A shape keeps what decides a request's
//! cost under a subspace configuration, and nothing of its values: which attributes a search fixes
//! by equality or bounds by a range, which attributes a write sets.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How a search's predicates constrain one attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Constraint {
    /// Fixed to one value: a subspace dimension it names is one slice.
    Eq,
    /// Bounded (less, greater, between): a subspace dimension it names is a run of slices.
    Range,
    /// Anything else (regex, contains, length): no help in choosing regions.
    Other,
}

impl Constraint {
    /// The stronger of two constraints on one attribute: equality, then a range, then other.
    pub fn strongest(self, other: Constraint) -> Constraint {
        self.min(other)
    }
}

/// What kind of request, and the attributes that decide its cost.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RequestShape {
    Get,
    /// A search, count or sorted search: every attribute its predicates name, by name, with its
    /// strongest constraint.
    Search(Vec<(String, Constraint)>),
    /// A put or atomic operation: the attributes it sets, by name, sorted.
    Write(Vec<String>),
    Del,
}

/// How often one shape was served, and how many objects those requests matched.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShapeCount {
    pub shape: RequestShape,
    /// Requests of this shape. A search that several servers shared counts once in all: each
    /// server counts its share of the regions searched.
    pub requests: f64,
    /// Objects they matched (found by gets, returned or counted by searches), in all.
    pub matched: f64,
}

/// The shapes served in one space over the last `minutes` minutes, as one server or (merged)
/// several saw them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpaceTrace {
    pub space: String,
    pub minutes: u32,
    /// How many servers' samples are merged here.
    pub servers: u32,
    pub shapes: Vec<ShapeCount>,
    /// What each server merged here has done since it started, in every space: what
    /// `tessera calibrate` and the advisor's evaluation measure the model's constants by.
    pub work: Vec<ServerWork>,
}

/// What one server has done since it started, whatever the space: the CPU its process used
/// and the commits of its chain loop. Totals: two samples' difference is a period's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerWork {
    /// Names the server's process: the servers of one process (`tessera dev --servers N`)
    /// share it, and its CPU.
    pub process: u64,
    /// CPU seconds (user and system, every thread) of the process; 0 where the platform does
    /// not say (it is read from `/proc/self/stat`).
    pub cpu_s: f64,
    /// Group commits of the chain loop, and the object writes they made durable together.
    pub commits: u64,
    pub committed_writes: u64,
    /// fsyncs of the store, and the seconds spent in them.
    pub fsyncs: u64,
    pub fsync_s: f64,
}

/// The work of several servers together: CPU counted once per process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkDone {
    pub cpu_s: f64,
    pub commits: f64,
    pub committed_writes: f64,
    pub fsyncs: f64,
    pub fsync_s: f64,
}

impl WorkDone {
    /// The sum of `work`, the CPU of servers sharing a process counted once.
    pub fn of(work: &[ServerWork]) -> WorkDone {
        let mut cpu: BTreeMap<u64, f64> = BTreeMap::new();
        let mut done = WorkDone::default();
        for w in work {
            let c = cpu.entry(w.process).or_default();
            *c = c.max(w.cpu_s);
            done.commits += w.commits as f64;
            done.committed_writes += w.committed_writes as f64;
            done.fsyncs += w.fsyncs as f64;
            done.fsync_s += w.fsync_s;
        }
        done.cpu_s = cpu.values().sum();
        done
    }

    /// What was done between `earlier` and this.
    pub fn minus(&self, earlier: &WorkDone) -> WorkDone {
        WorkDone {
            cpu_s: self.cpu_s - earlier.cpu_s,
            commits: self.commits - earlier.commits,
            committed_writes: self.committed_writes - earlier.committed_writes,
            fsyncs: self.fsyncs - earlier.fsyncs,
            fsync_s: self.fsync_s - earlier.fsync_s,
        }
    }
}

/// CPU seconds this process has used, user and system, all threads: `/proc/self/stat`'s
/// utime and stime, in the kernel's fixed 100 ticks a second (`USER_HZ`); 0 where there is no
/// such file.
pub fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return 0.0;
    };
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of the line (utime, stime) are the 12th and 13th after the name.
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (tick(11) + tick(12)) as f64 / 100.0
}

/// A number that names this process among others (its id and start time), the same for every
/// call.
pub fn process_tag() -> u64 {
    static TAG: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TAG.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        (u64::from(std::process::id()) << 32) ^ nanos
    })
}

impl SpaceTrace {
    /// Adds `other`'s counts (another server's, same space and window) to these.
    pub fn merge(&mut self, other: SpaceTrace) {
        let mut by_shape: BTreeMap<RequestShape, (f64, f64)> = BTreeMap::new();
        for c in self.shapes.drain(..).chain(other.shapes) {
            let entry = by_shape.entry(c.shape).or_default();
            entry.0 += c.requests;
            entry.1 += c.matched;
        }
        self.shapes = by_shape
            .into_iter()
            .map(|(shape, (requests, matched))| ShapeCount {
                shape,
                requests,
                matched,
            })
            .collect();
        self.servers += other.servers;
        self.work.extend(other.work);
    }

    /// Every request counted, all shapes together.
    pub fn requests(&self) -> f64 {
        self.shapes.iter().map(|c| c.requests).sum()
    }

    /// What was counted between `earlier` and this trace, both totals since the servers
    /// started (`minutes` 0). None when some count went down (a server restarted, or left
    /// the merge): the difference would not be what was served meanwhile.
    pub fn since(&self, earlier: &SpaceTrace) -> Option<SpaceTrace> {
        let before: BTreeMap<&RequestShape, &ShapeCount> =
            earlier.shapes.iter().map(|c| (&c.shape, c)).collect();
        let mut shapes = Vec::new();
        for c in &self.shapes {
            let (requests, matched) = before.get(&c.shape).map_or((c.requests, c.matched), |b| {
                (c.requests - b.requests, c.matched - b.matched)
            });
            if requests < 0.0 || matched < 0.0 {
                return None;
            }
            if requests > 0.0 {
                shapes.push(ShapeCount {
                    shape: c.shape.clone(),
                    requests,
                    matched,
                });
            }
        }
        let lost = earlier
            .shapes
            .iter()
            .any(|b| b.requests > 0.0 && !self.shapes.iter().any(|c| c.shape == b.shape));
        (!lost && self.servers == earlier.servers).then(|| SpaceTrace {
            space: self.space.clone(),
            minutes: 0,
            servers: self.servers,
            shapes,
            // Not differenced (the servers' order is the merge's): `WorkDone::of` of both
            // traces, then `WorkDone::minus`.
            work: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(shape: RequestShape, requests: f64, matched: f64) -> ShapeCount {
        ShapeCount {
            shape,
            requests,
            matched,
        }
    }

    fn total(servers: u32, shapes: Vec<ShapeCount>) -> SpaceTrace {
        SpaceTrace {
            space: "hotels".into(),
            minutes: 0,
            servers,
            shapes,
            work: Vec::new(),
        }
    }

    #[test]
    fn the_difference_of_two_totals_is_what_was_served_between_them() {
        let city = RequestShape::Search(vec![("city".into(), Constraint::Eq)]);
        let earlier = total(2, vec![count(RequestShape::Get, 10.0, 9.0)]);
        let later = total(
            2,
            vec![
                count(RequestShape::Get, 10.0, 9.0),
                count(city.clone(), 4.0, 40.0),
            ],
        );
        assert_eq!(
            later.since(&earlier),
            Some(total(2, vec![count(city.clone(), 4.0, 40.0)]))
        );
        // A count that went down, a shape gone, a server fewer: a server restarted or left.
        let restarted = total(2, vec![count(RequestShape::Get, 3.0, 3.0)]);
        assert_eq!(restarted.since(&earlier), None);
        assert_eq!(total(2, vec![count(city, 1.0, 1.0)]).since(&earlier), None);
        let fewer = total(1, vec![count(RequestShape::Get, 12.0, 9.0)]);
        assert_eq!(fewer.since(&earlier), None);
    }

    #[test]
    fn servers_of_one_process_count_its_cpu_once() {
        let server = |process, cpu_s, commits| ServerWork {
            process,
            cpu_s,
            commits,
            committed_writes: 2 * commits,
            fsyncs: commits,
            fsync_s: 0.001 * commits as f64,
        };
        let before = WorkDone::of(&[server(7, 1.0, 10), server(7, 1.0, 5), server(9, 2.0, 1)]);
        assert_eq!(before.cpu_s, 3.0);
        assert_eq!(before.commits, 16.0);
        assert_eq!(before.committed_writes, 32.0);
        let after = WorkDone::of(&[server(9, 2.5, 3), server(7, 1.5, 10), server(7, 1.5, 9)]);
        let done = after.minus(&before);
        assert_eq!((done.cpu_s, done.commits, done.fsyncs), (1.0, 6.0, 6.0));
        assert!((done.fsync_s - 0.006).abs() < 1e-12);
    }

    #[test]
    fn this_process_cpu_is_read() {
        let before = process_cpu_seconds();
        let started = std::time::Instant::now();
        let mut x = 0u64;
        while started.elapsed() < std::time::Duration::from_millis(300) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let used = process_cpu_seconds() - before;
        if cfg!(target_os = "linux") {
            // 0.3 s of spinning, on a busy machine perhaps less of it on a CPU.
            assert!(used > 0.05 && used < 5.0, "{used}");
        }
    }

    #[test]
    fn equality_is_the_strongest_constraint() {
        use Constraint::*;
        assert_eq!(Range.strongest(Eq), Eq);
        assert_eq!(Other.strongest(Range), Range);
        assert_eq!(Other.strongest(Other), Other);
    }

    #[test]
    fn merging_sums_each_shape_and_the_servers() {
        let city = RequestShape::Search(vec![("city".into(), Constraint::Eq)]);
        let mut a = SpaceTrace {
            space: "hotels".into(),
            minutes: 5,
            servers: 1,
            shapes: vec![
                count(RequestShape::Get, 10.0, 9.0),
                count(city.clone(), 0.5, 40.0),
            ],
            work: Vec::new(),
        };
        let b = SpaceTrace {
            space: "hotels".into(),
            minutes: 5,
            servers: 2,
            shapes: vec![
                count(city.clone(), 0.5, 60.0),
                count(RequestShape::Del, 3.0, 0.0),
            ],
            work: Vec::new(),
        };
        a.merge(b);
        assert_eq!(a.servers, 3);
        assert_eq!(a.requests(), 14.0);
        let city_count = a.shapes.iter().find(|c| c.shape == city).expect("merged");
        assert_eq!((city_count.requests, city_count.matched), (1.0, 100.0));
        assert_eq!(a.shapes.len(), 3);
    }
}
