//! Ordered and tagged placements (seed 003 §2.1) and their reads, `get_by_range` and
//! `get_by_tags`, against a model kept beside them (a map of what was written), standalone
//! and in a cluster: skewed keys, keys outside the declared domain, string keys sharing
//! their first 8 bytes, objects with more tags than the curve has axes, tags that change.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::cluster::Cluster;
use common::{error, TestServer};
use tessera_client::{Client, Status, Value};

const TIMELINE: &str = "space timeline key int id attributes string text \
                        create 16 partitions placement ordered from 0 to 10000";
const USERS: &str = "space users key name attributes int n create 8 partitions placement ordered";
const TWEETS: &str = "space tweets key int id attributes string text, set(string) tags, \
                      set(string) seen create 16 partitions placement tagged tags spread 2";
const PLAIN: &str = "space plain key int id attributes set(string) labels create 16 partitions";

/// A small deterministic generator (the test must not depend on a random seed to fail).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Skewed int keys: most small, some large, some negative, some past the domain's end.
fn skewed_key(rng: &mut Lcg) -> i64 {
    match rng.below(10) {
        0..=5 => rng.below(100) as i64,
        6 | 7 => rng.below(10_000) as i64,
        8 => -(rng.below(1000) as i64),
        _ => 10_000 + rng.below(1_000_000) as i64,
    }
}

const VOCABULARY: [&str; 8] = ["#a", "#b", "#c", "@u1", "@u2", "@u3", "#long_tag", "x"];

fn tag_set(rng: &mut Lcg) -> BTreeSet<String> {
    // 0 to 4 tags: more than the curve's 2 axes lands on its overflow cell.
    (0..rng.below(5))
        .map(|_| VOCABULARY[rng.below(VOCABULARY.len() as u64) as usize].to_owned())
        .collect()
}

fn set_value(tags: &BTreeSet<String>) -> Value {
    Value::Set(tags.iter().map(|t| Value::from(t.as_str())).collect())
}

fn keys_of(records: &[tessera_client::Record]) -> Vec<Value> {
    records.iter().map(|r| r.key.clone()).collect()
}

async fn ordered_ranges(client: &Client) {
    let mut rng = Lcg(7);
    let mut model: BTreeMap<i64, String> = BTreeMap::new();
    for n in 0..300 {
        let key = skewed_key(&mut rng);
        let text = format!("t{n}");
        client
            .put("timeline", key, [("text", text.as_str())])
            .await
            .unwrap();
        model.insert(key, text);
    }
    // Some deleted.
    let gone: Vec<i64> = model.keys().copied().step_by(7).collect();
    for key in gone {
        client.del("timeline", key).await.unwrap();
        model.remove(&key);
    }
    let ranges = [
        (0, 100),
        (5, 6),
        (-1000, 0),
        (50, 5000),
        (9_000, 2_000_000),
        (i64::MIN, i64::MAX),
        (300, 300),
        (400, 200),
    ];
    for (from, to) in ranges {
        let expected: Vec<Value> = model
            .range(from..to.max(from))
            .map(|(k, _)| Value::Int(*k))
            .collect();
        let got = client
            .get_by_range("timeline", from, to, None)
            .await
            .unwrap();
        assert_eq!(keys_of(&got), expected, "[{from}, {to})");
        for r in &got {
            let Value::Int(k) = r.key else {
                panic!("int keys")
            };
            assert_eq!(r.attributes["text"], Value::from(model[&k].as_str()));
        }
        let limited = client
            .get_by_range("timeline", from, to, Some(5))
            .await
            .unwrap();
        assert_eq!(
            keys_of(&limited),
            expected.iter().take(5).cloned().collect::<Vec<_>>()
        );
    }
    // A narrow range inside the domain reads the regions it overlaps, not all of them.
    let predicates = tessera_client::range_predicates(
        &client.describe_space("timeline").await.unwrap(),
        Value::Int(1000),
        Value::Int(1500),
    );
    let e = client.explain("timeline", predicates).await.unwrap();
    assert_eq!(e.subspace.0, 0);
    assert_eq!(e.subspace_regions, 16);
    assert!(e.regions_contacted <= 2, "{e:?}");
}

