//! A seeded random walk of 2000 operations against a `BTreeMap` model: puts, deletes,
//! conditional writes, atomic adds (overflow included), group deletes, and searches and counts
//! with random predicates on a small domain, so that predicates often match. Every answer is
//! checked against the model, and every search against brute-force filtering of the model.
//!
//! Versions are checked against their contract, not predicted: every version a key shows is
//! higher than any it showed before (a delete included), and an object no write changed keeps
//! its version.
//!
//! The seed is fixed; `TESSERA_MODEL_SEED=N` replays another one.

mod common;

use std::collections::BTreeMap;

use common::*;
use tessera_client::{
    Client, Funcall, FuncallOp, NumOp, Predicate, PredicateOp, Status, Value, Version,
};

const SPACE: &str = "
space model
key int k
attributes int a, string b, int c
subspace a, b
subspace c
create 16 partitions
";

const OPERATIONS: usize = 2000;
const KEYS: i64 = 40;
const STRINGS: [&str; 6] = ["", "x", "xy", "yz", "zzz", "xyz"];

/// SplitMix64: small, seedable, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn string(&mut self) -> &'static str {
        STRINGS[self.below(STRINGS.len() as u64) as usize]
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Obj {
    /// The version the server showed for this object, `None` once a write changed it.
    version: Option<Version>,
    a: i64,
    b: String,
    c: i64,
}

impl Obj {
    fn new() -> Obj {
        Obj {
            version: None,
            a: 0,
            b: String::new(),
            c: 0,
        }
    }

    fn int(&self, attr: &str) -> i64 {
        match attr {
            "a" => self.a,
            "c" => self.c,
            other => panic!("{other} is not an int attribute"),
        }
    }

    fn set(&mut self, attr: &str, value: &Value) {
        match (attr, value) {
            ("a", Value::Int(v)) => self.a = *v,
            ("c", Value::Int(v)) => self.c = *v,
            ("b", Value::String(v)) => self.b = v.as_str().expect("text").to_owned(),
            other => panic!("not a valid assignment: {other:?}"),
        }
    }
}

type Model = BTreeMap<i64, Obj>;

/// The highest version each key has shown, kept across deletes.
type Seen = BTreeMap<i64, Version>;

/// Checks the version the server shows for `key`, which the model holds, against the contract.
fn observe(model: &mut Model, seen: &mut Seen, key: i64, version: Version, what: &str) {
    let o = model
        .get_mut(&key)
        .expect("observed objects are in the model");
    match o.version {
        Some(v) => assert_eq!(
            version, v,
            "{what}: key {key} changed version without a write"
        ),
        None => {
            let before = seen.get(&key).copied().unwrap_or(Version::NONE);
            assert!(
                version > before,
                "{what}: key {key} shows version {version:?} after {before:?}"
            );
            o.version = Some(version);
            seen.insert(key, version);
        }
    }
}
/// A random predicate and the model's own reading of it.
/// Whether a predicate holds on the object of a key, as the model reads it.
type Holds = Box<dyn Fn(i64, &Obj) -> bool>;

