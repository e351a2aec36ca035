//! The YCSB core workloads A–F (`workloads/workloada` … `workloadf` in the YCSB repository; seed
//! 002 Table 1) and the records they read and write.
//!
//! A record is YCSB's usertable row — ten string fields `field0..field9` of 100 bytes each —
//! plus the two int attributes HyperDex added for scans (seed 002 §6.2): `prefix = n / 1000` and
//! `suffix = n % 1000`. A scan of `len` records from record `n` becomes the search
//! `prefix == n/1000 && n%1000 <= suffix <= min(n%1000 + len - 1, 999)`, answered by the
//! `subspace prefix, suffix` of the benchmark space without touching every server.

use std::fmt;
use std::sync::Arc;

use rand::Rng;

use crate::generator::{AcknowledgedCounter, Latest, ScrambledZipfian, Uniform};

/// Fields per record (YCSB `fieldcount`).
pub const FIELD_COUNT: usize = 10;
/// Bytes per field (YCSB `fieldlength`); ten of them make YCSB's 1 kB object.
pub const FIELD_LENGTH: usize = 100;
/// Records per scan prefix group: scans never cross a prefix, as in HyperDex's YCSB binding.
pub const SCAN_GROUP_SIZE: u64 = 1000;
/// YCSB `maxscanlength` for workload E.
pub const MAX_SCAN_LENGTH: u64 = 100;

/// The Tessera space the benchmark loads into. Its name is also the Redis key namespace.
pub const SPACE_NAME: &str = "ycsb";

/// The description `load` adds when the space is absent; the extra subspace makes a scan one
/// region lookup (seed 002 §6.2). It does not say how many failures to tolerate: a standalone
/// server has one replica of everything whatever it says, and a cluster applies its default
/// (`tessera dev --replicas K`), so the same benchmark runs with K replicas on a cluster.
pub const SPACE_DESCRIPTION: &str = "space ycsb
key id
attributes string field0, string field1, string field2, string field3, string field4, string field5, string field6, string field7, string field8, string field9, int prefix, int suffix
subspace prefix, suffix
create 64 partitions
";

/// The name of field `i` (`field0`..`field9`).
pub fn field_name(i: usize) -> &'static str {
    const NAMES: [&str; FIELD_COUNT] = [
        "field0", "field1", "field2", "field3", "field4", "field5", "field6", "field7", "field8",
        "field9",
    ];
    NAMES[i]
}

/// The key of record `n`: YCSB's `user` prefix with the record number in plain order (YCSB's
/// hashed insert order is optional and not used: the scan attributes carry the order instead).
pub fn record_key(n: u64) -> String {
    format!("user{n}")
}

/// The scan attributes of record `n`.
pub fn prefix_suffix(n: u64) -> (i64, i64) {
    ((n / SCAN_GROUP_SIZE) as i64, (n % SCAN_GROUP_SIZE) as i64)
}

/// The records a scan of `len` from record `n` covers: `(prefix, suffix_lo, suffix_hi)`, clamped
/// to the prefix group. Every target scans exactly these records so their results compare.
pub fn scan_bounds(n: u64, len: u64) -> (i64, i64, i64) {
    let (prefix, lo) = prefix_suffix(n);
    let hi = (lo as u64 + len.max(1) - 1).min(SCAN_GROUP_SIZE - 1) as i64;
    (prefix, lo, hi)
}

/// A record's ten fields (random printable ASCII, as YCSB's `RandomByteIterator` produces).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub fields: Vec<String>,
}

impl Record {
    pub fn random<R: Rng + ?Sized>(rng: &mut R) -> Record {
        Record {
            fields: (0..FIELD_COUNT).map(|_| random_field(rng)).collect(),
        }
    }
}

/// One field value of `FIELD_LENGTH` random printable bytes.
pub fn random_field<R: Rng + ?Sized>(rng: &mut R) -> String {
    (0..FIELD_LENGTH)
        .map(|_| rng.random_range(b' '..=b'~') as char)
        .collect()
}

