//! Every operation of the client API against an in-process server, with exact expected
//! results: spaces, key operations, every atomic family and its failures, every predicate kind
//! (compared with brute-force filtering of what was inserted), count, sorted search, group
//! delete, explain (regions per docs/design.md §8's CR formula), pipelining, versions, restart.
//!
//! Versions: the contract is that a key's versions grow strictly with every update and are
//! never used again after a delete (the point leader's clock issues them); the tests assert
//! that, not particular numbers.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use tessera_client::{
    Client, Funcall, FuncallOp, NumOp, Predicate, PredicateOp, Record, SortOrder, Status, Value,
    Version,
};

// ---- spaces ------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_list_and_remove_spaces() {
    let server = TestServer::start().await;
    let client = server.client().await;
    assert!(client.list_spaces().await.unwrap().is_empty());

    client.add_space(HOTELS).await.unwrap();
    client
        .add_space("space cube key int id attributes int x, int y subspace x, y")
        .await
        .unwrap();
    let spaces = client.list_spaces().await.unwrap();
    let names: Vec<_> = spaces.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["hotels", "cube"]);
    let hotels = &spaces[0];
    let attributes: Vec<_> = hotels.attributes.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        attributes,
        [
            "id", "city", "stars", "price", "address", "rating", "notes", "tags", "floors",
            "rooms", "labels"
        ]
    );
    assert_eq!(hotels.partitions, 64);
    assert_eq!(hotels, &tessera_types::parse_space(HOTELS).unwrap());
    assert_eq!(
        client.describe_space("cube").await.unwrap().key().name,
        "id"
    );

    for n in 0..10i64 {
        client
            .put("hotels", format!("h{n}"), [("stars", n)])
            .await
            .unwrap();
    }
    assert_eq!(client.count("hotels", vec![]).await.unwrap(), 10);

    client.rm_space("hotels").await.unwrap();
    let names: Vec<_> = client
        .list_spaces()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["cube"]);
    assert_eq!(
        status(client.get("hotels", "h1").await),
        Status::UnknownSpace
    );
    assert_eq!(
        status(client.put("hotels", "h1", [("stars", 1i64)]).await),
        Status::UnknownSpace
    );
    assert_eq!(
        status(client.search("hotels", vec![]).await),
        Status::UnknownSpace
    );
    assert_eq!(
        status(client.count("hotels", vec![]).await),
        Status::UnknownSpace
    );
    assert_eq!(
        status(client.del("hotels", "h1").await),
        Status::UnknownSpace
    );
    assert_eq!(
        status(client.rm_space("hotels").await),
        Status::UnknownSpace
    );

    // Another client, whose configuration still listed the space, is told the same.
    let other = server.client().await;
    assert_eq!(
        status(other.get("hotels", "h1").await),
        Status::UnknownSpace
    );

    client.add_space(HOTELS).await.unwrap();
    assert_eq!(client.count("hotels", vec![]).await.unwrap(), 0);
    assert!(client.search("hotels", vec![]).await.unwrap().is_empty());
    assert_eq!(client.get("hotels", "h1").await.unwrap(), None);
    assert_eq!(status(client.add_space(HOTELS).await), Status::SpaceExists);
    server.shutdown().await;
}

// ---- keys --------------------------------------------------------------------------------

