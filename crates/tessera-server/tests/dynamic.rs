//! Dynamic spaces (docs/design.md §9) against an in-process standalone server: documents put,
//! merged, read and deleted; searches by value and by structure compared with a model of the
//! semantics written here (flattened paths, not the server's code); explain's shapes; shapes
//! surviving a restart; and bad input refused with nothing changed.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tessera_client::{
    Client, DocValue, Document, FormulaSpec, Funcall, Predicate, PredicateOp, SortOrder, Status,
    Value, WriteMode,
};
use tessera_protocol::SpaceChange;
use tessera_types::{PropertyKind, Shape};

const PAPERS: &str = "space papers dynamic key id dimensions 4 create 16 partitions";

fn doc(pairs: &[(&str, DocValue)]) -> Document {
    Document::new(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    )
}

fn nested(pairs: &[(&str, DocValue)]) -> DocValue {
    DocValue::Object(doc(pairs).properties)
}

fn text(s: &str) -> DocValue {
    DocValue::String(s.into())
}

async fn document(client: &Client, key: &str) -> Option<Document> {
    let record = client.get("papers", key).await.expect("get")?;
    match record.attributes.get("document") {
        Some(Value::Document(d)) => Some(d.clone()),
        other => panic!("a dynamic object holds a document, not {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_are_put_merged_read_and_deleted() {
    let mut server = TestServer::start().await;
    let client = server.client().await;
    client.add_space(PAPERS).await.unwrap();
    let dynamo = doc(&[
        ("title", text("Dynamo")),
        ("year", DocValue::Int(2007)),
        (
            "venue",
            nested(&[("name", text("SOSP")), ("city", text("Stevenson"))]),
        ),
        (
            "authors",
            DocValue::List(vec![text("DeCandia"), text("Vogels")]),
        ),
    ]);
    client
        .put_document("papers", "dynamo", dynamo.clone())
        .await
        .unwrap();
    assert_eq!(document(&client, "dynamo").await, Some(dynamo));

    // Merge patch: a property replaced, one removed by null, a nested one merged, one added.
    client
        .put_document(
            "papers",
            "dynamo",
            doc(&[
                ("year", DocValue::Null),
                (
                    "venue",
                    nested(&[("city", DocValue::Null), ("year", DocValue::Int(2007))]),
                ),
                ("pages", DocValue::Int(14)),
                ("title", text("Dynamo: Amazon's key-value store")),
            ]),
        )
        .await
        .unwrap();
    let merged = doc(&[
        ("title", text("Dynamo: Amazon's key-value store")),
        (
            "venue",
            nested(&[("name", text("SOSP")), ("year", DocValue::Int(2007))]),
        ),
        (
            "authors",
            DocValue::List(vec![text("DeCandia"), text("Vogels")]),
        ),
        ("pages", DocValue::Int(14)),
    ]);
    assert_eq!(document(&client, "dynamo").await, Some(merged.clone()));

    // Conditions name paths; create-only refuses an existing key.
    let cond = |p: Predicate, patch: Document| {
        client.write(
            "papers",
            "dynamo",
            WriteMode::Upsert,
            vec![p],
            vec![Funcall::merge(patch)],
        )
    };
    assert_eq!(
        status(
            cond(
                Predicate::equals("venue.name", "OSDI"),
                doc(&[("pages", DocValue::Int(1))])
            )
            .await
        ),
        Status::CmpFail
    );
    cond(
        Predicate::new("pages", PredicateOp::Range(10.into(), 20.into())),
        doc(&[("cited", DocValue::Bool(true))]),
    )
    .await
    .unwrap();
    assert_eq!(
        status(
            client
                .write(
                    "papers",
                    "dynamo",
                    WriteMode::CreateOnly,
                    vec![],
                    vec![Funcall::merge(doc(&[("x", DocValue::Int(1))]))],
                )
                .await
        ),
        Status::CmpFail
    );
    let mut expected = merged;
    expected
        .properties
        .insert("cited".into(), DocValue::Bool(true));
    assert_eq!(document(&client, "dynamo").await, Some(expected.clone()));

    // Documents and their shapes survive a restart; a search still finds them by structure.
    server.restart().await;
    let client = server.client().await;
    assert_eq!(document(&client, "dynamo").await, Some(expected));
    let found = client
        .search(
            "papers",
            vec![Predicate::new("cited", PredicateOp::Exists { or: vec![] })],
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 1);

    client.del("papers", "dynamo").await.unwrap();
    assert_eq!(document(&client, "dynamo").await, None);
    assert_eq!(client.count("papers", vec![]).await.unwrap(), 0);
    server.shutdown().await;
}

// ---- searches against a model -------------------------------------------------------------

/// A document as the model holds it: every path to a value that is not a nested document.
type Flat = BTreeMap<String, DocValue>;

/// Paths the generator draws from: some nested, some sharing axes of a 4-axis space.
const PATHS: [&str; 9] = [
    "title",
    "year",
    "pages",
    "doi",
    "editor",
    "venue.name",
    "venue.year",
    "isbn",
    "tags",
];

fn random_value(rng: &mut StdRng, path: &str) -> DocValue {
    // Mostly one kind per path, sometimes another: shapes then differ in kinds too.
    match (path, rng.random_range(0..10)) {
        ("tags", _) => DocValue::List(vec![text(["db", "kv", "os"][rng.random_range(0..3)])]),
        (_, 0) => text(["x", "y"][rng.random_range(0..2)]),
        (_, 1) => DocValue::Float(rng.random_range(0..8) as f64 / 2.0),
        ("title" | "doi" | "editor" | "venue.name" | "isbn", _) => {
            text(["a", "b", "c", "d"][rng.random_range(0..4)])
        }
        _ => DocValue::Int(rng.random_range(0..6)),
    }
}

fn random_flat(rng: &mut StdRng) -> Flat {
    let mut flat = Flat::new();
    for p in PATHS {
        if rng.random_bool(0.45) {
            let v = random_value(rng, p);
            flat.insert(p.to_owned(), v);
        }
    }
    flat
}

/// The model's flat document as a nested one.
fn unflatten(flat: &Flat) -> Document {
    let mut d = Document::default();
    for (path, v) in flat {
        match path.split_once('.') {
            None => {
                d.properties.insert(path.clone(), v.clone());
            }
            Some((parent, child)) => {
                let entry = d
                    .properties
                    .entry(parent.to_owned())
                    .or_insert_with(|| DocValue::Object(BTreeMap::new()));
                let DocValue::Object(o) = entry else {
                    unreachable!("the generator nests only under venue")
                };
                o.insert(child.to_owned(), v.clone());
            }
        }
    }
    d
}

/// The paths a flat document has, nested documents' parents included.
fn has(flat: &Flat, path: &str) -> bool {
    flat.contains_key(path) || flat.keys().any(|k| k.starts_with(&format!("{path}.")))
}

/// A number of either kind, as a rational the model compares exactly (values are halves).
fn number(v: &DocValue) -> Option<i64> {
    match v {
        DocValue::Int(i) => Some(i * 2),
        DocValue::Float(f) => Some((f * 2.0) as i64),
        _ => None,
    }
}

fn operand_number(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(i * 2),
        Value::Float(f) => Some((f * 2.0) as i64),
        _ => None,
    }
}

/// The model's verdict: what the predicate means, written from the documentation.
fn model_matches(flat: &Flat, p: &Predicate) -> bool {
    let value = flat.get(&p.attr);
    let cmp = |operand: &Value| -> Option<std::cmp::Ordering> {
        match (value?, operand) {
            (DocValue::String(a), Value::String(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
            (v, o) => Some(number(v)?.cmp(&operand_number(o)?)),
        }
    };
    use std::cmp::Ordering::*;
    match &p.op {
        PredicateOp::Exists { or } => has(flat, &p.attr) || or.iter().any(|o| has(flat, o)),
        PredicateOp::Missing => !has(flat, &p.attr),
        PredicateOp::Equals(v) => cmp(v) == Some(Equal),
        PredicateOp::LessThan(v) => cmp(v) == Some(Less),
        PredicateOp::GreaterEqual(v) => matches!(cmp(v), Some(Greater | Equal)),
        PredicateOp::Range(lo, hi) => {
            matches!(cmp(lo), Some(Greater | Equal)) && matches!(cmp(hi), Some(Less | Equal))
        }
        PredicateOp::Contains(Value::String(s)) => match value {
            Some(DocValue::List(items)) => items.contains(&text(s.as_str().expect("text"))),
            Some(DocValue::String(t)) => t.contains(s.as_str().expect("text")),
            _ => false,
        },
        other => panic!("the model does not know {other:?}"),
    }
}

fn random_predicate(rng: &mut StdRng) -> Predicate {
    let path = PATHS[rng.random_range(0..PATHS.len())];
    let other = ["venue", "doi", "editor", "isbn"][rng.random_range(0..4)];
    let operand = match rng.random_range(0..3) {
        0 => Value::String(["a", "b", "x"][rng.random_range(0..3)].into()),
        1 => Value::Int(rng.random_range(0..6)),
        _ => Value::Float(rng.random_range(0..8) as f64 / 2.0),
    };
    let op = match rng.random_range(0..8) {
        0 => PredicateOp::Equals(operand),
        1 => PredicateOp::LessThan(operand),
        2 => PredicateOp::GreaterEqual(operand),
        3 => PredicateOp::Range(Value::Int(1), Value::Float(3.5)),
        4 => PredicateOp::Exists { or: vec![] },
        5 => PredicateOp::Exists {
            or: vec![other.to_owned()],
        },
        6 => PredicateOp::Missing,
        _ => PredicateOp::Contains(Value::from("db")),
    };
    Predicate::new(path, op)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_by_value_and_structure_equal_the_model() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.add_space(PAPERS).await.unwrap();
    // Documents are placed by three formulas: the default (the unispace), one overlay of
    // title, and two overlays (year weighted 4 to venue.name's 1, and title, which the
    // formulas share: a search reading it for one formula skips the other's documents).
    let by_title = FormulaSpec::parse(Some("by_title"), &["title"]).unwrap();
    let two = FormulaSpec::parse(None, &["year*4,venue.name", "title"]).unwrap();
    assert_eq!(
        client.add_formula("papers", by_title).await.unwrap(),
        "by_title"
    );
    let two = client.add_formula("papers", two).await.unwrap();
    assert_eq!(two, "year*4,venue.name | title");
    // And pointer overlays: stubs of year, and of venue.name with title; a search reading
    // them follows each stub to its document.
    let pointers = FormulaSpec::parse(None, &["&year", "&venue.name,title"]).unwrap();
    let pointers = client.add_formula("papers", pointers).await.unwrap();
    assert_eq!(pointers, "&year | &venue.name,title");
    let formulas = [String::new(), "by_title".to_owned(), two, pointers];
    let mut rng = StdRng::seed_from_u64(0x0d0c);
    let mut model: BTreeMap<String, Flat> = BTreeMap::new();
    let mut formula_of: BTreeMap<String, String> = BTreeMap::new();
    for n in 0..160 {
        let key = format!("p{n}");
        let flat = random_flat(&mut rng);
        client
            .put_document_with_formula("papers", key.as_str(), unflatten(&flat), &formulas[n % 4])
            .await
            .unwrap();
        formula_of.insert(key.clone(), formulas[n % 4].clone());
        model.insert(key, flat);
    }
    // Change some documents' shapes by merge (removing and adding properties), delete some.
    for n in (0..160).step_by(7) {
        let key = format!("p{n}");
        let flat = model.get_mut(&key).expect("put above");
        let removed = PATHS[rng.random_range(0..PATHS.len())];
        let added = PATHS[rng.random_range(0..PATHS.len())];
        // Removing a nested path's parent removes the children: keep the model flat-exact
        // by removing only top-level paths.
        let mut patch = Document::default();
        if !removed.contains('.') && removed != added {
            patch.properties.insert(removed.into(), DocValue::Null);
            flat.remove(removed);
        }
        if !added.contains('.') {
            let v = random_value(&mut rng, added);
            patch.properties.insert(added.into(), v.clone());
            flat.insert(added.into(), v);
        }
        // Every other one moves to another formula: it leaves its subspaces for others.
        if n % 2 == 0 {
            client
                .put_document_with_formula("papers", key.as_str(), patch, &formulas[(n + 1) % 4])
                .await
                .unwrap();
            formula_of.insert(key.clone(), formulas[(n + 1) % 4].clone());
        } else {
            client
                .put_document("papers", key.as_str(), patch)
                .await
                .unwrap();
        }
    }
    for n in (3..160).step_by(11) {
        let key = format!("p{n}");
        client.del("papers", key.as_str()).await.unwrap();
        model.remove(&key);
    }
    let (mut nonempty, mut followed) = (0, 0);
    for _ in 0..150 {
        let predicates: Vec<Predicate> = (0..rng.random_range(1..=3))
            .map(|_| random_predicate(&mut rng))
            .collect();
        let wanted: BTreeSet<String> = model
            .iter()
            .filter(|(_, flat)| predicates.iter().all(|p| model_matches(flat, p)))
            .map(|(k, _)| k.clone())
            .collect();
        let found: Vec<String> = client
            .search("papers", predicates.clone())
            .await
            .unwrap()
            .into_iter()
            .map(|r| {
                let Some(k) = (match &r.key {
                    Value::String(k) => k.as_str().map(str::to_owned),
                    _ => None,
                }) else {
                    panic!("a text key, not {}", r.key)
                };
                // The whole document, also when a pointer overlay found it.
                if let Some(flat) = model.get(&k) {
                    let document = r.attributes.get("document");
                    assert_eq!(document, Some(&Value::Document(unflatten(flat))), "{k}");
                }
                k
            })
            .collect();
        let found_set: BTreeSet<String> = found.iter().cloned().collect();
        assert_eq!(
            found.len(),
            found_set.len(),
            "a key twice for {predicates:?}"
        );
        assert_eq!(found_set, wanted, "search {predicates:?}");
        assert_eq!(
            client.count("papers", predicates.clone()).await.unwrap(),
            wanted.len() as u64
        );
        // Explain reads only shapes that can hold matches, and every matching document's
        // shape is among them.
        let e = client.explain("papers", predicates.clone()).await.unwrap();
        let read: BTreeSet<&Shape> = e.shapes.iter().collect();
        for key in &wanted {
            let shape = unflatten(&model[key]).shape_in(&formula_of[key]);
            assert!(
                read.contains(&shape),
                "{key}'s shape unread for {predicates:?}"
            );
        }
        let structural: Vec<&Predicate> = predicates
            .iter()
            .filter(|p| matches!(p.op, PredicateOp::Exists { .. } | PredicateOp::Missing))
            .collect();
        for shape in &e.shapes {
            let flat: Flat = shape
                .properties
                .iter()
                .filter(|(_, k)| *k != PropertyKind::Object)
                .map(|(p, _)| (p.clone(), DocValue::Null))
                .collect();
            assert!(
                structural.iter().all(|p| model_matches(&flat, p)),
                "shape {shape} read for {predicates:?}"
            );
        }
        // One part per subspace read; together they read every formula once. A part reads
        // only shapes of its formulas' documents.
        for shape in &e.shapes {
            assert!(formulas.contains(&shape.formula), "{shape:?}");
        }
        let mut read: Vec<&String> = e.parts.iter().flat_map(|p| &p.formulas).collect();
        read.sort();
        let mut all: Vec<&String> = formulas.iter().collect();
        all.sort();
        assert_eq!(read, all, "{predicates:?}");
        assert_eq!(
            e.regions_contacted,
            e.parts.iter().map(|p| p.regions_contacted).sum::<u64>()
        );
        nonempty += usize::from(!wanted.is_empty());
        followed += usize::from(e.parts.iter().any(|p| p.pointer) && !wanted.is_empty());
    }
    // The searches were not vacuous, and some read a pointer overlay and found documents.
    assert!(nonempty > 40, "only {nonempty} searches matched anything");
    assert!(followed > 10, "only {followed} searches followed pointers");
    // Sorted: only documents with a number or a string at the path rank, numbers first by
    // value, then strings, ties by key.
    for (path, order, limit) in [
        ("year", SortOrder::Ascending, 9),
        ("year", SortOrder::Descending, 9),
        ("title", SortOrder::Ascending, 200),
        ("venue.year", SortOrder::Descending, 4),
    ] {
        let rank = |flat: &Flat| -> Option<(u8, i64, String)> {
            match flat.get(path)? {
                DocValue::String(s) => Some((1, 0, s.clone())),
                v => number(v).map(|n| (0, n, String::new())),
            }
        };
        let mut wanted: Vec<((u8, i64, String), String)> = model
            .iter()
            .filter_map(|(k, flat)| Some((rank(flat)?, k.clone())))
            .collect();
        wanted.sort();
        if order == SortOrder::Descending {
            wanted.reverse();
        }
        wanted.truncate(limit);
        let found: Vec<String> = client
            .sorted_search("papers", vec![], path, limit as u32, order)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.key.to_string().trim_matches('"').to_owned())
            .collect();
        let wanted: Vec<String> = wanted.into_iter().map(|(_, k)| k).collect();
        assert_eq!(found, wanted, "sorted by {path} {order:?}");
    }
    server.shutdown().await;
}

// ---- bad input ------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_documents_and_predicates_change_nothing() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.add_space(PAPERS).await.unwrap();
    client.add_space(HOTELS).await.unwrap();
    client
        .put_document("papers", "ok", doc(&[("title", text("kept"))]))
        .await
        .unwrap();
    // A merge whose result would pass the shape's limit (each half is within it) is refused
    // for its size, and the stored document stays as it was.
    let half = |from: i64| {
        Document::new(
            (from..from + 30)
                .map(|i| (format!("{i:0>300}"), DocValue::Int(i)))
                .collect(),
        )
    };
    client
        .put_document("papers", "grows", half(0))
        .await
        .unwrap();
    let got = error(client.put_document("papers", "grows", half(30)).await);
    assert_eq!(got.0, Status::TooLarge, "{}", got.1);
    let kept = client.get("papers", "grows").await.unwrap().expect("kept");
    assert_eq!(
        kept.attributes.get("document"),
        Some(&Value::Document(half(0)))
    );
    let before = snapshot(&client, "papers").await;
    let config_before = client.refresh().await.unwrap();
    let shapes_before = config_before.space("papers").unwrap().shapes.clone();

    let mut deep = DocValue::Int(1);
    for _ in 0..9 {
        deep = nested(&[("n", deep)]);
    }
    let many: Document = Document::new(
        (0..300)
            .map(|i| (format!("p{i}"), DocValue::Int(i)))
            .collect(),
    );
    let huge = doc(&[("blob", text(&"x".repeat(1_100_000)))]);
    // 60 paths of 300 bytes: within the property count, over the shape's 16 KiB.
    let long_names: Document = Document::new(
        (0..60)
            .map(|i| (format!("{i:0>300}"), DocValue::Int(i)))
            .collect(),
    );
    let cases: Vec<(&str, Document, Status)> = vec![
        ("too deep", doc(&[("n", deep)]), Status::TooLarge),
        ("too many properties", many, Status::TooLarge),
        ("over the size limit", huge, Status::TooLarge),
        ("a shape over its limit", long_names, Status::TooLarge),
        (
            "a dotted name",
            doc(&[("a.b", DocValue::Int(1))]),
            Status::WrongType,
        ),
        (
            "an empty name",
            doc(&[("", DocValue::Int(1))]),
            Status::WrongType,
        ),
        (
            "NaN",
            doc(&[("x", DocValue::Float(f64::NAN))]),
            Status::WrongType,
        ),
        (
            "the key's name",
            doc(&[("id", text("k"))]),
            Status::WrongType,
        ),
    ];
    for (what, d, wanted) in cases {
        let got = error(client.put_document("papers", "bad", d).await);
        assert_eq!(got.0, wanted, "{what}: {}", got.1);
    }
    // Predicates: a bad path, an operand that cannot be a coordinate, structure on a typed
    // space.
    for (space, p, wanted) in [
        (
            "papers",
            Predicate::equals("a..b", 1i64),
            Status::BadPredicate,
        ),
        (
            "papers",
            Predicate::equals("x", Value::Map(BTreeMap::new())),
            Status::WrongType,
        ),
        (
            "papers",
            Predicate::equals("a.".repeat(300), 1i64),
            Status::TooLarge,
        ),
        (
            "hotels",
            Predicate::new("city", PredicateOp::Missing),
            Status::BadPredicate,
        ),
    ] {
        let got = error(client.search(space, vec![p.clone()]).await);
        assert_eq!(got.0, wanted, "{p:?}: {}", got.1);
    }
    assert_eq!(
        status(
            client
                .sorted_search("papers", vec![], "a..b", 3, SortOrder::Ascending)
                .await
        ),
        Status::BadPredicate
    );
    // Alterations: a dynamic space's subspaces do not change, a typed space has no shapes,
    // a shape from the network is checked.
    let bad_shape = Shape {
        formula: String::new(),
        properties: vec![
            ("b".into(), PropertyKind::Int),
            ("a".into(), PropertyKind::Int),
        ],
    };
    for (space, change) in [
        (
            "papers",
            SpaceChange::AddSubspace {
                attributes: vec!["title".into()],
            },
        ),
        ("papers", SpaceChange::DropSubspace { subspace: 1 }),
        ("papers", SpaceChange::SetAdapt { on: true }),
        ("papers", SpaceChange::AddShape(bad_shape)),
        ("hotels", SpaceChange::AddShape(Shape::default())),
        // Formulas: more properties in an overlay than the space's 4 dimensions, a weight
        // of 0, a property twice, none at all, a bad path, one on a typed space, and
        // readying a formula never registered.
        ("papers", formula(&["a,b,c,d,e"])),
        ("papers", formula(&["a*0"])),
        ("papers", formula(&["a,a"])),
        ("papers", formula(&[])),
        ("papers", formula(&["a..b"])),
        ("hotels", formula(&["city"])),
        ("papers", SpaceChange::FormulaReady("never".into())),
    ] {
        assert_eq!(
            status(client.alter_space(space, change.clone()).await),
            Status::BadAlteration,
            "{change:?}"
        );
    }
    // Puts that name a formula the space does not have, or that change a formula other than
    // by a put.
    let named = client
        .put_document_with_formula("papers", "ok", doc(&[("title", text("x"))]), "never")
        .await;
    assert_eq!(status(named), Status::WrongType);
    let append = client
        .write(
            "papers",
            "ok",
            WriteMode::Upsert,
            vec![],
            vec![Funcall::new(
                "formula",
                tessera_client::FuncallOp::StringAppend,
                "x",
            )],
        )
        .await;
    assert_eq!(status(append), Status::WrongType);
    assert_eq!(snapshot(&client, "papers").await, before);
    let config_after = client.refresh().await.unwrap();
    assert_eq!(config_after.space("papers").unwrap().shapes, shapes_before);
    assert_eq!(
        config_after.space("papers").unwrap().schema,
        config_before.space("papers").unwrap().schema
    );
    assert_serving(server.addr()).await;
    server.shutdown().await;
}

fn formula(overlays: &[&str]) -> SpaceChange {
    SpaceChange::AddFormula(FormulaSpec::parse(None, overlays).expect("parses"))
}

// ---- in a cluster -----------------------------------------------------------------------------

/// Three servers and a coordinator: documents of new shapes are stored only once every server
/// knows their shapes, so a client that planned its search before they were registered is told
/// to plan again and finds them; the space keeps serving, with every acknowledged document,
/// after a server stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_registers_shapes_before_it_stores_their_documents() {
    use common::cluster::Cluster;
    let mut cluster = Cluster::start(3).await;
    let writer = cluster.client().await;
    cluster
        .add_space(
            &writer,
            "space papers dynamic key id dimensions 4 create 8 partitions tolerate 1 failure",
        )
        .await;
    // A reader whose configuration predates every shape.
    let reader = cluster.client().await;
    reader.refresh().await.unwrap();
    let mut rng = StdRng::seed_from_u64(0xc105);
    let mut model: BTreeMap<String, Flat> = BTreeMap::new();
    let mut put = |key: String, flat: Flat| {
        model.insert(key.clone(), flat.clone());
        (key, unflatten(&flat))
    };
    let mut batch = Vec::new();
    for n in 0..40 {
        let flat = random_flat(&mut rng);
        batch.push(put(format!("p{n}"), flat));
    }
    for (key, d) in &batch {
        writer
            .put_document("papers", key.as_str(), d.clone())
            .await
            .unwrap();
    }
    let config = writer.refresh().await.unwrap();
    let space = config.space("papers").unwrap();
    assert!(!space.shapes.is_empty());
    assert!(
        space.shape_entries.iter().all(|e| e.ready),
        "every shape a stored document has is ready"
    );
    let check = |model: BTreeMap<String, Flat>, predicates: Vec<Predicate>| {
        let reader = &reader;
        async move {
            let wanted: BTreeSet<String> = model
                .iter()
                .filter(|(_, flat)| predicates.iter().all(|p| model_matches(flat, p)))
                .map(|(k, _)| k.clone())
                .collect();
            let found: BTreeSet<String> = reader
                .search("papers", predicates.clone())
                .await
                .unwrap()
                .into_iter()
                .map(|r| {
                    let key = r.key.to_string().trim_matches('"').to_owned();
                    // Whole documents, also those found through a pointer overlay's stubs.
                    let document = Value::Document(unflatten(&model[&key]));
                    assert_eq!(r.attributes.get("document"), Some(&document), "{key}");
                    key
                })
                .collect();
            assert_eq!(found, wanted, "search {predicates:?}");
        }
    };
    check(model.clone(), vec![]).await;
    check(
        model.clone(),
        vec![Predicate::new("doi", PredicateOp::Exists { or: vec![] })],
    )
    .await;
    check(
        model.clone(),
        vec![
            Predicate::new("editor", PredicateOp::Missing),
            Predicate::new("year", PredicateOp::GreaterEqual(2.into())),
        ],
    )
    .await;

    // A formula registered while the reader's configuration predates it: its documents live
    // in its overlays only, and the reader, told its plan is stale, plans again and finds
    // them, through a part per subspace it reads.
    let id = writer
        .add_formula(
            "papers",
            FormulaSpec::parse(Some("by_year"), &["year*2,title"]).unwrap(),
        )
        .await
        .unwrap();
    let config = writer.refresh().await.unwrap();
    assert!(
        config
            .space("papers")
            .unwrap()
            .formula_entry(&id)
            .unwrap()
            .ready
    );
    for n in 50..60 {
        let key = format!("p{n}");
        let flat = random_flat(&mut rng);
        model.insert(key.clone(), flat.clone());
        writer
            .put_document_with_formula("papers", key.as_str(), unflatten(&flat), &id)
            .await
            .unwrap();
    }
    // Some earlier documents move to the formula, leaving the unispace.
    for n in (0..40).step_by(5) {
        writer
            .put_document_with_formula("papers", format!("p{n}").as_str(), Document::default(), &id)
            .await
            .unwrap();
    }
    check(model.clone(), vec![]).await;
    check(
        model.clone(),
        vec![Predicate::new("year", PredicateOp::GreaterEqual(2.into()))],
    )
    .await;
    assert_eq!(
        reader.count("papers", vec![]).await.unwrap(),
        model.len() as u64
    );

    // A formula of pointer overlays, again registered behind the reader's back: searches
    // that read them get stubs from the servers and the documents from their point leaders,
    // whether the stubs decide the predicates (title) or not (year, doi).
    let pointers = writer
        .add_formula(
            "papers",
            FormulaSpec::parse(Some("by_title_ptr"), &["&title", "&venue.name,year"]).unwrap(),
        )
        .await
        .unwrap();
    for n in 60..75 {
        let key = format!("p{n}");
        let flat = random_flat(&mut rng);
        model.insert(key.clone(), flat.clone());
        writer
            .put_document_with_formula("papers", key.as_str(), unflatten(&flat), &pointers)
            .await
            .unwrap();
    }
    for n in (1..40).step_by(6) {
        writer
            .put_document_with_formula(
                "papers",
                format!("p{n}").as_str(),
                Document::default(),
                &pointers,
            )
            .await
            .unwrap();
    }
    for predicates in [
        vec![],
        vec![Predicate::new("title", PredicateOp::Exists { or: vec![] })],
        vec![Predicate::new("year", PredicateOp::GreaterEqual(2.into()))],
        vec![
            Predicate::new("title", PredicateOp::Exists { or: vec![] }),
            Predicate::new("doi", PredicateOp::Missing),
        ],
    ] {
        check(model.clone(), predicates).await;
    }
    let e = reader
        .explain(
            "papers",
            vec![Predicate::new("title", PredicateOp::Exists { or: vec![] })],
        )
        .await
        .unwrap();
    assert!(
        e.parts
            .iter()
            .any(|p| p.pointer && p.formulas.contains(&pointers)),
        "{e:?}"
    );
    assert_eq!(
        reader.count("papers", vec![]).await.unwrap(),
        model.len() as u64
    );

    // One server stops; documents of shapes never seen before are still stored (the
    // coordinators wait for the live servers only) and found.
    let stopped = cluster.servers.pop().expect("three servers");
    stopped.shutdown().await;
    for n in 40..50 {
        let key = format!("p{n}");
        let mut flat = random_flat(&mut rng);
        flat.insert(format!("rare{n}"), DocValue::Int(n));
        model.insert(key.clone(), flat.clone());
        writer
            .put_document("papers", key.as_str(), unflatten(&flat))
            .await
            .unwrap();
    }
    check(model.clone(), vec![]).await;
    check(
        model.clone(),
        vec![Predicate::new(
            "rare45",
            PredicateOp::Exists {
                or: vec!["rare41".into()],
            },
        )],
    )
    .await;
    // A cluster client's sorted search ranks what the servers return as a server would.
    let mut by_year: Vec<(i64, String)> = model
        .iter()
        .filter_map(|(k, flat)| Some((number(flat.get("year")?)?, k.clone())))
        .collect();
    by_year.sort();
    by_year.truncate(5);
    let found: Vec<String> = reader
        .sorted_search("papers", vec![], "year", 5, SortOrder::Ascending)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.key.to_string().trim_matches('"').to_owned())
        .collect();
    assert_eq!(
        found,
        by_year.into_iter().map(|(_, k)| k).collect::<Vec<_>>()
    );
    for (key, flat) in &model {
        assert_eq!(
            document_in(&writer, key).await,
            Some(unflatten(flat)),
            "{key}"
        );
    }
}

async fn document_in(client: &Client, key: &str) -> Option<Document> {
    let record = client.get("papers", key).await.expect("get")?;
    match record.attributes.get("document") {
        Some(Value::Document(d)) => Some(d.clone()),
        other => panic!("a document, not {other:?}"),
    }
}