/// A YCSB core workload, or one of the benchmarks of this crate's own (`s`, `subspaces`,
/// `search-fixed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Update heavy: 50% read, 50% update, zipfian.
    A,
    /// Read mostly: 95% read, 5% update, zipfian.
    B,
    /// Read only: 100% read, zipfian.
    C,
    /// Read latest: 95% read, 5% insert, latest.
    D,
    /// Short ranges: 95% scan (length uniform 1..=100), 5% insert, zipfian.
    E,
    /// Read-modify-write: 50% read, 50% read-modify-write, zipfian.
    F,
    /// Search-read (not a YCSB workload): 100% searches fixing both dimensions of the
    /// `prefix, suffix` subspace for a zipfian-chosen record (`prefix == n/1000 && suffix ==
    /// n%1000`), each returning exactly that record. Run against workload C it compares a
    /// fully specified search with a get (issue 2's benchmarks); Tessera only.
    S,
    /// Puts that move an object in every subspace of a space with `--subspaces S` one-attribute
    /// subspaces: write latency against chain length K(1+2S). Tessera only.
    Subspaces,
    /// Searches fixing `--fixed F` of the 3 attributes x, y, z of a subspace: throughput and
    /// servers contacted against how narrow the query is. Tessera only.
    #[serde(rename = "search-fixed")]
    SearchFixed,
    /// The performance model's evaluation (seed 000 §5.2, docs/advisor.md): for each hotel
    /// workload, the advisor's top configurations, random others and the baselines, each
    /// loaded into a fresh space and measured. Tessera only.
    #[serde(rename = "advisor-eval")]
    AdvisorEval,
    /// An adaptive space under a workload that changes (docs/advisor.md, "The workload
    /// shift"): one hotel workload, then another, while the server re-subspaces the space;
    /// throughput every second, and references for the second workload. Tessera only.
    #[serde(rename = "advisor-shift")]
    AdvisorShift,
    /// Seed 004's micro-benchmark of documents (about 5 properties, 10-character names,
    /// 100-character values): writes, reads by key, searches by one property; against a
    /// Tessera dynamic or typed space (`--doc-space`) or PostgreSQL's JSONB (postgres://).
    Documents,
    /// A DBLP-shaped bibliography (`--entries`), then every query kind timed on its own;
    /// against the same three systems as `documents`.
    Dblp,
    /// Seed 003's Twitter workload (users, tweets, timelines; Table 1's seven operations)
    /// with the tweets placed at random, ordered or tagged (`--twitter-placement`), or routed
    /// over a computed cluster without running it (`--twitter-route-servers`). Tessera only.
    Twitter,
    /// Searches on secondary attributes (`--query eq1|eq2|range`) of 100-byte people, against
    /// Tessera, PostgreSQL or Cassandra (`crate::secondary`).
    Secondary,
    /// The client's planning of searches and the configuration's size over computed clusters
    /// of `--plan-servers` servers (`crate::plan`, docs/scale.md); runs nothing, connects to
    /// nothing.
    Plan,
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Workload::A => "a",
            Workload::B => "b",
            Workload::C => "c",
            Workload::D => "d",
            Workload::E => "e",
            Workload::F => "f",
            Workload::S => "s",
            Workload::Subspaces => "subspaces",
            Workload::SearchFixed => "search-fixed",
            Workload::AdvisorEval => "advisor-eval",
            Workload::AdvisorShift => "advisor-shift",
            Workload::Documents => "documents",
            Workload::Dblp => "dblp",
            Workload::Twitter => "twitter",
            Workload::Secondary => "secondary",
            Workload::Plan => "plan",
        };
        f.write_str(s)
    }
}

/// The request distribution of a workload's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    Zipfian,
    Latest,
    Uniform,
}

/// The operations of the core workloads; also the keys of the report's `ops` map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
    /// A search fixing every dimension of the `prefix, suffix` subspace (workload S).
    Search,
}

