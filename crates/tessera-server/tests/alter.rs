//! Live re-subspacing (`tessera alter-space`), standalone and in a cluster: a subspace added
//! while clients write is built from the existing objects and then serves searches; one
//! dropped stops serving them; all along, every search equals brute-force filtering of what
//! the clients wrote (a model kept by the test, not read back from the store), and no
//! acknowledged write is lost.
//!
//! The clients write in rounds: a round's writes are pipelined and all acknowledged before the
//! round's searches run, so the model is exact when the searches compare with it. Rounds go
//! on while the subspace is being built.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use common::cluster::{ask, Cluster};
use common::TestServer;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tessera_client::{Client, Predicate, PredicateOp, Value};
use tessera_protocol::{Configuration, Request, Response, SpaceChange, Status};
use tessera_types::{Epoch, SubspaceId, SubspaceState};

const OBJECTS: i64 = 3000;

/// Backfills (paced with the transfers) at 16 KiB/s: the 3000 objects take a few seconds to
/// copy, so that rounds of writes and searches run while the subspace is being built.
fn slow_backfill(options: &mut tessera_server::ServerOptions) {
    options.transfer_bytes_per_second = 16 * 1024;
}
const WRITES_PER_ROUND: usize = 150;

/// What the clients wrote and had acknowledged: key -> (a, b), or absent.
type Model = BTreeMap<String, (i64, i64)>;

fn space(tolerate: u32) -> String {
    format!(
        "space t key k attributes int a, int b subspace a create 8 partitions tolerate {tolerate} failures"
    )
}

/// One round of writes: puts that move objects in every subspace, and deletes.
async fn write_round(client: &Client, model: &mut Model, rng: &mut StdRng) {
    let mut writes = Vec::new();
    let mut planned = Vec::new();
    // One write per key in a round: the round's writes are concurrent.
    let mut keys = std::collections::BTreeSet::new();
    while keys.len() < WRITES_PER_ROUND {
        keys.insert(rng.random_range(0..OBJECTS + 200));
    }
    for n in keys {
        let key = format!("k{n}");
        if rng.random_bool(0.1) {
            planned.push((key.clone(), None));
            writes.push(futures::future::Either::Left(client.del("t", key.clone())));
        } else {
            let (a, b) = (rng.random_range(0..1000), rng.random_range(0..1000));
            planned.push((key.clone(), Some((a, b))));
            writes.push(futures::future::Either::Right(client.put(
                "t",
                key.clone(),
                [("a", a), ("b", b)],
            )));
        }
    }
    let results = futures::future::join_all(writes).await;
    for ((key, value), result) in planned.into_iter().zip(results) {
        match (value, result) {
            (Some(v), Ok(())) => {
                model.insert(key, v);
            }
            (None, Ok(())) => {
                model.remove(&key);
            }
            (None, Err(e)) if e.status() == Some(Status::NotFound) => {
                assert!(!model.contains_key(&key), "{key} was there: {e}");
            }
            (_, Err(e)) => panic!("a write of {key} failed: {e}"),
        }
    }
}

/// Searches on `a` and on `b` (ranges and equalities) equal brute-force filtering of the model.
async fn check_searches(client: &Client, model: &Model, rng: &mut StdRng) {
    for _ in 0..4 {
        let attr = if rng.random_bool(0.5) { "a" } else { "b" };
        let (lo, hi) = {
            let x = rng.random_range(0..1000);
            let y = rng.random_range(0..1000);
            (x.min(y), x.max(y))
        };
        let equal = rng.random_bool(0.3);
        let predicates = if equal {
            vec![Predicate::equals(attr, lo)]
        } else {
            vec![
                Predicate::new(attr, PredicateOp::GreaterEqual(Value::Int(lo))),
                Predicate::new(attr, PredicateOp::LessEqual(Value::Int(hi))),
            ]
        };
        let mut found: Vec<(String, i64, i64)> = client
            .search("t", predicates.clone())
            .await
            .expect("a search")
            .into_iter()
            .map(|r| {
                let Value::String(k) = r.key else {
                    panic!("a string key")
                };
                let int = |name: &str| match r.attributes[name] {
                    Value::Int(n) => n,
                    ref other => panic!("{other:?}"),
                };
                (k.as_str().expect("text").to_owned(), int("a"), int("b"))
            })
            .collect();
        found.sort();
        let expected: Vec<(String, i64, i64)> = model
            .iter()
            .filter(|(_, (a, b))| {
                let v = if attr == "a" { *a } else { *b };
                if equal {
                    v == lo
                } else {
                    (lo..=hi).contains(&v)
                }
            })
            .map(|(k, (a, b))| (k.clone(), *a, *b))
            .collect();
        if found != expected {
            let extra: Vec<_> = found.iter().filter(|f| !expected.contains(f)).collect();
            let missing: Vec<_> = expected.iter().filter(|e| !found.contains(e)).collect();
            let extra: Vec<_> = extra.into_iter().take(5).collect();
            let missing: Vec<_> = missing.into_iter().take(5).collect();
            panic!("search {predicates:?}: {} found, {} expected; extra {extra:?}, missing {missing:?}", found.len(), expected.len());
        }
        let count = client.count("t", predicates).await.expect("a count");
        assert_eq!(count as usize, expected.len());
    }
}

