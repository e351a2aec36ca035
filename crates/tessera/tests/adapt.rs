//! Adaptive spaces (`adapt on`), standalone and on a cluster of real processes: under a
//! workload of searches by `city`, a space declared `adapt on` with no subspace gets one over
//! `city` by itself (decided by the driver from the trace, logged in the configuration, built
//! while the clients go on), while the same space without `adapt on` under the same workload
//! keeps its configuration. All along, every search checked equals brute-force filtering of
//! what the clients wrote (a model kept by the test), and at the end every object reads back
//! as last written: no write lost. An adaptation left open in the log (as by a coordinator
//! leader deposed in the middle of one) is resumed and finished first, and a change fenced by
//! a term the coordinators are not in is refused.

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use common::cluster::Cluster;
use common::{Daemon, TESSERA};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tessera_client::{
    Adaptation, AdaptationEvent, AdaptationStep, Client, Predicate, SpaceChange, Status,
    SubspaceState, Value,
};

const OBJECTS: usize = 1500;
const CITIES: usize = 30;

/// key -> (city, tel), as acknowledged.
type Model = BTreeMap<String, (String, String)>;

fn description(name: &str, tolerate: u32, adapt: &str) -> String {
    format!(
        "space {name} key k attributes string city, string tel create 8 partitions \
         tolerate {tolerate} failures {adapt}"
    )
}

async fn load(client: &Client, space: &str, model: &mut Model) {
    for chunk in (0..OBJECTS).collect::<Vec<_>>().chunks(500) {
        let writes = chunk.iter().map(|n| {
            let city = format!("c{}", n % CITIES);
            client.put(
                space,
                format!("k{n}"),
                [("city", city), ("tel", format!("t{n}"))],
            )
        });
        for r in futures::future::join_all(writes).await {
            r.expect("a load write");
        }
        for n in chunk {
            model.insert(
                format!("k{n}"),
                (format!("c{}", n % CITIES), format!("t{n}")),
            );
        }
    }
}

/// One round: 10 updates of `tel` (acknowledged before the searches), then 60 searches by
/// city, two of them compared with the model in full.
async fn round(client: &Client, space: &str, model: &mut Model, rng: &mut StdRng) {
    let mut keys = std::collections::BTreeSet::new();
    while keys.len() < 10 {
        keys.insert(rng.random_range(0..OBJECTS));
    }
    let tel: u32 = rng.random();
    let writes = keys
        .iter()
        .map(|n| client.put(space, format!("k{n}"), [("tel", format!("u{tel}"))]));
    for r in futures::future::join_all(writes).await {
        r.expect("an update");
    }
    for n in &keys {
        model.get_mut(&format!("k{n}")).expect("loaded").1 = format!("u{tel}");
    }
    for i in 0..60 {
        let city = format!("c{}", rng.random_range(0..CITIES));
        let found = client
            .search(space, vec![Predicate::equals("city", city.as_str())])
            .await
            .expect("a search");
        if i < 2 {
            check(space, &city, found, model);
        }
    }
}

fn string(value: &Value) -> String {
    match value {
        Value::String(s) => s.as_str().expect("text").to_owned(),
        other => panic!("a string, not {other:?}"),
    }
}

fn check(space: &str, city: &str, found: Vec<tessera_client::Record>, model: &Model) {
    let mut found: Vec<(String, String)> = found
        .into_iter()
        .map(|r| (string(&r.key), string(&r.attributes["tel"])))
        .collect();
    found.sort();
    let expected: Vec<(String, String)> = model
        .iter()
        .filter(|(_, (c, _))| c == city)
        .map(|(k, (_, t))| (k.clone(), t.clone()))
        .collect();
    assert_eq!(found, expected, "search of {space} by city {city}");
}

/// The written subspaces of `space` besides the key's, by attribute names.
fn subspaces(config: &tessera_client::Configuration, space: &str) -> Vec<Vec<String>> {
    config
        .space(space)
        .expect("the space")
        .written_attribute_sets()
}