impl Operation {
    pub const ALL: [Operation; 6] = [
        Operation::Read,
        Operation::Update,
        Operation::Insert,
        Operation::Scan,
        Operation::ReadModifyWrite,
        Operation::Search,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Operation::Read => "read",
            Operation::Update => "update",
            Operation::Insert => "insert",
            Operation::Scan => "scan",
            Operation::ReadModifyWrite => "read_modify_write",
            Operation::Search => "search",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// Operation proportions and key distribution of a workload (YCSB `CoreWorkload` properties).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorkloadSpec {
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub read_modify_write: f64,
    /// Fully specified subspace searches (workload S only).
    pub search: f64,
    pub distribution: Distribution,
}

impl Workload {
    pub fn spec(self) -> WorkloadSpec {
        let base = WorkloadSpec {
            read: 0.0,
            update: 0.0,
            insert: 0.0,
            scan: 0.0,
            read_modify_write: 0.0,
            search: 0.0,
            distribution: Distribution::Zipfian,
        };
        match self {
            Workload::A => WorkloadSpec {
                read: 0.5,
                update: 0.5,
                ..base
            },
            Workload::B => WorkloadSpec {
                read: 0.95,
                update: 0.05,
                ..base
            },
            Workload::C => WorkloadSpec { read: 1.0, ..base },
            Workload::D => WorkloadSpec {
                read: 0.95,
                insert: 0.05,
                distribution: Distribution::Latest,
                ..base
            },
            Workload::E => WorkloadSpec {
                scan: 0.95,
                insert: 0.05,
                ..base
            },
            Workload::F => WorkloadSpec {
                read: 0.5,
                read_modify_write: 0.5,
                ..base
            },
            // Same zipfian request distribution as C: the two differ only in get vs search.
            Workload::S => WorkloadSpec {
                search: 1.0,
                ..base
            },
            // Their keys and queries come from their own plans, not from a key chooser; the
            // specs only state the mix.
            Workload::Subspaces => WorkloadSpec {
                update: 1.0,
                distribution: Distribution::Uniform,
                ..base
            },
            Workload::SearchFixed | Workload::Secondary => WorkloadSpec {
                search: 1.0,
                distribution: Distribution::Uniform,
                ..base
            },
            // Writes, then reads and searches, in `crate::documents`.
            Workload::Documents | Workload::Dblp | Workload::Twitter | Workload::Plan => {
                WorkloadSpec {
                    read: 0.5,
                    search: 0.5,
                    distribution: Distribution::Uniform,
                    ..base
                }
            }
            // Mixes of searches and updates, all in `crate::hotels`.
            Workload::AdvisorEval | Workload::AdvisorShift => WorkloadSpec {
                search: 0.5,
                update: 0.5,
                distribution: Distribution::Uniform,
                ..base
            },
        }
    }

    /// Whether the workload runs over the YCSB `usertable` space (every one but `subspaces`,
    /// `search-fixed`, `advisor-eval`, `advisor-shift`, `documents` and `dblp`, which create
    /// their own).
    pub fn is_ycsb(self) -> bool {
        !matches!(
            self,
            Workload::Subspaces
                | Workload::SearchFixed
                | Workload::AdvisorEval
                | Workload::AdvisorShift
                | Workload::Documents
                | Workload::Dblp
                | Workload::Twitter
                | Workload::Secondary
                | Workload::Plan
        )
    }
}

impl WorkloadSpec {
    /// YCSB's `DiscreteGenerator` over the proportions.
    pub fn choose<R: Rng + ?Sized>(&self, rng: &mut R) -> Operation {
        let weights = [
            (Operation::Read, self.read),
            (Operation::Update, self.update),
            (Operation::Insert, self.insert),
            (Operation::Scan, self.scan),
            (Operation::ReadModifyWrite, self.read_modify_write),
            (Operation::Search, self.search),
        ];
        let total: f64 = weights.iter().map(|(_, w)| w).sum();
        let mut x = rng.random::<f64>() * total;
        for (op, w) in weights {
            if x < w {
                return op;
            }
            x -= w;
        }
        // Rounding left a sliver past the last weight: give it to the last non-zero operation.
        weights
            .iter()
            .rev()
            .find(|(_, w)| *w > 0.0)
            .map(|(op, _)| *op)
            .unwrap_or(Operation::Read)
    }
}

/// Chooses the record an operation touches, per task, over keys whose inserts have completed.
#[derive(Clone, Debug)]
pub enum KeyChooser {
    Zipfian(ScrambledZipfian),
    Latest(Latest),
    Uniform(Uniform),
}

impl KeyChooser {
    /// As YCSB's `CoreWorkload.init`: the zipfian space covers the loaded records plus twice the
    /// inserts the run expects, so new records can become popular.
    pub fn new(
        spec: &WorkloadSpec,
        records: u64,
        operations: u64,
        counter: &AcknowledgedCounter,
    ) -> KeyChooser {
        assert!(records > 0);
        match spec.distribution {
            Distribution::Zipfian => {
                let expected_new_keys = (operations as f64 * spec.insert * 2.0) as u64;
                KeyChooser::Zipfian(ScrambledZipfian::new(0, records + expected_new_keys - 1))
            }
            Distribution::Latest => KeyChooser::Latest(Latest::new(counter.last_value())),
            Distribution::Uniform => KeyChooser::Uniform(Uniform::new(0, records - 1)),
        }
    }