fn defaults() -> BTreeMap<String, Value> {
    [
        ("city", s("")),
        ("stars", i(0)),
        ("price", i(0)),
        ("address", s("")),
        ("rating", Value::Float(0.0)),
        ("notes", list([])),
        ("tags", string_set([])),
        ("floors", int_set([])),
        ("rooms", map::<Value, Value>([])),
        ("labels", map::<Value, Value>([])),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

fn with(
    mut attributes: BTreeMap<String, Value>,
    changes: &[(&str, Value)],
) -> BTreeMap<String, Value> {
    for (k, v) in changes {
        assert!(
            attributes.insert((*k).to_owned(), v.clone()).is_some(),
            "{k} is an attribute"
        );
    }
    attributes
}

async fn hotels() -> (TestServer, Client) {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.add_space(HOTELS).await.unwrap();
    (server, client)
}

async fn attrs_in(client: &Client, space: &str, key: &str) -> BTreeMap<String, Value> {
    client
        .get(space, key)
        .await
        .unwrap()
        .expect("the object exists")
        .attributes
}

async fn attrs(client: &Client, key: &str) -> BTreeMap<String, Value> {
    client
        .get("hotels", key)
        .await
        .unwrap()
        .expect("the object exists")
        .attributes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_merges_and_new_objects_take_defaults() {
    let (server, client) = hotels().await;
    assert_eq!(client.get("hotels", "h1").await.unwrap(), None);

    client
        .put("hotels", "h1", [("city", s("Ithaca")), ("stars", i(4))])
        .await
        .unwrap();
    let got = client.get("hotels", "h1").await.unwrap().unwrap();
    assert_eq!(got.key, s("h1"));
    assert!(got.version > Version::NONE);
    let first = got.version;
    assert_eq!(
        got.attributes,
        with(defaults(), &[("city", s("Ithaca")), ("stars", i(4))])
    );

    // A put of some attributes keeps the others.
    client
        .put(
            "hotels",
            "h1",
            [("price", i(120)), ("tags", string_set(["pool", "wifi"]))],
        )
        .await
        .unwrap();
    let got = client.get("hotels", "h1").await.unwrap().unwrap();
    assert!(got.version > first, "every update raises the version");
    let second = got.version;
    let expected = with(
        defaults(),
        &[
            ("city", s("Ithaca")),
            ("stars", i(4)),
            ("price", i(120)),
            ("tags", string_set(["pool", "wifi"])),
        ],
    );
    assert_eq!(got.attributes, expected);

    // An empty put creates an object of defaults, and bumps the version of an existing one.
    client.put::<&str, Value>("hotels", "h2", []).await.unwrap();
    assert_eq!(attrs(&client, "h2").await, defaults());
    client.put::<&str, Value>("hotels", "h1", []).await.unwrap();
    let got = client.get("hotels", "h1").await.unwrap().unwrap();
    assert!(got.version > second, "an empty put is an update too");
    assert_eq!(got.attributes, expected);

    // Every type round-trips; an int is accepted for a float, a list for a set.
    let full = [
        ("address", s("1 Main St")),
        ("rating", Value::Int(3)),
        ("notes", list([s("b"), s("a"), s("b")])),
        ("floors", list([i(3), i(1), i(3)])),
        ("rooms", map([("single", 2i64), ("suite", 1)])),
        ("labels", map([("en", "Inn")])),
    ];
    client.put("hotels", "h3", full.clone()).await.unwrap();
    let got = attrs(&client, "h3").await;
    assert_eq!(got["rating"], Value::Float(3.0));
    assert_eq!(got["notes"], list([s("b"), s("a"), s("b")]));
    assert_eq!(got["floors"], int_set([1, 3]));
    assert_eq!(got["rooms"], map([("single", 2i64), ("suite", 1)]));
    assert_eq!(got["labels"], map([("en", "Inn")]));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_writes_and_deletes() {
    let (server, client) = hotels().await;

    // put_if_not_exist
    client
        .put_if_not_exist("hotels", "h1", [("stars", i(3))])
        .await
        .unwrap();
    let created = client.get("hotels", "h1").await.unwrap().unwrap().version;
    assert_eq!(
        status(
            client
                .put_if_not_exist("hotels", "h1", [("stars", i(5))])
                .await
        ),
        Status::CmpFail
    );
    assert_eq!(attrs(&client, "h1").await["stars"], i(3));

    // cond_put: absent, false, true
    let stars_is = |n: i64| vec![Predicate::equals("stars", n)];
    assert_eq!(
        status(
            client
                .cond_put("hotels", "nope", stars_is(3), [("price", i(1))])
                .await
        ),
        Status::NotFound
    );
    assert_eq!(client.get("hotels", "nope").await.unwrap(), None);
    assert_eq!(
        status(
            client
                .cond_put("hotels", "h1", stars_is(4), [("price", i(1))])
                .await
        ),
        Status::CmpFail
    );
    // Refused writes change nothing, not even the version.
    let got = client.get("hotels", "h1").await.unwrap().unwrap();
    assert_eq!((got.version, &got.attributes["price"]), (created, &i(0)));
    client
        .cond_put("hotels", "h1", stars_is(3), [("price", i(99))])
        .await
        .unwrap();
    let got = client.get("hotels", "h1").await.unwrap().unwrap();
    assert_eq!(got.attributes["price"], i(99));
    assert!(got.version > created);
    // Several conditions must all hold.
    let both = vec![
        Predicate::equals("stars", 3i64),
        Predicate::new("price", PredicateOp::LessThan(i(50))),
    ];
    assert_eq!(
        status(
            client
                .cond_put("hotels", "h1", both, [("price", i(1))])
                .await
        ),
        Status::CmpFail
    );
    assert_eq!(attrs(&client, "h1").await["price"], i(99));

    // cond_put_or_create: creates when absent (conditions ignored), checks them otherwise.
    client
        .cond_put_or_create("hotels", "h2", stars_is(5), [("stars", i(2))])
        .await
        .unwrap();
    assert_eq!(attrs(&client, "h2").await["stars"], i(2));
    assert_eq!(
        status(
            client
                .cond_put_or_create("hotels", "h2", stars_is(5), [("stars", i(1))])
                .await
        ),
        Status::CmpFail
    );
    client
        .cond_put_or_create("hotels", "h2", stars_is(2), [("stars", i(1))])
        .await
        .unwrap();
    assert_eq!(attrs(&client, "h2").await["stars"], i(1));

    // del
    let deleted = client.get("hotels", "h2").await.unwrap().unwrap().version;
    client.del("hotels", "h2").await.unwrap();
    assert_eq!(client.get("hotels", "h2").await.unwrap(), None);
    assert_eq!(status(client.del("hotels", "h2").await), Status::NotFound);
    // A deleted key starts again with defaults, and never with a version it had before.
    client
        .put("hotels", "h2", [("city", s("Oslo"))])
        .await
        .unwrap();
    let got = client.get("hotels", "h2").await.unwrap().unwrap();
    assert!(got.version > deleted, "{:?} after {deleted:?}", got.version);
    assert_eq!(got.attributes, with(defaults(), &[("city", s("Oslo"))]));

    // cond_del
    assert_eq!(
        status(client.cond_del("hotels", "h1", stars_is(4)).await),
        Status::CmpFail
    );
    assert!(client.get("hotels", "h1").await.unwrap().is_some());
    assert_eq!(
        status(client.cond_del("hotels", "nope", stars_is(4)).await),
        Status::NotFound
    );
    client.cond_del("hotels", "h1", stars_is(3)).await.unwrap();
    assert_eq!(client.get("hotels", "h1").await.unwrap(), None);
    assert_eq!(client.count("hotels", vec![]).await.unwrap(), 1);
    server.shutdown().await;
}

// ---- atomic operations -----------------------------------------------------------------

fn num(attr: &str, op: NumOp, arg: impl Into<Value>) -> Funcall {
    Funcall::new(attr, FuncallOp::Num(op), arg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_numbers() {
    let (server, client) = hotels().await;
    client
        .put(
            "hotels",
            "h",
            [("price", i(100)), ("rating", Value::Float(2.0))],
        )
        .await
        .unwrap();
    let steps = [
        (NumOp::Add, 5, 105),
        (NumOp::Sub, 10, 95),
        (NumOp::Mul, 3, 285),
        (NumOp::Div, 4, 71),
        (NumOp::Mod, 10, 1),
        (NumOp::Or, 6, 7),
        (NumOp::And, 5, 5),
        (NumOp::Xor, 3, 6),
        (NumOp::Min, 2, 2),
        (NumOp::Max, 40, 40),
        (NumOp::Sub, 50, -10),
        (NumOp::Div, 3, -3),
        (NumOp::Mod, 2, -1),
        (NumOp::Min, -7, -7),
    ];
    let mut last = client.get("hotels", "h").await.unwrap().unwrap().version;
    for (op, arg, expected) in steps {
        client
            .atomic("hotels", "h", vec![num("price", op, arg)])
            .await
            .unwrap();
        let got = client.get("hotels", "h").await.unwrap().unwrap();
        assert_eq!(got.attributes["price"], i(expected), "after {op:?} {arg}");
        assert!(got.version > last, "after {op:?} {arg}");
        last = got.version;
    }
    // Floats (an int argument is accepted for a float attribute).
    for (op, arg, expected) in [
        (NumOp::Add, 1.5, 3.5),
        (NumOp::Mul, 2.0, 7.0),
        (NumOp::Div, 4.0, 1.75),
        (NumOp::Sub, 2.0, -0.25),
    ] {
        client
            .atomic("hotels", "h", vec![num("rating", op, arg)])
            .await
            .unwrap();
        assert_eq!(
            attrs(&client, "h").await["rating"],
            Value::Float(expected),
            "after {op:?} {arg}"
        );
    }
    client
        .atomic("hotels", "h", vec![num("rating", NumOp::Add, 1i64)])
        .await
        .unwrap();
    assert_eq!(attrs(&client, "h").await["rating"], Value::Float(0.75));

    // Several funcalls in one update, applied in order.
    client
        .atomic(
            "hotels",
            "h",
            vec![
                Funcall::set("price", 10i64),
                num("price", NumOp::Mul, 3i64),
                num("stars", NumOp::Add, 2i64),
            ],
        )
        .await
        .unwrap();
    let got = attrs(&client, "h").await;
    assert_eq!((&got["price"], &got["stars"]), (&i(30), &i(2)));

    // An atomic operation needs an existing object.
    assert_eq!(
        status(
            client
                .atomic("hotels", "absent", vec![num("price", NumOp::Add, 1i64)])
                .await
        ),
        Status::NotFound
    );
    assert_eq!(client.get("hotels", "absent").await.unwrap(), None);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_failures_change_nothing() {
    let (server, client) = hotels().await;
    client
        .put(
            "hotels",
            "h",
            [
                ("price", i(i64::MAX)),
                ("stars", i(i64::MIN)),
                ("city", s("Rome")),
            ],
        )
        .await
        .unwrap();
    let before = client.get("hotels", "h").await.unwrap().unwrap();

    let cmp_fail = [
        num("price", NumOp::Add, 1i64),
        num("price", NumOp::Mul, 2i64),
        num("stars", NumOp::Sub, 1i64),
        num("stars", NumOp::Div, -1i64),
        num("stars", NumOp::Mod, -1i64),
        num("price", NumOp::Div, 0i64),
        num("price", NumOp::Mod, 0i64),
        num("rating", NumOp::Div, 0.0), // 0/0 is NaN
    ];
    for f in &cmp_fail {
        assert_eq!(
            status(client.atomic("hotels", "h", vec![f.clone()]).await),
            Status::CmpFail,
            "{f:?}"
        );
    }
    // Map values overflow too.
    client
        .put("hotels", "m", [("rooms", map([("suite", i64::MAX)]))])
        .await
        .unwrap();
    let map_before = client.get("hotels", "m").await.unwrap().unwrap();
    let overflow = Funcall::new(
        "rooms",
        FuncallOp::MapNum(NumOp::Add),
        map([("single", 1i64), ("suite", 1)]),
    );
    assert_eq!(
        status(client.atomic("hotels", "m", vec![overflow]).await),
        Status::CmpFail
    );
    assert_eq!(
        client.get("hotels", "m").await.unwrap().unwrap(),
        map_before
    );

    // All or nothing: a valid funcall before a failing one is not applied either.
    let mixed = vec![
        Funcall::set("city", "Paris"),
        num("stars", NumOp::Add, 1i64),
        num("price", NumOp::Add, 1i64),
    ];
    assert_eq!(
        status(client.atomic("hotels", "h", mixed).await),
        Status::CmpFail
    );

    // An atomic operation that does not fit its attribute's type cannot apply: CMPFAIL, as in
    // HyperDex. (A plain put of a wrong-typed value is WRONGTYPE: tests/bad_input.rs.)
    let wrong_type = [
        num("city", NumOp::Add, 1i64),   // numbers on a string
        num("price", NumOp::Add, "one"), // a string argument for an int
        num("rating", NumOp::Xor, 1.0),  // bitwise on a float
        Funcall::new("price", FuncallOp::StringAppend, "x"),
        Funcall::new("city", FuncallOp::ListRPush, "x"),
        Funcall::new("tags", FuncallOp::SetAdd, 3i64),
        Funcall::new("floors", FuncallOp::SetUnion, string_set(["a"])),
        Funcall::new("notes", FuncallOp::SetAdd, "x"),
        Funcall::new("rooms", FuncallOp::MapAdd, map([("suite", "big")])),
        Funcall::new("labels", FuncallOp::MapNum(NumOp::Add), map([("en", 1i64)])),
        Funcall::new("rooms", FuncallOp::MapStringAppend, map([("suite", "x")])),
    ];
    for f in wrong_type {
        assert_eq!(
            status(client.atomic("hotels", "h", vec![f.clone()]).await),
            Status::CmpFail,
            "{f:?}"
        );
    }
    // The key cannot change, and a plain assignment of the wrong type is a type error.
    for f in [
        Funcall::new("id", FuncallOp::Set, "other"),
        Funcall::set("price", "cheap"),
    ] {
        assert_eq!(
            status(client.atomic("hotels", "h", vec![f.clone()]).await),
            Status::WrongType,
            "{f:?}"
        );
    }
    assert_eq!(
        status(
            client
                .atomic("hotels", "h", vec![num("nonexistent", NumOp::Add, 1i64)])
                .await
        ),
        Status::UnknownAttribute
    );
    assert_eq!(client.get("hotels", "h").await.unwrap().unwrap(), before);
    assert_eq!(client.get("hotels", "other").await.unwrap(), None);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_strings_lists_sets_maps() {
    let (server, client) = hotels().await;
    client
        .put("hotels", "h", [("address", s("Main"))])
        .await
        .unwrap();
    // Every update raises the object's version.
    let apply = |f: Funcall| {
        let client = client.clone();
        async move {
            let before = client.get("hotels", "h").await.unwrap().unwrap().version;
            client.atomic("hotels", "h", vec![f]).await.unwrap();
            let after = client.get("hotels", "h").await.unwrap().unwrap().version;
            assert!(after > before, "{after:?} after {before:?}");
        }
    };

    apply(Funcall::new("address", FuncallOp::StringPrepend, "1 ")).await;
    apply(Funcall::new("address", FuncallOp::StringAppend, " St")).await;
    assert_eq!(attrs(&client, "h").await["address"], s("1 Main St"));

    apply(Funcall::new("notes", FuncallOp::ListRPush, "b")).await;
    apply(Funcall::new("notes", FuncallOp::ListLPush, "a")).await;
    apply(Funcall::new("notes", FuncallOp::ListRPush, "c")).await;
    apply(Funcall::new("notes", FuncallOp::ListLPush, "a")).await;
    assert_eq!(
        attrs(&client, "h").await["notes"],
        list([s("a"), s("a"), s("b"), s("c")])
    );

    apply(Funcall::new("tags", FuncallOp::SetAdd, "pool")).await;
    apply(Funcall::new("tags", FuncallOp::SetAdd, "wifi")).await;
    apply(Funcall::new("tags", FuncallOp::SetAdd, "pool")).await;
    assert_eq!(
        attrs(&client, "h").await["tags"],
        string_set(["pool", "wifi"])
    );
    apply(Funcall::new("tags", FuncallOp::SetRemove, "pool")).await;
    apply(Funcall::new("tags", FuncallOp::SetRemove, "absent")).await;
    assert_eq!(attrs(&client, "h").await["tags"], string_set(["wifi"]));
    apply(Funcall::new(
        "tags",
        FuncallOp::SetUnion,
        string_set(["spa", "gym", "wifi"]),
    ))
    .await;
    assert_eq!(
        attrs(&client, "h").await["tags"],
        string_set(["gym", "spa", "wifi"])
    );
    apply(Funcall::new(
        "tags",
        FuncallOp::SetIntersect,
        string_set(["spa", "wifi", "bar"]),
    ))
    .await;
    assert_eq!(
        attrs(&client, "h").await["tags"],
        string_set(["spa", "wifi"])
    );
    apply(Funcall::new(
        "floors",
        FuncallOp::SetUnion,
        list([i(3), i(1)]),
    ))
    .await;
    apply(Funcall::new("floors", FuncallOp::SetAdd, 2i64)).await;
    assert_eq!(attrs(&client, "h").await["floors"], int_set([1, 2, 3]));

    apply(Funcall::new(
        "rooms",
        FuncallOp::MapAdd,
        map([("single", 2i64), ("double", 3)]),
    ))
    .await;
    apply(Funcall::new(
        "rooms",
        FuncallOp::MapAdd,
        map([("double", 4i64), ("suite", 1)]),
    ))
    .await;
    assert_eq!(
        attrs(&client, "h").await["rooms"],
        map([("double", 4i64), ("single", 2), ("suite", 1)])
    );
    apply(Funcall::new("rooms", FuncallOp::MapRemove, "single")).await;
    apply(Funcall::new("rooms", FuncallOp::MapRemove, "absent")).await;
    assert_eq!(
        attrs(&client, "h").await["rooms"],
        map([("double", 4i64), ("suite", 1)])
    );
    // Map arithmetic: an absent entry counts as 0.
    apply(Funcall::new(
        "rooms",
        FuncallOp::MapNum(NumOp::Add),
        map([("double", 1i64), ("twin", 5)]),
    ))
    .await;
    assert_eq!(
        attrs(&client, "h").await["rooms"],
        map([("double", 5i64), ("suite", 1), ("twin", 5)])
    );
    apply(Funcall::new(
        "rooms",
        FuncallOp::MapNum(NumOp::Mul),
        map([("twin", 3i64)]),
    ))
    .await;
    apply(Funcall::new(
        "rooms",
        FuncallOp::MapNum(NumOp::Sub),
        map([("suite", 4i64)]),
    ))
    .await;
    apply(Funcall::new(
        "rooms",
        FuncallOp::MapNum(NumOp::Max),
        map([("double", 2i64)]),
    ))
    .await;
    assert_eq!(
        attrs(&client, "h").await["rooms"],
        map([("double", 5i64), ("suite", -3), ("twin", 15)])
    );

    apply(Funcall::new(
        "labels",
        FuncallOp::MapStringAppend,
        map([("en", "Inn")]),
    ))
    .await;
    apply(Funcall::new(
        "labels",
        FuncallOp::MapStringAppend,
        map([("en", " Ithaca"), ("fr", "Auberge")]),
    ))
    .await;
    apply(Funcall::new(
        "labels",
        FuncallOp::MapStringPrepend,
        map([("en", "The ")]),
    ))
    .await;
    assert_eq!(
        attrs(&client, "h").await["labels"],
        map([("en", "The Inn Ithaca"), ("fr", "Auberge")])
    );

    server.shutdown().await;
}

// ---- search ----------------------------------------------------------------------------

/// What a test inserted, for brute-force filtering.
#[derive(Clone, Debug)]
struct Hotel {
    id: String,
    city: &'static str,
    stars: i64,
    price: i64,
    address: String,
    rating: f64,
    notes: Vec<String>,
    tags: BTreeSet<&'static str>,
    rooms: BTreeMap<&'static str, i64>,
}

const CITIES: [&str; 4] = ["Ithaca", "Boston", "Paris", "Oslo"];
const TAGS: [&str; 3] = ["pool", "wifi", "spa"];

fn hotel(n: usize) -> Hotel {
    let mut rooms = BTreeMap::from([("single", (n % 3) as i64)]);
    if n % 2 == 1 {
        rooms.insert("suite", 1);
    }
    Hotel {
        id: format!("h{n:02}"),
        city: CITIES[n % 4],
        stars: (n % 5) as i64 + 1,
        price: 50 + (n as i64 * 37) % 250,
        address: match n % 3 {
            0 => format!("{n} Main St"),
            _ => format!("{n} Elm Road"),
        },
        rating: (n % 10) as f64 / 2.0 - 1.0,
        notes: (0..n % 3).map(|k| format!("note{k}")).collect(),
        tags: TAGS
            .iter()
            .enumerate()
            .filter(|(b, _)| n & (1 << b) != 0)
            .map(|(_, t)| *t)
            .collect(),
        rooms,
    }
}

impl Hotel {
    fn attributes(&self) -> Vec<(&'static str, Value)> {
        vec![
            ("city", s(self.city)),
            ("stars", i(self.stars)),
            ("price", i(self.price)),
            ("address", s(&self.address)),
            ("rating", Value::Float(self.rating)),
            ("notes", list(self.notes.iter().map(|n| s(n)))),
            ("tags", string_set(self.tags.iter().copied())),
            ("rooms", map(self.rooms.iter().map(|(k, v)| (*k, *v)))),
        ]
    }
}

const HOTELS_COUNT: usize = 60;

async fn load_hotels(client: &Client) -> Vec<Hotel> {
    let all: Vec<Hotel> = (0..HOTELS_COUNT).map(hotel).collect();
    let puts = all
        .iter()
        .map(|h| client.put("hotels", h.id.as_str(), h.attributes()));
    for r in futures::future::join_all(puts).await {
        r.unwrap();
    }
    all
}

type Filter = Box<dyn Fn(&Hotel) -> bool>;

fn search_cases() -> Vec<(&'static str, Vec<Predicate>, Filter)> {
    use PredicateOp as P;
    let p = Predicate::new;
    vec![
        ("everything", vec![], Box::new(|_| true)),
        (
            "city = Paris",
            vec![Predicate::equals("city", "Paris")],
            Box::new(|h| h.city == "Paris"),
        ),
        (
            "key = h07",
            vec![Predicate::equals("id", "h07")],
            Box::new(|h| h.id == "h07"),
        ),
        (
            "stars = 3",
            vec![Predicate::equals("stars", 3i64)],
            Box::new(|h| h.stars == 3),
        ),
        (
            "stars < 3",
            vec![p("stars", P::LessThan(i(3)))],
            Box::new(|h| h.stars < 3),
        ),
        (
            "stars <= 3",
            vec![p("stars", P::LessEqual(i(3)))],
            Box::new(|h| h.stars <= 3),
        ),
        (
            "price > 150",
            vec![p("price", P::GreaterThan(i(150)))],
            Box::new(|h| h.price > 150),
        ),
        (
            "price >= 161",
            vec![p("price", P::GreaterEqual(i(161)))],
            Box::new(|h| h.price >= 161),
        ),
        (
            "price in [100, 200]",
            vec![p("price", P::Range(i(100), i(200)))],
            Box::new(|h| (100..=200).contains(&h.price)),
        ),
        (
            "rating >= 1 (an int operand)",
            vec![p("rating", P::GreaterEqual(i(1)))],
            Box::new(|h| h.rating >= 1.0),
        ),
        (
            "rating < 0.25",
            vec![p("rating", P::LessThan(Value::Float(0.25)))],
            Box::new(|h| h.rating < 0.25),
        ),
        (
            "city < Oslo (bytewise)",
            vec![p("city", P::LessThan(s("Oslo")))],
            Box::new(|h| h.city < "Oslo"),
        ),
        (
            "id >= h50",
            vec![p("id", P::GreaterEqual(s("h50")))],
            Box::new(|h| h.id.as_str() >= "h50"),
        ),
        (
            "address ~ ^1[0-9] Main",
            vec![p("address", P::Regex("^1[0-9] Main".into()))],
            Box::new(|h| {
                h.address.starts_with('1')
                    && h.address.len() == "1x Main St".len()
                    && h.address.ends_with("Main St")
            }),
        ),
        (
            "address ~ Road$",
            vec![p("address", P::Regex("Road$".into()))],
            Box::new(|h| h.address.ends_with("Road")),
        ),
        (
            "len(tags) = 2",
            vec![p("tags", P::LengthEquals(2))],
            Box::new(|h| h.tags.len() == 2),
        ),
        (
            "len(notes) <= 1",
            vec![p("notes", P::LengthLessEqual(1))],
            Box::new(|h| h.notes.len() <= 1),
        ),
        (
            "len(address) >= 11",
            vec![p("address", P::LengthGreaterEqual(11))],
            Box::new(|h| h.address.len() >= 11),
        ),
        (
            "len(rooms) = 2",
            vec![p("rooms", P::LengthEquals(2))],
            Box::new(|h| h.rooms.len() == 2),
        ),
        (
            "tags contains pool",
            vec![p("tags", P::Contains(s("pool")))],
            Box::new(|h| h.tags.contains("pool")),
        ),
        (
            "notes contains note1",
            vec![p("notes", P::Contains(s("note1")))],
            Box::new(|h| h.notes.iter().any(|n| n == "note1")),
        ),
        (
            "rooms contains suite",
            vec![p("rooms", P::Contains(s("suite")))],
            Box::new(|h| h.rooms.contains_key("suite")),
        ),
        (
            "address contains Main",
            vec![p("address", P::Contains(s("Main")))],
            Box::new(|h| h.address.contains("Main")),
        ),
        (
            "tags = {pool, wifi}",
            vec![Predicate::equals("tags", string_set(["wifi", "pool"]))],
            Box::new(|h| h.tags == BTreeSet::from(["pool", "wifi"])),
        ),
        (
            "city = Ithaca and price in [60, 200]",
            vec![
                Predicate::equals("city", "Ithaca"),
                p("price", P::Range(i(60), i(200))),
            ],
            Box::new(|h| h.city == "Ithaca" && (60..=200).contains(&h.price)),
        ),
        (
            "city = Boston, price = its own, stars > 1",
            vec![
                Predicate::equals("city", "Boston"),
                Predicate::equals("price", hotel(1).price),
                p("stars", P::GreaterThan(i(1))),
            ],
            Box::new(|h| h.city == "Boston" && h.price == hotel(1).price && h.stars > 1),
        ),
        (
            "tags contains wifi and len(notes) >= 1 and address ~ Elm",
            vec![
                p("tags", P::Contains(s("wifi"))),
                p("notes", P::LengthGreaterEqual(1)),
                p("address", P::Regex("Elm".into())),
            ],
            Box::new(|h| {
                h.tags.contains("wifi") && !h.notes.is_empty() && h.address.contains("Elm")
            }),
        ),
        (
            "city = Nowhere",
            vec![Predicate::equals("city", "Nowhere")],
            Box::new(|_| false),
        ),
    ]
}

fn keys(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| match &r.key {
            Value::String(k) => k.as_str().expect("text").to_owned(),
            other => panic!("string keys only: {other:?}"),
        })
        .collect()
}

fn sorted_unique(mut keys: Vec<String>) -> Vec<String> {
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "a search returned a key twice");
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_and_count_match_brute_force() {
    let (server, client) = hotels().await;
    let all = load_hotels(&client).await;
    let mut nonempty = 0;
    for (name, predicates, filter) in search_cases() {
        let expected: Vec<String> = all
            .iter()
            .filter(|h| filter(h))
            .map(|h| h.id.clone())
            .collect();
        let found = client.search("hotels", predicates.clone()).await.unwrap();
        assert_eq!(sorted_unique(keys(&found)), expected, "search {name}");
        for (r, k) in found.iter().zip(keys(&found)) {
            let h = &all[k[1..].parse::<usize>().unwrap()];
            assert_eq!(
                r.attributes,
                with(defaults(), &h.attributes()),
                "the whole object of {k}"
            );
        }
        assert_eq!(
            client.count("hotels", predicates).await.unwrap(),
            expected.len() as u64,
            "count {name}"
        );
        nonempty += usize::from(!expected.is_empty() && expected.len() < all.len());
    }
    assert!(nonempty >= 20, "the cases discriminate: {nonempty}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sorted_search_orders_limits_and_breaks_ties_by_key() {
    let (server, client) = hotels().await;
    let all = load_hotels(&client).await;
    let cheap = |h: &&Hotel| h.price < 250;
    for limit in [0u32, 1, 7, 25, 1000] {
        let mut asc: Vec<&Hotel> = all.iter().filter(cheap).collect();
        asc.sort_by(|a, b| (a.stars, &a.id).cmp(&(b.stars, &b.id)));
        let expected: Vec<String> = asc
            .iter()
            .take(limit as usize)
            .map(|h| h.id.clone())
            .collect();
        let found = client
            .sorted_search(
                "hotels",
                vec![Predicate::new("price", PredicateOp::LessThan(i(250)))],
                "stars",
                limit,
                SortOrder::Ascending,
            )
            .await
            .unwrap();
        assert_eq!(keys(&found), expected, "ascending, limit {limit}");

        let mut desc = asc.clone();
        desc.reverse();
        let expected: Vec<String> = desc
            .iter()
            .take(limit as usize)
            .map(|h| h.id.clone())
            .collect();
        let found = client
            .sorted_search(
                "hotels",
                vec![Predicate::new("price", PredicateOp::LessThan(i(250)))],
                "stars",
                limit,
                SortOrder::Descending,
            )
            .await
            .unwrap();
        assert_eq!(keys(&found), expected, "descending, limit {limit}");
    }
    // By a string and by a float, no predicates.
    let mut by_address: Vec<&Hotel> = all.iter().collect();
    by_address.sort_by(|a, b| (a.address.as_bytes(), &a.id).cmp(&(b.address.as_bytes(), &b.id)));
    let found = client
        .sorted_search("hotels", vec![], "address", 5, SortOrder::Ascending)
        .await
        .unwrap();
    assert_eq!(
        keys(&found),
        by_address
            .iter()
            .take(5)
            .map(|h| h.id.clone())
            .collect::<Vec<_>>()
    );
    let mut by_rating: Vec<&Hotel> = all.iter().collect();
    by_rating.sort_by(|a, b| {
        (a.rating.total_cmp(&b.rating))
            .then_with(|| a.id.cmp(&b.id))
            .reverse()
    });
    let found = client
        .sorted_search("hotels", vec![], "rating", 9, SortOrder::Descending)
        .await
        .unwrap();
    assert_eq!(
        keys(&found),
        by_rating
            .iter()
            .take(9)
            .map(|h| h.id.clone())
            .collect::<Vec<_>>()
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_del_removes_exactly_the_matches() {
    let (server, client) = hotels().await;
    let all = load_hotels(&client).await;
    let versions: BTreeMap<String, Version> = client
        .search("hotels", vec![])
        .await
        .unwrap()
        .iter()
        .map(|r| (string_key(r), r.version))
        .collect();
    let predicates = vec![
        Predicate::new("stars", PredicateOp::GreaterEqual(i(3))),
        Predicate::new("tags", PredicateOp::Contains(s("pool"))),
    ];
    let doomed: BTreeSet<String> = all
        .iter()
        .filter(|h| h.stars >= 3 && h.tags.contains("pool"))
        .map(|h| h.id.clone())
        .collect();
    assert!(!doomed.is_empty());
    assert_eq!(
        client
            .group_del("hotels", predicates.clone())
            .await
            .unwrap(),
        doomed.len() as u64
    );
    let left = sorted_unique(keys(&client.search("hotels", vec![]).await.unwrap()));
    let expected: Vec<String> = all
        .iter()
        .map(|h| h.id.clone())
        .filter(|k| !doomed.contains(k))
        .collect();
    assert_eq!(left, expected);
    for k in &doomed {
        assert_eq!(client.get("hotels", k.as_str()).await.unwrap(), None, "{k}");
    }
    // Nothing left to delete; the deleted keys can be written again, with higher versions.
    assert_eq!(client.group_del("hotels", predicates).await.unwrap(), 0);
    let k = doomed.iter().next().unwrap();
    client
        .put_if_not_exist("hotels", k.as_str(), [("stars", i(1))])
        .await
        .unwrap();
    assert!(
        client
            .get("hotels", k.as_str())
            .await
            .unwrap()
            .unwrap()
            .version
            > versions[k]
    );
    assert_eq!(
        client.group_del("hotels", vec![]).await.unwrap(),
        expected.len() as u64 + 1
    );
    assert_eq!(client.count("hotels", vec![]).await.unwrap(), 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_update_changes_exactly_the_matches_it_can() {
    let (server, client) = hotels().await;
    let all = load_hotels(&client).await;
    // One match sits at the top of the int range: adding to it overflows, so it is skipped.
    let top = all.iter().find(|h| h.stars >= 3).unwrap().id.clone();
    client
        .put("hotels", top.as_str(), [("price", i(i64::MAX))])
        .await
        .unwrap();
    let before: BTreeMap<String, Record> = client
        .search("hotels", vec![])
        .await
        .unwrap()
        .into_iter()
        .map(|r| (string_key(&r), r))
        .collect();
    let matches = |r: &Record| r.attributes["stars"] >= i(3);
    let updatable = before
        .values()
        .filter(|r| matches(r) && string_key(r) != top)
        .count();
    assert!(updatable > 0);

    let updated = client
        .group_update(
            "hotels",
            vec![Predicate::new("stars", PredicateOp::GreaterEqual(i(3)))],
            vec![
                num("price", NumOp::Add, 10i64),
                Funcall::set("address", "renovated"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(updated, updatable as u64);

    for (k, old) in &before {
        let now = client.get("hotels", k.as_str()).await.unwrap().unwrap();
        if matches(old) && *k != top {
            let Value::Int(p) = old.attributes["price"] else {
                panic!("int price")
            };
            assert_eq!(now.attributes["price"], i(p + 10), "{k}");
            assert_eq!(now.attributes["address"], s("renovated"), "{k}");
            assert!(now.version > old.version, "{k}");
        } else {
            assert_eq!(&now, old, "{k} must not change");
        }
    }
    // Moved objects (price is a dimension) are found where they now are, once each.
    let found = keys(
        &client
            .search(
                "hotels",
                vec![Predicate::new(
                    "address",
                    PredicateOp::Equals(s("renovated")),
                )],
            )
            .await
            .unwrap(),
    );
    assert_eq!(found.len(), updatable);
    assert_eq!(sorted_unique(found).len(), updatable);
    server.shutdown().await;
}

/// A group update skips an object it would make too large, as it skips one it cannot apply
/// to (a cluster client does the same: tests/cluster.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_update_skips_objects_it_would_make_too_large() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .add_space("space g key k attributes string s, int n")
        .await
        .unwrap();
    let limit = tessera_types::constants::OBJECT_BYTES_MAX;
    client.put("g", "small", [("s", "x")]).await.unwrap();
    client
        .put("g", "big", [("s", "y".repeat(limit - 100))])
        .await
        .unwrap();
    let before = client.get("g", "big").await.unwrap().unwrap();
    let grow = vec![Funcall::new("s", FuncallOp::StringAppend, "z".repeat(200))];
    assert_eq!(client.group_update("g", vec![], grow).await.unwrap(), 1);
    assert_eq!(
        attrs_in(&client, "g", "small").await["s"],
        s(&format!("x{}", "z".repeat(200)))
    );
    assert_eq!(
        client.get("g", "big").await.unwrap().unwrap(),
        before,
        "skipped, unchanged"
    );
    server.shutdown().await;
}

fn string_key(r: &Record) -> String {
    match &r.key {
        Value::String(k) => k.as_str().expect("text").to_owned(),
        other => panic!("string keys, got {other:?}"),
    }
}

// ---- explain ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_follows_the_cr_formula() {
    let (server, client) = hotels().await;
    client.add_space("space cube key int id attributes int x, int y, int z subspace x, y, z create 64 partitions").await.unwrap();
    let eq = |a: &str, v: Value| Predicate::equals(a, v);
    let regions = |space: &'static str, predicates: Vec<Predicate>| {
        let client = client.clone();
        async move {
            let e = client.explain(space, predicates).await.unwrap();
            (e.dimensions, e.regions_contacted)
        }
    };
    let dims = |d: &[&str]| d.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    // Every dimension of a subspace fixed: one region.
    assert_eq!(
        regions("hotels", vec![eq("city", s("Ithaca")), eq("price", i(120))]).await,
        (dims(&["city", "price"]), 1)
    );
    assert_eq!(
        regions("hotels", vec![eq("stars", i(4))]).await,
        (dims(&["stars"]), 1)
    );
    assert_eq!(regions("hotels", vec![eq("id", s("h1"))]).await.1, 1);
    assert_eq!(
        regions("cube", vec![eq("x", i(1)), eq("y", i(2)), eq("z", i(3))]).await,
        (dims(&["x", "y", "z"]), 1)
    );
    // One of two dimensions: 64^(1/2) = 8 (equality on a string narrows, by its hash).
    assert_eq!(
        regions("hotels", vec![eq("city", s("Ithaca"))]).await,
        (dims(&["city", "price"]), 8)
    );
    assert_eq!(
        regions("hotels", vec![eq("price", i(10))]).await,
        (dims(&["city", "price"]), 8)
    );
    // Three int dimensions: 64^(2/3) = 16, 64^(1/3) = 4.
    assert_eq!(
        regions("cube", vec![eq("x", i(-5))]).await,
        (dims(&["x", "y", "z"]), 16)
    );
    assert_eq!(regions("cube", vec![eq("z", i(7))]).await.1, 16);
    assert_eq!(
        regions("cube", vec![eq("x", i(1)), eq("z", i(i64::MAX))])
            .await
            .1,
        4
    );
    // Nothing fixed: every region of the smallest-ranked subspace.
    let e = client.explain("cube", vec![]).await.unwrap();
    assert_eq!((e.regions_contacted, e.subspace_regions), (64, 64));
    // Predicates that do not narrow (a regex, a range on a string's hash) leave it at 64.
    assert_eq!(
        regions(
            "hotels",
            vec![Predicate::new("city", PredicateOp::Regex("^I".into()))]
        )
        .await
        .1,
        64
    );
    // Adding terms never adds regions.
    let e = client
        .explain(
            "hotels",
            vec![
                eq("city", s("Ithaca")),
                Predicate::new("address", PredicateOp::Regex("x".into())),
            ],
        )
        .await
        .unwrap();
    assert_eq!(e.regions_contacted, 8);
    assert_eq!(e.servers_contacted, 1);

    // Contradictions: no region, and an empty search.
    for n in 0..20i64 {
        client
            .put("cube", n, [("x", i(n % 7)), ("y", i(n % 11)), ("z", i(n))])
            .await
            .unwrap();
    }
    for predicates in [
        vec![
            Predicate::new("x", PredicateOp::GreaterThan(i(10))),
            Predicate::new("x", PredicateOp::LessThan(i(5))),
        ],
        vec![eq("x", i(3)), eq("x", i(4))],
        vec![Predicate::new("y", PredicateOp::Range(i(9), i(2)))],
    ] {
        assert_eq!(
            client
                .explain("cube", predicates.clone())
                .await
                .unwrap()
                .regions_contacted,
            0,
            "{predicates:?}"
        );
        assert!(
            client
                .search("cube", predicates.clone())
                .await
                .unwrap()
                .is_empty(),
            "{predicates:?}"
        );
        assert_eq!(client.count("cube", predicates).await.unwrap(), 0);
    }
    // And a narrow search returns exactly its object.
    let found = client
        .search("cube", vec![eq("x", i(3)), eq("y", i(3)), eq("z", i(3))])
        .await
        .unwrap();
    assert_eq!(
        found.iter().map(|r| r.key.clone()).collect::<Vec<_>>(),
        [i(3)]
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_moving_between_regions_are_found_once() {
    let (server, client) = hotels().await;
    let mut versions = BTreeMap::<Value, Version>::new();
    for round in 0..6i64 {
        let puts = (0..50i64).map(|n| {
            let city = CITIES[((n + round) % 4) as usize];
            client.put(
                "hotels",
                format!("k{n}"),
                [
                    ("city", s(city)),
                    ("price", i(n * 13 + round * 101)),
                    ("stars", i((n + round) % 5)),
                ],
            )
        });
        for r in futures::future::join_all(puts).await {
            r.unwrap();
        }
        let all = client.search("hotels", vec![]).await.unwrap();
        assert_eq!(sorted_unique(keys(&all)).len(), 50);
        // Every object was updated once more: each has a higher version than last round.
        for r in &all {
            let before = versions
                .insert(r.key.clone(), r.version)
                .unwrap_or(Version::NONE);
            assert!(
                r.version > before,
                "{:?}: {:?} after {before:?}",
                r.key,
                r.version
            );
        }
        for city in CITIES {
            let found = client
                .search("hotels", vec![Predicate::equals("city", city)])
                .await
                .unwrap();
            let expected: BTreeSet<String> = (0..50i64)
                .filter(|n| CITIES[((n + round) % 4) as usize] == city)
                .map(|n| format!("k{n}"))
                .collect();
            assert_eq!(
                sorted_unique(keys(&found))
                    .into_iter()
                    .collect::<BTreeSet<_>>(),
                expected
            );
            assert!(
                found.iter().all(|r| r.version == versions[&r.key]),
                "the latest version of each"
            );
        }
    }
    server.shutdown().await;
}

// ---- pipelining, versions, restart ---------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_pipelined_puts_on_one_client() {
    let (server, client) = hotels().await;
    let puts = (0..1000i64).map(|n| {
        client.put(
            "hotels",
            format!("p{n}"),
            [("price", i(n)), ("city", s(CITIES[n as usize % 4]))],
        )
    });
    let results = futures::future::join_all(puts).await;
    assert!(
        results.iter().all(|r| r.is_ok()),
        "{:?}",
        results.iter().find(|r| r.is_err())
    );
    let gets = (0..1000i64).map(|n| client.get("hotels", format!("p{n}")));
    for (n, got) in futures::future::join_all(gets)
        .await
        .into_iter()
        .enumerate()
    {
        let got = got.unwrap().expect("every put is readable");
        assert_eq!(got.attributes["price"], i(n as i64));
        assert!(got.version > Version::NONE);
    }
    assert_eq!(client.count("hotels", vec![]).await.unwrap(), 1000);
    assert_eq!(
        client
            .count("hotels", vec![Predicate::equals("city", "Oslo")])
            .await
            .unwrap(),
        250
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_grow_with_every_update_and_are_never_reused() {
    let (server, client) = hotels().await;
    let version = |key: &'static str| {
        let client = client.clone();
        async move { client.get("hotels", key).await.unwrap().map(|r| r.version) }
    };
    let mut last = Version::NONE;
    for n in 1..=10u64 {
        client
            .put("hotels", "v", [("price", i(n as i64))])
            .await
            .unwrap();
        // Updates of other keys in between do not matter.
        client
            .put("hotels", "other", [("price", i(n as i64))])
            .await
            .unwrap();
        let now = version("v").await.unwrap();
        assert!(now > last, "{now:?} after {last:?}");
        last = now;
    }
    // Failed updates do not count.
    assert_eq!(
        status(
            client
                .put_if_not_exist("hotels", "v", [("price", i(0))])
                .await
        ),
        Status::CmpFail
    );
    assert_eq!(
        status(
            client
                .atomic("hotels", "v", vec![num("price", NumOp::Div, 0i64)])
                .await
        ),
        Status::CmpFail
    );
    assert_eq!(version("v").await, Some(last));

    // A key deleted and written again never repeats a version, however often.
    for _ in 0..5 {
        client.del("hotels", "v").await.unwrap();
        client.put("hotels", "v", [("price", i(1))]).await.unwrap();
        let now = version("v").await.unwrap();
        assert!(now > last, "{now:?} after {last:?}");
        last = now;
    }

    // Concurrent atomic adds from several clients are each applied once, in some order.
    let clients = [client.clone(), server.client().await, server.client().await];
    client
        .put("hotels", "counter", [("stars", i(0))])
        .await
        .unwrap();
    let start = version("counter").await.unwrap();
    let adds = (0..300)
        .map(|n| clients[n % 3].atomic("hotels", "counter", vec![num("stars", NumOp::Add, 1i64)]));
    for r in futures::future::join_all(adds).await {
        r.unwrap();
    }
    let got = client.get("hotels", "counter").await.unwrap().unwrap();
    assert_eq!(got.attributes["stars"], i(300));
    assert!(
        got.version.0 >= start.0 + 300,
        "300 updates, 300 versions: {:?} from {start:?}",
        got.version
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_and_spaces_survive_a_restart() {
    let mut server = TestServer::start().await;
    let client = server.client().await;
    client.add_space(HOTELS).await.unwrap();
    client
        .add_space("space gone key k attributes int n")
        .await
        .unwrap();
    client
        .add_space("space cube key int id attributes int x subspace x")
        .await
        .unwrap();
    client.rm_space("gone").await.unwrap();
    let all = load_hotels(&client).await;
    client.put("cube", 7i64, [("x", i(-3))]).await.unwrap();
    client
        .put("hotels", "h01", [("price", i(1))])
        .await
        .unwrap();
    client.del("hotels", "h02").await.unwrap();
    let before = snapshot(&client, "hotels").await;
    let h01_version = before.iter().find(|r| r.key == s("h01")).unwrap().version;
    drop(client);

    server.restart().await;
    let client = server.client().await;
    let names: Vec<_> = client
        .list_spaces()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["hotels", "cube"]);
    assert_eq!(snapshot(&client, "hotels").await, before);
    assert_eq!(before.len(), all.len() - 1);
    let h01 = client.get("hotels", "h01").await.unwrap().unwrap();
    assert_eq!(
        (h01.version, &h01.attributes["price"]),
        (h01_version, &i(1))
    );
    assert_eq!(client.get("hotels", "h02").await.unwrap(), None);
    assert_eq!(
        client.get("cube", 7i64).await.unwrap().unwrap().attributes["x"],
        i(-3)
    );
    assert_eq!(
        client
            .search("cube", vec![Predicate::equals("x", -3i64)])
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(status(client.get("gone", "k").await), Status::UnknownSpace);
    // And it goes on: versions continue, new spaces can be made.
    client
        .put("hotels", "h01", [("price", i(2))])
        .await
        .unwrap();
    assert!(client.get("hotels", "h01").await.unwrap().unwrap().version > h01_version);
    client
        .add_space("space gone key k attributes int n")
        .await
        .unwrap();
    assert_eq!(client.count("gone", vec![]).await.unwrap(), 0);
    server.shutdown().await;
}

/// The point leader's clock lives in memory; a restart must not let a key deleted before it
/// and written after it get a version it had already (replicas tell updates apart by version).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_deleted_before_a_restart_gets_new_versions_after_it() {
    let mut server = TestServer::start().await;
    let client = server.client().await;
    client.add_space(HOTELS).await.unwrap();
    let mut highest = Version::NONE;
    for price in 0..5i64 {
        client
            .put("hotels", "h", [("price", i(price))])
            .await
            .unwrap();
        highest = client.get("hotels", "h").await.unwrap().unwrap().version;
    }
    client.del("hotels", "h").await.unwrap();
    drop(client);
    for round in 0..2 {
        server.restart().await;
        let client = server.client().await;
        client
            .put("hotels", "h", [("price", i(round))])
            .await
            .unwrap();
        let now = client.get("hotels", "h").await.unwrap().unwrap().version;
        assert!(
            now > highest,
            "restart {round}: version {now:?} after a key that reached {highest:?}"
        );
        highest = now;
        client.del("hotels", "h").await.unwrap();
    }
    server.shutdown().await;
}

/// A search naming one point is answered on the connection's task while it has few matches;
/// with more than fit there (256) it must move to the streaming path and still return all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_searches_with_many_matches_return_them_all() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .add_space("space points key int id attributes int n, string tag subspace n create 8 partitions tolerate 0 failures")
        .await
        .unwrap();
    let puts = (0..700i64).map(|id| {
        let client = client.clone();
        async move {
            let n = if id < 600 { 5 } else { id };
            client
                .put(
                    "points",
                    id,
                    [("n", Value::Int(n)), ("tag", Value::from("x"))],
                )
                .await
                .unwrap();
        }
    });
    futures::future::join_all(puts).await;
    for (n, expected) in [(5i64, 600usize), (650, 1), (9999, 0)] {
        let found = client
            .search("points", vec![Predicate::equals("n", n)])
            .await
            .unwrap();
        assert_eq!(found.len(), expected, "n = {n}");
        let unique: BTreeSet<Value> = found.iter().map(|r| r.key.clone()).collect();
        assert_eq!(unique.len(), expected, "no key twice for n = {n}");
        assert_eq!(
            client
                .count("points", vec![Predicate::equals("n", n)])
                .await
                .unwrap(),
            expected as u64
        );
    }
    server.shutdown().await;
}

// ---- multi_get ---------------------------------------------------------------------------

/// `multi_get` answers, in the keys' order, what a `get` of each answers: present keys,
/// absent ones, deleted ones, repeated ones, ints given for a float key; more keys than one
/// request carries are split by the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_get_answers_what_each_get_answers() {
    let (server, client) = hotels().await;
    for n in 0..700 {
        client
            .put("hotels", format!("h{n}"), [("stars", i(n % 5))])
            .await
            .unwrap();
    }
    for n in (0..700).step_by(7) {
        client.del("hotels", format!("h{n}")).await.unwrap();
    }
    // Present, deleted, never written, and repeated keys, in a scrambled order; over 256.
    let mut keys: Vec<Value> = (0..800)
        .map(|n| s(&format!("h{}", (n * 37) % 900)))
        .collect();
    keys.push(s("h1"));
    keys.push(s("h1"));
    let many = client.multi_get("hotels", keys.clone()).await.unwrap();
    assert_eq!(many.len(), keys.len());
    let mut present = 0;
    for (key, got) in keys.iter().zip(&many) {
        let Value::String(k) = key else {
            unreachable!()
        };
        let one = client.get("hotels", k.clone()).await.unwrap();
        assert_eq!(got, &one, "{k:?}");
        present += usize::from(one.is_some());
    }
    assert!(present > 400 && present < keys.len() - 50, "{present}");
    assert_eq!(client.multi_get("hotels", vec![]).await.unwrap(), vec![]);
    // A float key given as an int is read as that float, as a get reads it.
    client
        .add_space("space readings key float t attributes int v")
        .await
        .unwrap();
    client.put("readings", 2.0, [("v", i(7))]).await.unwrap();
    let got = client
        .multi_get("readings", vec![Value::Int(2), Value::Float(3.0)])
        .await
        .unwrap();
    assert_eq!(
        got[0].as_ref().map(|r| r.key.clone()),
        Some(Value::Float(2.0))
    );
    assert_eq!(got[1], None);
    server.shutdown().await;
}

/// `multi_put` puts each item as `put` would and reports per item, in order: a refused one
/// (over the object limit, a wrong type) changes nothing of its key and undoes none of the
/// others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_put_reports_each_item_and_is_not_a_transaction() {
    let (server, client) = hotels().await;
    let huge = "x".repeat(tessera_types::constants::OBJECT_BYTES_MAX + 10);
    let items: Vec<(Value, Vec<Funcall>)> = (0..300)
        .map(|n| {
            let funcalls = match n {
                100 => vec![Funcall::set("city", huge.as_str())],
                200 => vec![Funcall::set("stars", "five")],
                n => vec![Funcall::set("stars", i(n % 5))],
            };
            (s(&format!("p{n}")), funcalls)
        })
        .collect();
    let outcomes = client.multi_put("hotels", items).await;
    assert_eq!(outcomes.len(), 300);
    for (n, outcome) in outcomes.into_iter().enumerate() {
        match n {
            100 => assert_eq!(status(outcome), Status::TooLarge),
            200 => assert_eq!(status(outcome), Status::WrongType),
            _ => assert!(outcome.is_ok(), "p{n}: {outcome:?}"),
        }
    }
    let keys: Vec<Value> = (0..300).map(|n| s(&format!("p{n}"))).collect();
    for (n, got) in client
        .multi_get("hotels", keys)
        .await
        .unwrap()
        .iter()
        .enumerate()
    {
        match n {
            100 | 200 => assert_eq!(got, &None, "p{n}"),
            n => assert_eq!(got.as_ref().unwrap().attributes["stars"], i(n as i64 % 5)),
        }
    }
    server.shutdown().await;
}

/// A search is tried on the connection's task within a budget of matches and reads, and runs
/// again on the blocking pool past it: both give the whole answer, counted the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_past_the_inline_budget_answer_whole() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .add_space("space big key int id attributes int x, int y, string name subspace x")
        .await
        .unwrap();
    let n = 1500i64;
    let puts = (0..n).map(|i| {
        client.put(
            "big",
            i,
            [
                ("x", Value::Int(i)),
                ("y", Value::Int(i % 7)),
                ("name", Value::from(format!("n{i}"))),
            ],
        )
    });
    for r in futures::future::join_all(puts).await {
        r.unwrap();
    }
    let ids = |f: &dyn Fn(i64) -> bool| -> Vec<i64> { (0..n).filter(|&i| f(i)).collect() };
    let cases: Vec<(&str, Vec<Predicate>, Vec<i64>)> = vec![
        // 1500 matches: past the matches a search may answer inline.
        ("everything", vec![], ids(&|_| true)),
        // One match, but every object read: past the reads.
        (
            "name = n1234",
            vec![Predicate::equals("name", "n1234")],
            vec![1234],
        ),
        // ~214 matches of 1500 read.
        (
            "y = 3",
            vec![Predicate::equals("y", 3i64)],
            ids(&|i| i % 7 == 3),
        ),
        // A range of the subspace: 100 matches in few reads, inline.
        (
            "x in 200..=299",
            vec![Predicate::new(
                "x",
                PredicateOp::Range(Value::Int(200), Value::Int(299)),
            )],
            ids(&|i| (200..=299).contains(&i)),
        ),
    ];
    for (name, predicates, expected) in cases {
        let found = client.search("big", predicates.clone()).await.unwrap();
        let mut got: Vec<i64> = found
            .iter()
            .map(|r| match r.key {
                Value::Int(k) => k,
                ref other => panic!("key {other:?}"),
            })
            .collect();
        got.sort_unstable();
        assert_eq!(got, expected, "search {name}");
        assert_eq!(
            client.count("big", predicates).await.unwrap(),
            expected.len() as u64,
            "count {name}"
        );
    }
}