async fn load(client: &Client, model: &mut Model) {
    for chunk in (0..OBJECTS).collect::<Vec<_>>().chunks(500) {
        let writes = chunk.iter().map(|n| {
            client.put(
                "t",
                format!("k{n}"),
                [("a", n % 1000), ("b", (n * 7) % 1000)],
            )
        });
        for r in futures::future::join_all(writes).await {
            r.expect("a load write");
        }
        for n in chunk {
            model.insert(format!("k{n}"), (n % 1000, (n * 7) % 1000));
        }
    }
}

/// Sends `change` to `addr` (the server standalone, a coordinator in a cluster).
async fn alter(addr: SocketAddr, change: SpaceChange) -> Response {
    ask(
        addr,
        Epoch(0),
        Request::AlterSpace {
            space: "t".into(),
            change,
            fence: None,
        },
    )
    .await
}

/// Whether `subspace` of space t exists and is being built.
fn is_building(config: &Configuration, subspace: u16) -> bool {
    let subspaces = &config.space("t").expect("space t").schema.subspaces;
    subspaces
        .get(subspace as usize)
        .is_some_and(|s| s.state == SubspaceState::Building)
}

fn state_of(config: &Configuration, subspace: u16) -> SubspaceState {
    config.space("t").expect("space t").schema.subspaces[subspace as usize].state
}