    /// YCSB's `nextKeynum`: redraws until the key's insert has been acknowledged.
    pub fn next<R: Rng + ?Sized>(
        &mut self,
        rng: &mut R,
        counter: &Arc<AcknowledgedCounter>,
    ) -> u64 {
        let last = counter.last_value();
        match self {
            KeyChooser::Latest(l) => l.next(rng, last),
            KeyChooser::Zipfian(z) => loop {
                let k = z.next(rng);
                if k <= last {
                    return k;
                }
            },
            KeyChooser::Uniform(u) => loop {
                let k = u.next(rng);
                if k <= last {
                    return k;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn workload_mixes_match_ycsb() {
        let mut rng = SmallRng::seed_from_u64(1);
        let n = 100_000;
        for (w, op, share) in [
            (Workload::A, Operation::Read, 0.5),
            (Workload::B, Operation::Update, 0.05),
            (Workload::C, Operation::Read, 1.0),
            (Workload::D, Operation::Insert, 0.05),
            (Workload::E, Operation::Scan, 0.95),
            (Workload::F, Operation::ReadModifyWrite, 0.5),
            (Workload::S, Operation::Search, 1.0),
        ] {
            let spec = w.spec();
            let got = (0..n).filter(|_| spec.choose(&mut rng) == op).count() as f64 / n as f64;
            assert!(
                (got - share).abs() < 0.01,
                "workload {w}: {op:?} share {got}, expected {share}"
            );
        }
    }

    #[test]
    fn scans_stay_inside_one_prefix_group() {
        assert_eq!(scan_bounds(12_345, 10), (12, 345, 354));
        assert_eq!(scan_bounds(12_995, 100), (12, 995, 999));
        assert_eq!(scan_bounds(7, 1), (0, 7, 7));
        assert_eq!(prefix_suffix(1_000_999), (1000, 999));
    }

    #[test]
    fn search_read_is_workload_c_with_searches_instead_of_gets() {
        let (c, s) = (Workload::C.spec(), Workload::S.spec());
        assert_eq!(s.distribution, c.distribution);
        assert_eq!((s.search, s.read, s.insert), (1.0, 0.0, 0.0));
        assert_eq!(
            WorkloadSpec {
                read: 1.0,
                search: 0.0,
                ..s
            },
            c
        );
        assert_eq!(Workload::S.to_string(), "s");
        assert_eq!(Operation::Search.name(), "search");
    }

    #[test]
    fn records_are_ten_printable_100_byte_fields() {
        let mut rng = SmallRng::seed_from_u64(2);
        let r = Record::random(&mut rng);
        assert_eq!(r.fields.len(), FIELD_COUNT);
        for f in &r.fields {
            assert_eq!(f.len(), FIELD_LENGTH);
            assert!(f.bytes().all(|b| (b' '..=b'~').contains(&b)));
        }
    }

    #[test]
    fn key_chooser_never_returns_unacknowledged_keys() {
        let counter = Arc::new(AcknowledgedCounter::new(100));
        let spec = Workload::E.spec();
        let mut chooser = KeyChooser::new(&spec, 100, 10_000, &counter);
        let mut rng = SmallRng::seed_from_u64(3);
        // Hand out inserts without acknowledging them: the chooser must stay below 100.
        for _ in 0..50 {
            counter.next_key();
        }
        for _ in 0..10_000 {
            assert!(chooser.next(&mut rng, &counter) < 100);
        }
    }

    #[test]
    fn space_description_names_every_attribute() {
        for i in 0..FIELD_COUNT {
            assert!(SPACE_DESCRIPTION.contains(&format!("string {}", field_name(i))));
        }
        assert!(SPACE_DESCRIPTION.contains("subspace prefix, suffix"));
        let schema =
            tessera_types::parse_space(SPACE_DESCRIPTION).expect("the benchmark space parses");
        assert_eq!(schema.name, SPACE_NAME);
    }
}