async fn ordered_string_keys(client: &Client) {
    let mut model = BTreeSet::new();
    let mut rng = Lcg(11);
    for n in 0..120 {
        // Keys sharing 8 leading bytes lie at one coordinate; others spread by their bytes.
        let name = match n % 3 {
            0 => format!("user0000{:03}", rng.below(1000)),
            1 => format!("{}{}", (b'a' + rng.below(26) as u8) as char, rng.below(100)),
            _ => format!("Z{}", rng.below(50)),
        };
        client
            .put("users", name.as_str(), [("n", n)])
            .await
            .unwrap();
        model.insert(name);
    }
    let ranges = [
        ("user0000100", "user0000500"),
        ("a", "m"),
        ("", "b"),
        ("Z", "a"),
        ("user0000", "user0001"),
        ("user0000300", "user0000700"),
    ];
    let check_ranges = async |model: &BTreeSet<String>| {
        for (from, to) in ranges {
            let expected: Vec<Value> = model
                .range(from.to_owned()..to.to_owned())
                .map(|k| Value::from(k.as_str()))
                .collect();
            let got = client.get_by_range("users", from, to, None).await.unwrap();
            assert_eq!(keys_of(&got), expected, "[{from:?}, {to:?})");
        }
    };
    check_ranges(&model).await;
    // Split the region of the user0000… keys (one coordinate) between them, twice: they move
    // apart, ranges still find them, and a range of them reads only the regions it reaches.
    for at in ["user0000300", "user0000700"] {
        let at = Value::from(at);
        let schema = client.describe_space("users").await.unwrap();
        let keys = &tessera_geometry::tessellations(&schema)[0];
        let region = tessera_geometry::key_region(keys, &at);
        client
            .split_key_region("users", region.0, at)
            .await
            .unwrap();
    }
    client.refresh().await.unwrap();
    check_ranges(&model).await;
    let schema = client.describe_space("users").await.unwrap();
    let narrow = tessera_client::range_predicates(
        &schema,
        Value::from("user0000310"),
        Value::from("user0000690"),
    );
    let e = client.explain("users", narrow).await.unwrap();
    assert_eq!((e.subspace.0, e.regions_contacted), (0, 1), "{e:?}");
}

async fn tagged_reads(client: &Client, space: &str, attribute: &str) {
    let mut rng = Lcg(3);
    let mut model: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
    // Every key, then a fifth of them again: their tags change, so objects move along the
    // curve (and off and onto its overflow cell).
    for key in (0..250i64).chain((0..250i64).step_by(5)) {
        let tags = tag_set(&mut rng);
        client
            .put(space, key, [(attribute, set_value(&tags))])
            .await
            .unwrap();
        model.insert(key, tags);
    }
    for key in (0..250i64).step_by(11) {
        client.del(space, key).await.unwrap();
        model.remove(&key);
    }
    let queries: Vec<Vec<&str>> = vec![
        vec!["#a"],
        vec!["@u2"],
        vec!["#a", "@u1"],
        vec!["#b", "#c", "x"],
        vec!["#long_tag", "#a", "@u3", "x"],
        vec!["absent"],
    ];
    for query in queries {
        let wanted: BTreeSet<String> = query.iter().map(|s| (*s).to_owned()).collect();
        let expected: Vec<Value> = model
            .iter()
            .filter(|(_, tags)| wanted.is_subset(tags))
            .map(|(k, _)| Value::Int(*k))
            .collect();
        let tags: Vec<String> = query.iter().map(|s| (*s).to_owned()).collect();
        let got = client.get_by_tags(space, tags).await.unwrap();
        assert_eq!(keys_of(&got), expected, "{query:?} in {space}");
    }
}

async fn tagged_explain(client: &Client) {
    let schema = client.describe_space("tweets").await.unwrap();
    let one = tessera_client::tags_predicates(&schema, vec!["#a".into()]).unwrap();
    let e = client.explain("tweets", one).await.unwrap();
    let tag_subspace = schema.tag_subspace().expect("a tag subspace");
    assert_eq!(e.subspace, tag_subspace, "{e:?}");
    assert!(e.regions_contacted < e.subspace_regions, "{e:?}");
    // The overflow cell only, for more tags than axes: one stretch, spread over 2 regions.
    let many =
        tessera_client::tags_predicates(&schema, vec!["#a".into(), "#b".into(), "#c".into()])
            .unwrap();
    let e = client.explain("tweets", many).await.unwrap();
    assert_eq!(e.regions_contacted, 2, "{e:?}");
    assert!(e.servers_fewest <= e.servers_each_region, "{e:?}");
}

async fn bad_reads(client: &Client) {
    // No set(string) attribute to read tags from, or a key of the wrong type: typed errors.
    let (status, message) = error(client.get_by_tags("timeline", vec!["#a".into()]).await);
    assert_eq!(status, Status::WrongType, "{message}");
    let (status, message) = error(client.get_by_range("timeline", "a", "b", None).await);
    assert_eq!(status, Status::WrongType, "{message}");
    let (status, _) = error(client.get_by_range("nowhere", 0, 1, None).await);
    assert_eq!(status, Status::UnknownSpace);
}

async fn all_placements(client: &Client) {
    for description in [TIMELINE, USERS, TWEETS, PLAIN] {
        client.add_space(description).await.unwrap();
    }
    ordered_ranges(client).await;
    ordered_string_keys(client).await;
    tagged_reads(client, "tweets", "tags").await;
    // The same reads in a space placed at random: every region is read, the answers agree.
    tagged_reads(client, "plain", "labels").await;
    tagged_explain(client).await;
    bad_reads(client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placements_standalone() {
    let server = TestServer::start().await;
    let client = server.client().await;
    all_placements(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placements_in_a_cluster() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    all_placements(&client).await;
}