fn predicate(rng: &mut Rng) -> (Predicate, Holds) {
    use PredicateOp as P;
    let v = rng.range(-6, 6);
    let w = rng.range(-6, 6);
    let int_attr = ["a", "c", "k"][rng.below(3) as usize];
    let get = move |k: i64, o: &Obj| if int_attr == "k" { k } else { o.int(int_attr) };
    let p = |op| Predicate::new(int_attr, op);
    match rng.below(12) {
        0 => (
            p(P::Equals(Value::Int(v))),
            Box::new(move |k, o| get(k, o) == v),
        ),
        1 => (
            p(P::LessThan(Value::Int(v))),
            Box::new(move |k, o| get(k, o) < v),
        ),
        2 => (
            p(P::LessEqual(Value::Int(v))),
            Box::new(move |k, o| get(k, o) <= v),
        ),
        3 => (
            p(P::GreaterThan(Value::Int(v))),
            Box::new(move |k, o| get(k, o) > v),
        ),
        4 => (
            p(P::GreaterEqual(Value::Int(v))),
            Box::new(move |k, o| get(k, o) >= v),
        ),
        5 => (
            p(P::Range(Value::Int(v), Value::Int(w))),
            Box::new(move |k, o| v <= get(k, o) && get(k, o) <= w),
        ),
        6 => {
            let b = rng.string();
            (Predicate::equals("b", b), Box::new(move |_, o| o.b == b))
        }
        7 => {
            let b = rng.string();
            (
                Predicate::new("b", P::LessEqual(Value::from(b))),
                Box::new(move |_, o| o.b.as_bytes() <= b.as_bytes()),
            )
        }
        8 => {
            let n = rng.below(4);
            match rng.below(3) {
                0 => (
                    Predicate::new("b", P::LengthEquals(n)),
                    Box::new(move |_, o| o.b.len() as u64 == n),
                ),
                1 => (
                    Predicate::new("b", P::LengthLessEqual(n)),
                    Box::new(move |_, o| o.b.len() as u64 <= n),
                ),
                _ => (
                    Predicate::new("b", P::LengthGreaterEqual(n)),
                    Box::new(move |_, o| o.b.len() as u64 >= n),
                ),
            }
        }
        9 => {
            let needle = ["x", "y", "z", "yz", ""][rng.below(5) as usize];
            (
                Predicate::new("b", P::Contains(Value::from(needle))),
                Box::new(move |_, o| o.b.contains(needle)),
            )
        }
        10 => {
            type Check = fn(&str) -> bool;
            let regexes: [(&str, Check); 5] = [
                ("^x", |b| b.starts_with('x')),
                ("y", |b| b.contains('y')),
                ("^z+$", |b| !b.is_empty() && b.chars().all(|c| c == 'z')),
                ("^$", |b| b.is_empty()),
                ("z$", |b| b.ends_with('z')),
            ];
            let (pattern, check) = regexes[rng.below(regexes.len() as u64) as usize];
            (
                Predicate::new("b", P::Regex(pattern.into())),
                Box::new(move |_, o| check(&o.b)),
            )
        }
        _ => {
            let b = rng.string();
            (
                Predicate::new("b", P::GreaterThan(Value::from(b))),
                Box::new(move |_, o| o.b.as_bytes() > b.as_bytes()),
            )
        }
    }
}

fn assignments(rng: &mut Rng) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    if rng.chance(60) {
        out.push(("a", Value::Int(rng.range(-5, 5))));
    }
    if rng.chance(60) {
        out.push(("b", Value::from(rng.string())));
    }
    if rng.chance(60) {
        // Now and then near the edge, so that atomic adds overflow.
        let c = if rng.chance(10) {
            i64::MAX - rng.range(0, 3)
        } else {
            rng.range(-5, 5)
        };
        out.push(("c", Value::Int(c)));
    }
    out
}

fn apply(model: &mut Model, key: i64, attributes: &[(&str, Value)]) {
    let o = model.entry(key).or_insert_with(Obj::new);
    o.version = None;
    for (attr, value) in attributes {
        o.set(attr, value);
    }
}

fn record_of(key: i64, o: &Obj) -> (Value, Vec<Value>) {
    (
        Value::Int(key),
        vec![Value::Int(o.a), Value::from(o.b.as_str()), Value::Int(o.c)],
    )
}

fn from_record(r: &tessera_client::Record) -> (Value, Vec<Value>) {
    (
        r.key.clone(),
        ["a", "b", "c"]
            .iter()
            .map(|a| r.attributes[*a].clone())
            .collect(),
    )
}

async fn check_get(client: &Client, model: &mut Model, seen: &mut Seen, key: i64, step: usize) {
    let got = client.get("model", key).await.unwrap();
    assert_eq!(
        got.as_ref().map(from_record),
        model.get(&key).map(|o| record_of(key, o)),
        "step {step}: get {key}"
    );
    if let Some(r) = got {
        observe(model, seen, key, r.version, &format!("step {step}: get"));
    }
}