async fn scenario(addr: &str, tolerate: u32) {
    let client = Client::connect(addr).await.expect("connect");
    client
        .add_space(&description("adaptive", tolerate, "adapt on"))
        .await
        .unwrap();
    client
        .add_space(&description("fixed", tolerate, ""))
        .await
        .unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let (mut adaptive, mut fixed) = (Model::new(), Model::new());
    load(&client, "adaptive", &mut adaptive).await;
    load(&client, "fixed", &mut fixed).await;

    // A space that does not adapt cannot log an adaptation.
    let started = |to: &str| {
        SpaceChange::LogAdaptation(AdaptationStep {
            term: 77,
            event: AdaptationEvent::Started,
            adaptation: Adaptation {
                from: vec![],
                to: vec![vec![to.into()]],
                predicted_from_ops_s: 1,
                predicted_to_ops_s: 2,
                observations: 1,
                period_s: 1,
            },
        })
    };
    let refused = client
        .alter_space("fixed", started("city"))
        .await
        .unwrap_err();
    assert_eq!(refused.status(), Some(Status::BadAlteration), "{refused}");
    // A change fenced by a term the coordinators are not in changes nothing.
    let add_city = SpaceChange::AddSubspace {
        attributes: vec!["city".into()],
    };
    let fenced = client
        .alter_space_fenced("fixed", add_city, Some(77))
        .await
        .unwrap_err();
    assert_eq!(fenced.status(), Some(Status::BadAlteration), "{fenced}");
    assert!(fenced.to_string().contains("fenced"), "{fenced}");
    // An adaptation to a subspace over tel, left open by a driver of term 77 that is gone: the
    // driver resumes it before it observes anything.
    client
        .alter_space("adaptive", started("tel"))
        .await
        .unwrap();

    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut rounds = 0;
    let mut rounds_while_building = 0;
    loop {
        round(&client, "adaptive", &mut adaptive, &mut rng).await;
        round(&client, "fixed", &mut fixed, &mut rng).await;
        rounds += 1;
        let config = client.refresh().await.unwrap();
        let space = config.space("adaptive").unwrap();
        if space.build.is_some() {
            rounds_while_building += 1;
        }
        let serving_city = space.schema.searchable_subspaces().any(|id| {
            let s = space.schema.subspace(id);
            s.state == SubspaceState::Serving
                && s.dimensions.len() == 1
                && space.schema.attribute(s.dimensions[0]).name == "city"
        });
        // Done once the driver logged its adaptation finished (after the drops).
        let finished =
            space.adaptations.len() > 3 && space.adaptations.last().is_some_and(|r| !r.is_open());
        if serving_city && space.build.is_none() && finished {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no adaptation after {rounds} rounds: {:?}",
            subspaces(&config, "adaptive")
        );
    }
    eprintln!("{rounds} rounds, {rounds_while_building} while building");

    let config = client.refresh().await.unwrap();
    let space = config.space("adaptive").unwrap();
    // The open one resumed and finished by the driver, in its term; then its own, started
    // and finished.
    let steps: Vec<(&AdaptationEvent, u64)> = space
        .adaptations
        .iter()
        .map(|r| (&r.step.event, r.step.term))
        .collect();
    let term = steps.last().expect("logged").1;
    assert_ne!(term, 77);
    assert_eq!(
        steps,
        [
            (&AdaptationEvent::Started, 77),
            (&AdaptationEvent::Resumed, term),
            (&AdaptationEvent::Finished, term),
            (&AdaptationEvent::Started, term),
            (&AdaptationEvent::Finished, term),
        ],
        "{:?}",
        space.adaptations
    );
    let a = &space.adaptations[3].step.adaptation;
    assert_eq!(a.from, vec![vec!["tel".to_owned()]], "resumed first");
    assert!(a.to.contains(&vec!["city".to_owned()]), "{a:?}");
    assert_eq!(subspaces(&config, "adaptive"), a.to);
    assert!(
        a.predicted_to_ops_s as f64 >= 1.2 * a.predicted_from_ops_s as f64,
        "{a:?}"
    );
    assert_eq!((a.observations, a.period_s), (3, 1));
    // The same workload on the space that does not adapt changed nothing.
    let fixed_config = config.space("fixed").unwrap();
    assert!(fixed_config.adaptations.is_empty());
    assert_eq!(subspaces(&config, "fixed"), Vec::<Vec<String>>::new());

    // Searches by city now visit one region, and every one equals the model; every object
    // reads back as last written.
    let explained = client
        .explain("adaptive", vec![Predicate::equals("city", "c1")])
        .await
        .unwrap();
    assert_eq!(explained.regions_contacted, 1, "{explained:?}");
    for c in 0..CITIES {
        let city = format!("c{c}");
        for (space, model) in [("adaptive", &adaptive), ("fixed", &fixed)] {
            let found = client
                .search(space, vec![Predicate::equals("city", city.as_str())])
                .await
                .unwrap();
            check(space, &city, found, model);
        }
    }
    for (key, (city, tel)) in &adaptive {
        let record = client
            .get("adaptive", key.as_str())
            .await
            .unwrap()
            .expect("no write lost");
        assert_eq!(
            (
                string(&record.attributes["city"]),
                string(&record.attributes["tel"])
            ),
            (city.clone(), tel.clone())
        );
    }

    // `tessera status` lists the adaptation; `alter-space … adapt off` turns it off.
    let status = Command::new(TESSERA)
        .args(["--addr", addr, "status"])
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("resumed at epoch"), "{status}");
    assert!(status.contains("finished at epoch"), "{status}");
    assert!(status.contains("-> {city}"), "{status}");
    let off = Command::new(TESSERA)
        .args([
            "--addr",
            addr,
            "alter-space",
            "adaptive",
            "adapt",
            "off",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(off.status.success(), "{off:?}");
    let config = client.refresh().await.unwrap();
    assert!(!config.space("adaptive").unwrap().schema.adapt);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_space_adapts_to_its_workload() {
    let dir = tempfile::tempdir().unwrap();
    let dev = Daemon::start(
        &[
            "dev",
            "--listen",
            "127.0.0.1:0",
            "--adapt-period-s",
            "1",
            "--data-dir",
        ],
        dir.path(),
    );
    scenario(&dev.addr, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_space_adapts_to_its_workload() {
    let cluster = Cluster::start(1, 3, &["--adapt-period-s", "1"]);
    scenario(&cluster.addresses(), 1).await;
}
