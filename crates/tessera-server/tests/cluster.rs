//! Cluster servers in one process, with a real coordinator: what a cluster server refuses,
//! what it answers only as point leader or region owner, peers that send garbage, and a
//! restart that keeps the server's identity and data.

mod common;

use std::time::Duration;

use common::cluster::{ask, peer_connection, server, Cluster};
use futures::{SinkExt, StreamExt};
use tessera_client::{Funcall, FuncallOp, Status, Value};
use tessera_protocol::{Configuration, RegionsOf, Request, Response, SearchAnswer};
use tessera_server::Server;
use tessera_types::{ServerId, SubspaceId};

const SPACE: &str =
    "space t key k attributes int x subspace x create 8 partitions tolerate 1 failure";

fn status_of(response: Response) -> (Status, String) {
    match response {
        Response::Error(e) => (e.status, e.message),
        other => panic!("expected an error, got {other:?}"),
    }
}

async fn settle(cluster: &Cluster, config: &Configuration) {
    cluster.settle(config).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_server_answers_only_for_what_it_owns() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    client.add_space(SPACE).await.unwrap();
    let config = client.configuration();
    settle(&cluster, &config).await;
    let space = config.space("t").unwrap().clone();
    let epoch = config.epoch;

    // Every replica of a key's region answers a get of it (the point leader and the other);
    // a server outside the region sends the client elsewhere.
    client.put("t", "a", [("x", 5i64)]).await.unwrap();
    let tessellation = &space.tessellations()[0];
    let region = tessellation.region_of(&[tessera_geometry::key_coordinate(&Value::from("a"))]);
    let replicas = space.replicas_of(SubspaceId::KEY, region);
    assert_eq!(replicas.len(), 2, "tolerate 1 failure: two replicas");
    let get = |space: &str| Request::Get {
        space: space.into(),
        key: Value::from("a"),
    };
    for replica in replicas {
        match ask(cluster.server_of(*replica).local_addr(), epoch, get("t")).await {
            Response::Object(Some(o)) => assert_eq!(o.values[1], Value::Int(5)),
            other => panic!("replica {replica} of the key region answers: {other:?}"),
        }
    }
    let outside = cluster
        .servers
        .iter()
        .find(|s| !replicas.contains(&s.id()))
        .unwrap();
    let (status, message) = status_of(ask(outside.local_addr(), epoch, get("t")).await);
    assert_eq!(status, Status::StaleEpoch, "{message}");
    // The replica that does not lead the key refuses to order a write of it.
    let other = cluster.server_of(replicas[1]);
    let put = Request::Put {
        space: "t".into(),
        key: Value::from("a"),
        mode: tessera_protocol::WriteMode::Upsert,
        conditions: vec![],
        funcalls: vec![tessera_types::Funcall::set("x", 9i64)],
    };
    let (status, _) = status_of(ask(other.local_addr(), epoch, put).await);
    assert_eq!(
        status,
        Status::StaleEpoch,
        "only the point leader orders writes"
    );
    assert_eq!(
        client.get("t", "a").await.unwrap().unwrap().attributes["x"],
        Value::Int(5),
        "nothing changed"
    );
    // A point search (x fixed: one cell of one region) is answered on the connection's task.
    let found = client
        .search("t", vec![tessera_client::Predicate::equals("x", 5i64)])
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].key, Value::from("a"));
    assert!(client
        .search("t", vec![tessera_client::Predicate::equals("x", 6i64)])
        .await
        .unwrap()
        .is_empty());

    // Regions: a server searches only those it owns, and names the bad ones.
    let x = SubspaceId(1);
    let regions = space.replicas[1].len() as u32;
    let not_owned = (0..regions).find(|&r| {
        !space
            .replicas_of(x, tessera_geometry::RegionIndex(r))
            .contains(&other.id())
    });
    let search = |subspace, regions: Vec<u32>| Request::SearchRegions {
        space: "t".into(),
        predicates: vec![],
        parts: vec![RegionsOf { subspace, regions }],
        answer: SearchAnswer::Matches,
        follow_stubs: false,
    };
    if let Some(r) = not_owned {
        let (status, message) = status_of(ask(other.local_addr(), epoch, search(x, vec![r])).await);
        assert_eq!(status, Status::StaleEpoch, "{message}");
        // The same for a point search, which takes the inline path.
        let point = Request::SearchRegions {
            space: "t".into(),
            predicates: vec![tessera_types::Predicate::equals("x", 5i64)],
            parts: vec![RegionsOf {
                subspace: x,
                regions: vec![r],
            }],
            answer: SearchAnswer::Matches,
            follow_stubs: false,
        };
        let (status, message) = status_of(ask(other.local_addr(), epoch, point).await);
        assert_eq!(status, Status::StaleEpoch, "{message}");
    }
    let (status, message) =
        status_of(ask(other.local_addr(), epoch, search(x, vec![regions])).await);
    assert_eq!(status, Status::Malformed, "{message}");
    assert!(message.contains("regions"), "{message}");
    let (status, _) =
        status_of(ask(other.local_addr(), epoch, search(SubspaceId(9), vec![0])).await);
    assert_eq!(status, Status::Malformed);

    // A search of the whole space, as a client sends the one server that holds it all (every
    // key region), is refused by a server that does not hold some key region: the client acts
    // on another configuration.
    let key_regions = space.replicas[0].len() as u32;
    let count_all = Request::SearchRegions {
        space: "t".into(),
        predicates: vec![],
        parts: vec![RegionsOf {
            subspace: SubspaceId::KEY,
            regions: (0..key_regions).collect(),
        }],
        answer: SearchAnswer::Count,
        follow_stubs: false,
    };
    // Two replicas of each region among three servers: some server lacks one.
    let lacking = cluster
        .servers
        .iter()
        .find(|s| {
            (0..key_regions).any(|r| {
                !space
                    .replicas_of(SubspaceId::KEY, tessera_geometry::RegionIndex(r))
                    .contains(&s.id())
            })
        })
        .expect("a server without some key region");
    let (status, message) = status_of(ask(lacking.local_addr(), epoch, count_all).await);
    assert_eq!(status, Status::StaleEpoch, "{message}");
    // Only a server that leads every key region follows stubs to their documents: `other`
    // does not lead the key region of "a", so it refuses to, even for regions it holds.
    let held: Vec<u32> = (0..regions)
        .filter(|&r| {
            space
                .replicas_of(x, tessera_geometry::RegionIndex(r))
                .contains(&other.id())
        })
        .collect();
    let follow = Request::SearchRegions {
        space: "t".into(),
        predicates: vec![],
        parts: vec![RegionsOf {
            subspace: x,
            regions: held.clone(),
        }],
        answer: SearchAnswer::Count,
        follow_stubs: true,
    };
    let (status, message) = status_of(ask(other.local_addr(), epoch, follow).await);
    assert_eq!(status, Status::StaleEpoch, "{message}");
    assert!(message.contains("refresh"), "{message}");
    // Without following stubs (a typed space has none) it counts its share: the one object,
    // x = 5, if `other` holds its region of x.
    let of_a =
        space.tessellations()[x.get()].region_of(&[tessera_geometry::coordinate(&Value::Int(5))]);
    let expected = u64::from(held.contains(&of_a.0));
    let count_held = Request::SearchRegions {
        space: "t".into(),
        predicates: vec![],
        parts: vec![RegionsOf {
            subspace: x,
            regions: held,
        }],
        answer: SearchAnswer::Count,
        follow_stubs: false,
    };
    match ask(other.local_addr(), epoch, count_held).await {
        Response::Count(n) => assert_eq!(n, expected),
        other => panic!("a count of regions it holds: {other:?}"),
    }

    // What belongs to coordinators is refused with a reason.
    for request in [
        Request::AddSpace {
            description: "space u key k".into(),
        },
        Request::RegisterServer {
            token: 1,
            address: "x:1".into(),
            incarnation: 1,
        },
    ] {
        let (status, message) = status_of(ask(other.local_addr(), epoch, request).await);
        assert_eq!(status, Status::Malformed, "{message}");
    }
    assert_eq!(
        client.list_spaces().await.unwrap().len(),
        1,
        "no space was added by a server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_sends_garbage_is_cut_off_and_nothing_changes() {
    let cluster = Cluster::start(2).await;
    let client = cluster.client().await;
    client.add_space(SPACE).await.unwrap();
    settle(&cluster, &client.configuration()).await;
    client.put("t", "k", [("x", 1i64)]).await.unwrap();
    let target = cluster.servers[0].local_addr();
    let mut conn = peer_connection(target, ServerId(99)).await;
    conn.send(bytes::Bytes::from_static(
        b"\x01garbage that is no envelope",
    ))
    .await
    .unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(10), conn.next())
        .await
        .expect("closed in time");
    assert!(
        closed.is_none_or(|r| r.is_err()),
        "the server closes a peer connection that sends garbage"
    );
    // The cluster still works.
    client.put("t", "k", [("x", 2i64)]).await.unwrap();
    assert_eq!(
        client.get("t", "k").await.unwrap().unwrap().attributes["x"],
        Value::Int(2)
    );
    let all = client.search("t", vec![]).await.unwrap();
    assert_eq!(all.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_keeps_its_identity_and_its_data() {
    let mut cluster = Cluster::start(2).await;
    let client = cluster.client().await;
    client.add_space(SPACE).await.unwrap();
    settle(&cluster, &client.configuration()).await;
    for n in 0..50i64 {
        client
            .put("t", format!("k{n}").as_str(), [("x", n)])
            .await
            .unwrap();
    }
    let before: Vec<ServerId> = cluster.servers.iter().map(Server::id).collect();
    let servers = std::mem::take(&mut cluster.servers);
    for s in servers {
        s.shutdown().await;
    }
    for n in 0..2 {
        cluster
            .servers
            .push(server(cluster.dir.path(), n, cluster.coordinator.local_addr()).await);
    }
    let after: Vec<ServerId> = cluster.servers.iter().map(Server::id).collect();
    assert_eq!(
        before, after,
        "each data directory comes back as the same server"
    );
    assert_eq!(
        client.refresh().await.unwrap().servers.len(),
        2,
        "no new server was registered"
    );
    let found = client.search("t", vec![]).await.unwrap();
    assert_eq!(
        found.len(),
        50,
        "every acknowledged write survived the restart"
    );
    for n in 0..50i64 {
        let got = client
            .get("t", format!("k{n}").as_str())
            .await
            .unwrap()
            .expect("kept");
        assert_eq!(got.attributes["x"], Value::Int(n));
    }
}

/// A cluster client's group update skips an object it would make too large, as a standalone
/// server's does (tests/operations.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_group_update_skips_objects_it_would_make_too_large() {
    let cluster = Cluster::start(2).await;
    let client = cluster.client().await;
    cluster
        .add_space(
            &client,
            "space g key k attributes string s, int n create 8 partitions",
        )
        .await;
    let limit = tessera_types::constants::OBJECT_BYTES_MAX;
    client.put("g", "small", [("s", "x")]).await.unwrap();
    client
        .put("g", "big", [("s", "y".repeat(limit - 100))])
        .await
        .unwrap();
    let before = client.get("g", "big").await.unwrap().unwrap();
    let grow = vec![Funcall::new("s", FuncallOp::StringAppend, "z".repeat(200))];
    assert_eq!(client.group_update("g", vec![], grow).await.unwrap(), 1);
    let small = client.get("g", "small").await.unwrap().unwrap();
    assert_eq!(
        small.attributes["s"],
        Value::from(format!("x{}", "z".repeat(200)).as_str())
    );
    assert_eq!(
        client.get("g", "big").await.unwrap().unwrap(),
        before,
        "skipped, unchanged"
    );
}