fn expect<T: std::fmt::Debug>(
    step: usize,
    what: &str,
    result: Result<T, tessera_client::ClientError>,
    expected: Option<Status>,
) {
    match (result, expected) {
        (Ok(_), None) => {}
        (Err(e), Some(s)) if e.status() == Some(s) => {}
        (r, e) => panic!("step {step}: {what}: got {r:?}, the model expects {e:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_operations_match_a_model() {
    let seed = std::env::var("TESSERA_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x7e55_e7a2_u64);
    eprintln!("model seed {seed} (replay with TESSERA_MODEL_SEED={seed})");
    let mut rng = Rng(seed);
    let server = TestServer::start().await;
    let client = server.client().await;
    client.add_space(SPACE).await.unwrap();
    let mut model = Model::new();
    let mut seen = Seen::new();
    let mut searches_nonempty = 0;
    let mut outcomes = BTreeMap::<&str, usize>::new();

    for step in 0..OPERATIONS {
        let key = rng.range(0, KEYS - 1);
        let kind = rng.below(100);
        let name = match kind {
            0..=21 => {
                let attributes = assignments(&mut rng);
                expect(
                    step,
                    "put",
                    client.put("model", key, attributes.clone()).await,
                    None,
                );
                apply(&mut model, key, &attributes);
                "put"
            }
            22..=27 => {
                let attributes = assignments(&mut rng);
                let exists = model.contains_key(&key);
                let result = client
                    .put_if_not_exist("model", key, attributes.clone())
                    .await;
                expect(
                    step,
                    "put_if_not_exist",
                    result,
                    exists.then_some(Status::CmpFail),
                );
                if !exists {
                    apply(&mut model, key, &attributes);
                }
                "put_if_not_exist"
            }
            28..=37 => {
                let attributes = assignments(&mut rng);
                let (p, holds) = predicate(&mut rng);
                let create = rng.chance(30);
                let current = model.get(&key);
                let expected = match current {
                    None if create => None,
                    None => Some(Status::NotFound),
                    Some(o) if holds(key, o) => None,
                    Some(_) => Some(Status::CmpFail),
                };
                let result = if create {
                    client
                        .cond_put_or_create("model", key, vec![p.clone()], attributes.clone())
                        .await
                } else {
                    client
                        .cond_put("model", key, vec![p.clone()], attributes.clone())
                        .await
                };
                expect(step, &format!("cond_put {p:?}"), result, expected);
                if expected.is_none() {
                    apply(&mut model, key, &attributes);
                }
                "cond_put"
            }
            38..=49 => {
                let attr = if rng.chance(50) { "a" } else { "c" };
                let delta = rng.range(-3, 3);
                let f = Funcall::new(attr, FuncallOp::Num(NumOp::Add), delta);
                let (expected, new) = match model.get(&key) {
                    None => (Some(Status::NotFound), None),
                    Some(o) => match o.int(attr).checked_add(delta) {
                        None => (Some(Status::CmpFail), None),
                        Some(v) => (None, Some(v)),
                    },
                };
                expect(
                    step,
                    "atomic add",
                    client.atomic("model", key, vec![f]).await,
                    expected,
                );
                match new {
                    Some(v) => apply(&mut model, key, &[(attr, Value::Int(v))]),
                    None if expected == Some(Status::CmpFail) => {
                        check_get(&client, &mut model, &mut seen, key, step).await; // unchanged
                        *outcomes.entry("atomic_add_overflow").or_default() += 1;
                    }
                    None => {}
                }
                "atomic_add"
            }
            50..=57 => {
                let expected = (!model.contains_key(&key)).then_some(Status::NotFound);
                expect(step, "del", client.del("model", key).await, expected);
                model.remove(&key);
                "del"
            }
            58..=61 => {
                let (p, holds) = predicate(&mut rng);
                let expected = match model.get(&key) {
                    None => Some(Status::NotFound),
                    Some(o) if holds(key, o) => None,
                    Some(_) => Some(Status::CmpFail),
                };
                expect(
                    step,
                    &format!("cond_del {p:?}"),
                    client.cond_del("model", key, vec![p]).await,
                    expected,
                );
                if expected.is_none() {
                    model.remove(&key);
                }
                "cond_del"
            }
            62..=63 => {
                // Rare, or the space would stay nearly empty.
                let (p1, h1) = predicate(&mut rng);
                let (p2, h2) = predicate(&mut rng);
                let doomed: Vec<i64> = model
                    .iter()
                    .filter(|(k, o)| h1(**k, o) && h2(**k, o))
                    .map(|(k, _)| *k)
                    .collect();
                let n = client
                    .group_del("model", vec![p1.clone(), p2.clone()])
                    .await
                    .unwrap();
                assert_eq!(
                    n,
                    doomed.len() as u64,
                    "step {step}: group_del {p1:?} {p2:?}"
                );
                for k in doomed {
                    model.remove(&k);
                }
                "group_del"
            }
            64..=69 => {
                // A burst of concurrent puts on distinct keys: they share group commits.
                let mut keys: Vec<i64> = (0..rng.range(2, 12))
                    .map(|_| rng.range(0, KEYS - 1))
                    .collect();
                keys.sort();
                keys.dedup();
                let writes: Vec<(i64, Vec<(&str, Value)>)> =
                    keys.iter().map(|&k| (k, assignments(&mut rng))).collect();
                let results = futures::future::join_all(
                    writes
                        .iter()
                        .map(|(k, a)| client.put("model", *k, a.clone())),
                )
                .await;
                for ((k, attributes), r) in writes.iter().zip(results) {
                    expect(step, "burst put", r, None);
                    apply(&mut model, *k, attributes);
                }
                "burst"
            }
            70..=77 => {
                check_get(&client, &mut model, &mut seen, key, step).await;
                "get"
            }
            _ => {
                let mut predicates = Vec::new();
                let mut checks = Vec::new();
                for _ in 0..rng.below(4) {
                    let (p, h) = predicate(&mut rng);
                    predicates.push(p);
                    checks.push(h);
                }
                let mut expected: Vec<_> = model
                    .iter()
                    .filter(|(k, o)| checks.iter().all(|h| h(**k, o)))
                    .map(|(k, o)| record_of(*k, o))
                    .collect();
                let records = client.search("model", predicates.clone()).await.unwrap();
                let mut found: Vec<_> = records.iter().map(from_record).collect();
                found.sort_by(|x, y| x.0.cmp(&y.0));
                expected.sort_by(|x, y| x.0.cmp(&y.0));
                assert_eq!(found, expected, "step {step}: search {predicates:?}");
                for r in &records {
                    let Value::Int(key) = r.key else {
                        panic!("int keys")
                    };
                    observe(
                        &mut model,
                        &mut seen,
                        key,
                        r.version,
                        &format!("step {step}: search"),
                    );
                }
                let count = client.count("model", predicates.clone()).await.unwrap();
                assert_eq!(
                    count,
                    expected.len() as u64,
                    "step {step}: count {predicates:?}"
                );
                searches_nonempty += usize::from(!expected.is_empty());
                "search"
            }
        };
        *outcomes.entry(name).or_default() += 1;
    }
    // Finally the whole space, key by key.
    for key in 0..KEYS {
        check_get(&client, &mut model, &mut seen, key, OPERATIONS).await;
    }
    eprintln!("operations: {outcomes:?}; searches with results: {searches_nonempty}; objects at the end: {}", model.len());
    assert!(
        searches_nonempty >= 50,
        "the random searches exercise matching: {searches_nonempty}"
    );
    assert!(!model.is_empty());
    server.shutdown().await;
}