/// The whole scenario, against `client` and the address that takes alterations.
async fn scenario(client: &Client, admin: SocketAddr) {
    let mut rng = StdRng::seed_from_u64(9);
    let mut model = Model::new();
    load(client, &mut model).await;
    check_searches(client, &model, &mut rng).await;

    // Bad alterations change nothing.
    let before = client.refresh().await.unwrap();
    for bad in [
        SpaceChange::AddSubspace {
            attributes: vec!["nope".into()],
        },
        SpaceChange::AddSubspace {
            attributes: vec!["a".into()],
        },
        SpaceChange::AddSubspace {
            attributes: vec!["k".into()],
        },
        SpaceChange::DropSubspace { subspace: 0 },
        SpaceChange::DropSubspace { subspace: 7 },
    ] {
        match alter(admin, bad.clone()).await {
            Response::Error(e) => assert_eq!(e.status, Status::BadAlteration, "{bad:?}: {e}"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert_eq!(
        client.refresh().await.unwrap().space("t"),
        before.space("t")
    );

    // Add a subspace over b while the clients write and search.
    let added = tokio::spawn(alter(
        admin,
        SpaceChange::AddSubspace {
            attributes: vec!["b".into()],
        },
    ));
    let (mut rounds, mut rounds_while_building) = (0, 0);
    // The first rounds overlap the request itself (the subspace is being built from the epoch
    // that adds it; the request is answered once every server acts on that epoch).
    while !added.is_finished() {
        let building = is_building(&client.refresh().await.unwrap(), 2);
        write_round(client, &mut model, &mut rng).await;
        check_searches(client, &model, &mut rng).await;
        rounds += 1;
        rounds_while_building += usize::from(building);
    }
    assert_eq!(added.await.unwrap(), Response::Done);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        // A round whose searches start while the subspace is being built counts, however long
        // the round takes on a busy machine (the build may end during it).
        let building = is_building(&client.refresh().await.unwrap(), 2);
        write_round(client, &mut model, &mut rng).await;
        check_searches(client, &model, &mut rng).await;
        rounds += 1;
        rounds_while_building += usize::from(building);
        let config = client.refresh().await.unwrap();
        match state_of(&config, 2) {
            SubspaceState::Serving => break,
            SubspaceState::Building => {}
            SubspaceState::Dropped => panic!("dropped"),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the subspace was not built in time: {:?}",
            config.space("t").unwrap().build
        );
    }
    eprintln!("{rounds} rounds, {rounds_while_building} while the subspace was being built");
    assert!(
        rounds_while_building > 0,
        "the searches ran while the subspace was being built"
    );
    // Searches on b now use the new subspace, and still equal the model.
    let explained = client
        .explain("t", vec![Predicate::equals("b", 5i64)])
        .await
        .unwrap();
    assert_eq!(explained.subspace, SubspaceId(2));
    for _ in 0..3 {
        write_round(client, &mut model, &mut rng).await;
        check_searches(client, &model, &mut rng).await;
    }

    // Drop the subspace over a while the clients go on: searches on a fall back to another.
    let dropped = tokio::spawn(alter(admin, SpaceChange::DropSubspace { subspace: 1 }));
    while !dropped.is_finished() {
        write_round(client, &mut model, &mut rng).await;
    }
    assert_eq!(dropped.await.unwrap(), Response::Done);
    let config = client.refresh().await.unwrap();
    assert_eq!(state_of(&config, 1), SubspaceState::Dropped);
    for _ in 0..3 {
        write_round(client, &mut model, &mut rng).await;
        check_searches(client, &model, &mut rng).await;
    }
    let explained = client
        .explain("t", vec![Predicate::equals("a", 5i64)])
        .await
        .unwrap();
    assert_ne!(explained.subspace, SubspaceId(1));
    // No acknowledged write is lost: every key reads as the model says.
    for n in 0..OBJECTS + 200 {
        let key = format!("k{n}");
        let got = client.get("t", key.as_str()).await.unwrap();
        let got = got.map(|r| (r.attributes["a"].clone(), r.attributes["b"].clone()));
        let want = model
            .get(&key)
            .map(|(a, b)| (Value::Int(*a), Value::Int(*b)));
        assert_eq!(got, want, "{key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_space_while_writing_standalone() {
    let mut server = TestServer::start_with(slow_backfill).await;
    let client = server.client().await;
    client.add_space(&space(0)).await.unwrap();
    scenario(&client, server.addr()).await;
    // The alterations survive a restart: the dropped subspace stays dropped, the built one
    // serves.
    server.restart().await;
    let client = server.client().await;
    let config = client.refresh().await.unwrap();
    assert_eq!(state_of(&config, 1), SubspaceState::Dropped);
    assert_eq!(state_of(&config, 2), SubspaceState::Serving);
    let explained = client
        .explain("t", vec![Predicate::equals("b", 5i64)])
        .await
        .unwrap();
    assert_eq!(explained.subspace, SubspaceId(2));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_space_while_writing_in_a_cluster() {
    let cluster = Cluster::start_with(3, true, slow_backfill).await;
    let client = cluster.client().await;
    cluster.add_space(&client, &space(1)).await;
    scenario(&client, cluster.coordinator.local_addr()).await;
    // Every server dropped the subspace's storage and built the new one: its regions are on
    // K servers each.
    let config = client.refresh().await.unwrap();
    cluster.settle(&config).await;
    let t = config.space("t").unwrap();
    assert!(t.replicas[1].is_empty());
    assert!(t.replicas[2].iter().all(|set| set.len() == 2));
}

/// The cuts a re-cut of subspace `id` of space t gets from the space's statistics: its int
/// axes at their values' quantiles (as `tessera recut` computes them).
async fn cuts_from_statistics(client: &Client, id: u16) -> Vec<tessera_types::AxisCuts> {
    let statistics = client.statistics("t").await.expect("statistics");
    let config = client.refresh().await.unwrap();
    let t = config.space("t").expect("space t");
    let axes: Vec<tessera_geometry::AxisData> = t.schema.subspaces[usize::from(id)]
        .dimensions
        .iter()
        .map(|a| tessera_geometry::AxisData::Ordered {
            ty: tessera_types::PrimitiveType::Int,
            values: &statistics.attributes[a.get()],
        })
        .collect();
    tessera_geometry::cuts_from_data(&axes, t.schema.partitions)
}

/// A re-cut while the clients write and search: the statistics count what the model holds,
/// the subspace over `a` is rebuilt at its values' quantiles beside the old one and replaces
/// it; every search equals the model before, during and after, and the new regions all hold
/// objects.
async fn recut_scenario(client: &Client, admin: SocketAddr) {
    let mut rng = StdRng::seed_from_u64(11);
    let mut model = Model::new();
    load(client, &mut model).await;
    let statistics = client.statistics("t").await.expect("statistics");
    let a = &statistics.attributes[1];
    assert_eq!(a.count(), model.len() as u64);
    assert_eq!(a.min(), Some(&Value::Int(0)));
    assert_eq!(a.max(), Some(&Value::Int(999)));
    assert!((950..=1050).contains(&a.distinct()), "{}", a.distinct());

    // Cuts a configuration must not take: refused, nothing changes.
    let before = client.refresh().await.unwrap();
    for bad in [
        vec![tessera_types::AxisCuts::At(vec![5, 3])],
        vec![tessera_types::AxisCuts::At(vec![0, 3])],
        vec![tessera_types::AxisCuts::Equal(0)],
        vec![
            tessera_types::AxisCuts::Equal(2),
            tessera_types::AxisCuts::Equal(2),
        ],
    ] {
        let change = SpaceChange::RecutSubspace {
            subspace: 1,
            cuts: bad.clone(),
        };
        match alter(admin, change).await {
            Response::Error(e) => assert_eq!(e.status, Status::BadAlteration, "{bad:?}: {e}"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    match alter(
        admin,
        SpaceChange::RecutSubspace {
            subspace: 0,
            cuts: vec![],
        },
    )
    .await
    {
        Response::Error(e) => assert_eq!(e.status, Status::BadAlteration, "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        client.refresh().await.unwrap().space("t"),
        before.space("t")
    );

    let cuts = cuts_from_statistics(client, 1).await;
    let recut = tokio::spawn(alter(
        admin,
        SpaceChange::RecutSubspace { subspace: 1, cuts },
    ));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut rounds_while_building = 0;
    loop {
        let building = is_building(&client.refresh().await.unwrap(), 2);
        write_round(client, &mut model, &mut rng).await;
        check_searches(client, &model, &mut rng).await;
        rounds_while_building += usize::from(building);
        let config = client.refresh().await.unwrap();
        let served = config
            .space("t")
            .unwrap()
            .schema
            .subspaces
            .get(2)
            .map(|s| s.state);
        if recut.is_finished() && served == Some(SubspaceState::Serving) {
            // The swap is one epoch: the new one serves exactly when the old one is gone.
            assert_eq!(state_of(&config, 1), SubspaceState::Dropped);
            break;
        }
        assert_ne!(
            state_of(&config, 1),
            SubspaceState::Dropped,
            "dropped before the new one serves"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "the re-cut was not built in time"
        );
    }
    assert_eq!(recut.await.unwrap(), Response::Done);
    assert!(
        rounds_while_building > 0,
        "the searches ran while the re-cut was being built"
    );
    for _ in 0..3 {
        write_round(client, &mut model, &mut rng).await;
        check_searches(client, &model, &mut rng).await;
    }
    // Searches on a now read the re-cut subspace, whose regions all hold objects.
    let explained = client
        .explain("t", vec![Predicate::equals("a", 5i64)])
        .await
        .unwrap();
    assert_eq!(explained.subspace, SubspaceId(2));
    let counts = client.region_counts("t", SubspaceId(2)).await.unwrap();
    let total: u64 = counts.iter().map(|c| c.objects).sum();
    assert_eq!(total, model.len() as u64);
    let mean = total as f64 / counts.len() as f64;
    for c in &counts {
        assert!(
            c.objects > 0 && c.objects as f64 <= 2.0 * mean,
            "{counts:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recut_while_writing_standalone() {
    let mut server = TestServer::start_with(slow_backfill).await;
    let client = server.client().await;
    client.add_space(&space(0)).await.unwrap();
    recut_scenario(&client, server.addr()).await;
    // The swap survives a restart.
    server.restart().await;
    let client = server.client().await;
    let config = client.refresh().await.unwrap();
    assert_eq!(state_of(&config, 1), SubspaceState::Dropped);
    assert_eq!(state_of(&config, 2), SubspaceState::Serving);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recut_while_writing_in_a_cluster() {
    let cluster = Cluster::start_with(3, true, slow_backfill).await;
    let client = cluster.client().await;
    cluster.add_space(&client, &space(1)).await;
    recut_scenario(&client, cluster.coordinator.local_addr()).await;
    let config = client.refresh().await.unwrap();
    cluster.settle(&config).await;
    let t = config.space("t").unwrap();
    assert!(t.replicas[1].is_empty());
    assert!(t.replicas[2].iter().all(|set| set.len() == 2));
}

/// A bibliography whose formula places documents by year (weighted 2) and venue.
const BIB: &str = "space bib dynamic key id create 16 partitions tolerate 1 failure";
const VENUES: [&str; 6] = ["SOSP", "OSDI", "NSDI", "VLDB", "SIGMOD", "EuroSys"];

/// A paper as the clients wrote it: (year, venue, placed by the formula?).
type Paper = (i64, String, bool);
/// What the clients wrote to bib, by key.
type Papers = BTreeMap<String, Paper>;
/// Which papers a search should find (the model's side of it).
type PaperFilter = Box<dyn Fn(&Paper) -> bool>;

/// A year skewed towards the recent, as publication years are: most within the last decade.
fn skewed_year(rng: &mut StdRng) -> i64 {
    let back: f64 = -rng.random::<f64>().max(1e-9).ln() * 5.0;
    2024 - (back as i64).min(40)
}

fn paper(year: i64, venue: &str) -> tessera_client::Document {
    let properties = [
        ("year".to_owned(), tessera_client::DocValue::Int(year)),
        (
            "venue".to_owned(),
            tessera_client::DocValue::String(venue.into()),
        ),
    ];
    tessera_client::Document::new(properties.into_iter().collect())
}

/// Writes `n` papers concurrently (or deletes them), each under the formula or the default
/// one, and records what was acknowledged.
async fn write_papers(client: &Client, papers: &mut Papers, rng: &mut StdRng, keys: &[String]) {
    let mut planned = Vec::new();
    let mut writes = Vec::new();
    for key in keys {
        if papers.contains_key(key) && rng.random_bool(0.1) {
            planned.push((key.clone(), None));
            writes.push(futures::future::Either::Left(
                client.del("bib", key.as_str()),
            ));
            continue;
        }
        let (year, venue) = (skewed_year(rng), VENUES[rng.random_range(0..VENUES.len())]);
        let by_formula = rng.random_bool(0.75);
        let formula = if by_formula { "by_year" } else { "" };
        planned.push((key.clone(), Some((year, venue.to_owned(), by_formula))));
        writes.push(futures::future::Either::Right(
            client.put_document_with_formula("bib", key.as_str(), paper(year, venue), formula),
        ));
    }
    for ((key, value), result) in planned
        .into_iter()
        .zip(futures::future::join_all(writes).await)
    {
        match (value, result) {
            (Some(v), Ok(())) => {
                papers.insert(key, v);
            }
            (None, Ok(())) => {
                papers.remove(&key);
            }
            (_, Err(e)) => panic!("a write of {key} failed: {e}"),
        }
    }
}

/// The keys of one round of writes: 60 draws from the 1 200 loaded keys and 100 new ones,
/// each once (a round's writes are concurrent).
fn paper_round(rng: &mut StdRng) -> Vec<String> {
    (0..60)
        .map(|_| format!("p{}", rng.random_range(0..1300)))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Searches by year (equal, ranges) and by venue and year equal brute-force filtering of
/// the model.
async fn check_paper_searches(client: &Client, papers: &Papers, rng: &mut StdRng) {
    for _ in 0..4 {
        let (y1, y2) = (skewed_year(rng), skewed_year(rng));
        let venue = VENUES[rng.random_range(0..VENUES.len())];
        let (predicates, wanted): (Vec<Predicate>, PaperFilter) = match rng.random_range(0..3) {
            0 => (
                vec![Predicate::equals("year", y1)],
                Box::new(move |p| p.0 == y1),
            ),
            1 => (
                vec![
                    Predicate::new("year", PredicateOp::GreaterEqual(Value::Int(y1.min(y2)))),
                    Predicate::new("year", PredicateOp::LessEqual(Value::Int(y1.max(y2)))),
                ],
                Box::new(move |p| (y1.min(y2)..=y1.max(y2)).contains(&p.0)),
            ),
            _ => (
                vec![
                    Predicate::equals("venue", venue),
                    Predicate::equals("year", y1),
                ],
                Box::new(move |p| p.0 == y1 && p.1 == venue),
            ),
        };
        let expected: Vec<&String> = papers
            .iter()
            .filter(|(_, p)| wanted(p))
            .map(|(k, _)| k)
            .collect();
        let mut found: Vec<String> = client
            .search("bib", predicates.clone())
            .await
            .expect("a search")
            .into_iter()
            .map(|r| match r.key {
                Value::String(k) => k.as_str().expect("text").to_owned(),
                other => panic!("a string key, not {other}"),
            })
            .collect();
        found.sort();
        let found: Vec<&String> = found.iter().collect();
        assert_eq!(found, expected, "search {predicates:?}");
    }
}

/// The re-cut of the overlay `year*2,venue` while documents are written and searched: the
/// statistics of its paths count what the model holds, the overlay is rebuilt at the model's
/// own year quantiles beside the old one, the formula moves to it in the swap, and every
/// search equals the model before, during and after.
async fn overlay_recut_scenario(client: &Client, admin: SocketAddr) {
    let spec = tessera_client::FormulaSpec::parse(Some("by_year"), &["year*2,venue"]).unwrap();
    client.add_formula("bib", spec).await.expect("the formula");
    let mut rng = StdRng::seed_from_u64(0xb1b);
    let mut papers = Papers::new();
    let keys: Vec<String> = (0..1200).map(|n| format!("p{n}")).collect();
    for chunk in keys.chunks(300) {
        write_papers(client, &mut papers, &mut rng, chunk).await;
    }
    let overlay = 2u16;
    let config = client.refresh().await.unwrap();
    let bib = config.space("bib").unwrap();
    assert_eq!(bib.schema.formulas[0].overlays, vec![SubspaceId(overlay)]);

    // The statistics of year and venue count the formula's documents only.
    let statistics = client.statistics("bib").await.expect("statistics");
    let placed: Vec<&Paper> = papers.values().filter(|p| p.2).collect();
    let year = statistics.path("year").expect("year is sketched");
    assert_eq!(year.count(), placed.len() as u64);
    assert_eq!(
        year.min(),
        placed.iter().map(|p| p.0).min().map(Value::Int).as_ref()
    );
    assert_eq!(
        year.max(),
        placed.iter().map(|p| p.0).max().map(Value::Int).as_ref()
    );
    let venue = statistics.path("venue").expect("venue is sketched");
    assert_eq!(venue.distinct(), VENUES.len() as u64);

    // Equal slices of the int axis: every year in one slice.
    let before = client
        .region_counts("bib", SubspaceId(overlay))
        .await
        .unwrap();
    let holding = before.iter().filter(|c| c.objects > 0).count();
    assert!(holding <= 2, "{before:?}");

    // Cut the years at the model's own octiles (distinct years only), venue in halves.
    let mut years: Vec<i64> = placed.iter().map(|p| p.0).collect();
    years.sort_unstable();
    let mut at: Vec<u64> = (1..8)
        .map(|i| tessera_geometry::coordinate(&Value::Int(years[i * years.len() / 8])))
        .collect();
    at.dedup();
    let cuts = vec![
        tessera_types::AxisCuts::At(at),
        tessera_types::AxisCuts::Equal(2),
    ];
    let change = SpaceChange::RecutSubspace {
        subspace: overlay,
        cuts,
    };
    let recut = tokio::spawn(ask(
        admin,
        Epoch(0),
        Request::AlterSpace {
            space: "bib".into(),
            change,
            fence: None,
        },
    ));
    let new = SubspaceId(overlay + 1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut rounds_while_building = 0;
    loop {
        let config = client.refresh().await.unwrap();
        let subspaces = &config.space("bib").unwrap().schema.subspaces;
        let state = subspaces.get(new.get()).map(|s| s.state);
        rounds_while_building += usize::from(state == Some(SubspaceState::Building));
        if recut.is_finished() && state == Some(SubspaceState::Serving) {
            assert_eq!(
                subspaces[usize::from(overlay)].state,
                SubspaceState::Dropped
            );
            assert_eq!(
                config.space("bib").unwrap().schema.formulas[0].overlays,
                vec![new]
            );
            break;
        }
        assert_ne!(
            subspaces[usize::from(overlay)].state,
            SubspaceState::Dropped
        );
        let round = paper_round(&mut rng);
        write_papers(client, &mut papers, &mut rng, &round).await;
        check_paper_searches(client, &papers, &mut rng).await;
        assert!(
            tokio::time::Instant::now() < deadline,
            "the re-cut was not built in time"
        );
    }
    assert_eq!(recut.await.unwrap(), Response::Done);
    assert!(
        rounds_while_building > 0,
        "the searches ran while the re-cut was being built"
    );
    for _ in 0..3 {
        let round = paper_round(&mut rng);
        write_papers(client, &mut papers, &mut rng, &round).await;
        check_paper_searches(client, &papers, &mut rng).await;
    }
    // The formula's documents now spread over the re-cut overlay, and a year's search
    // reads one year interval: at most the two venue halves.
    let after = client.region_counts("bib", new).await.unwrap();
    let placed = papers.values().filter(|p| p.2).count() as u64;
    assert_eq!(after.iter().map(|c| c.objects).sum::<u64>(), placed);
    assert!(
        after.iter().filter(|c| c.objects > 0).count() >= 12,
        "{after:?}"
    );
    let explained = client
        .explain("bib", vec![Predicate::equals("year", 2020i64)])
        .await
        .unwrap();
    let part = explained
        .parts
        .iter()
        .find(|p| p.subspace == new)
        .expect("reads the re-cut overlay");
    assert!(part.regions_contacted <= 2, "{explained:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_recut_while_writing_standalone() {
    let mut server = TestServer::start_with(slow_backfill).await;
    let client = server.client().await;
    client.add_space(BIB).await.unwrap();
    overlay_recut_scenario(&client, server.addr()).await;
    server.restart().await;
    let client = server.client().await;
    let config = client.refresh().await.unwrap();
    assert_eq!(
        config.space("bib").unwrap().schema.formulas[0].overlays,
        vec![SubspaceId(3)]
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlay_recut_while_writing_in_a_cluster() {
    let cluster = Cluster::start_with(3, true, slow_backfill).await;
    let client = cluster.client().await;
    cluster.add_space(&client, BIB).await;
    overlay_recut_scenario(&client, cluster.coordinator.local_addr()).await;
}

/// A server keeps a space's statistics between requests and reads them again only once the
/// writes since reach a tenth of the objects they counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_are_kept_until_a_tenth_of_the_objects_change() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.add_space(&space(0)).await.unwrap();
    let mut model = Model::new();
    load(&client, &mut model).await;
    let count = |s: &tessera_protocol::SpaceStatistics| s.attributes[0].count();
    assert_eq!(
        count(&client.statistics("t").await.unwrap()),
        OBJECTS as u64
    );
    let deletes = |range: std::ops::Range<i64>| {
        let client = client.clone();
        async move {
            for n in range {
                client.del("t", format!("k{n}")).await.expect("a delete");
            }
        }
    };
    // 100 deletes of 3000 objects: under a tenth, the statistics kept still answer.
    deletes(0..100).await;
    assert_eq!(
        count(&client.statistics("t").await.unwrap()),
        OBJECTS as u64
    );
    // 350 in all: over a tenth, they are read again.
    deletes(100..350).await;
    assert_eq!(
        count(&client.statistics("t").await.unwrap()),
        OBJECTS as u64 - 350
    );
    server.shutdown().await;
}