/// A cluster client's `multi_get` (one request per point leader) answers what each `get`
/// answers; a server refuses a request naming a key it does not lead, whole; after a server
/// stops, the client still answers every key (reading again on a fresh configuration).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_multi_get_answers_what_gets_answer() {
    let mut cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    cluster.add_space(&client, SPACE).await;
    for n in 0..120i64 {
        client.put("t", format!("k{n}"), [("x", n)]).await.unwrap();
    }
    let keys: Vec<Value> = (0..150)
        .map(|n| Value::from(format!("k{n}").as_str()))
        .collect();
    let expected = |got: &[Option<tessera_client::Record>]| {
        for (n, r) in got.iter().enumerate() {
            let x = r.as_ref().map(|r| r.attributes["x"].clone());
            let wanted = (n < 120).then_some(Value::Int(n as i64));
            assert_eq!(x, wanted, "k{n}");
        }
    };
    expected(&client.multi_get("t", keys.clone()).await.unwrap());
    // A GetMany naming a key another server leads is refused whole, and changes nothing.
    let config = client.configuration();
    let space = config.space("t").unwrap();
    let leader_of = |key: &Value| {
        let t = &space.tessellations()[0];
        let r = t.region_of(&[tessera_geometry::key_coordinate(key)]);
        space.replicas_of(SubspaceId::KEY, r)[0]
    };
    let first = leader_of(&keys[0]);
    let elsewhere = keys.iter().find(|k| leader_of(k) != first).unwrap().clone();
    let request = Request::GetMany {
        space: "t".into(),
        keys: vec![keys[0].clone(), elsewhere],
    };
    let (status, message) =
        status_of(ask(cluster.server_of(first).local_addr(), config.epoch, request).await);
    assert_eq!(status, Status::StaleEpoch, "{message}");
    // One server stops: its keys' leadership moves, and the client reads them from the others.
    let stopped = cluster.servers.pop().expect("three servers");
    stopped.shutdown().await;
    expected(&client.multi_get("t", keys).await.unwrap());
}
