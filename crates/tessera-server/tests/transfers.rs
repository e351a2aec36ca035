//! State transfers between real cluster servers, with a coordinator that plans them (the
//! planner is off by default: `tessera_coordinator::state::PLAN_TRANSFERS`): a server that
//! joins is sent its share of the regions, catches up on each from its source, and reports
//! each transfer done to the coordinator, which completes it, until the cluster is balanced.

mod common;

use std::time::Duration;

use common::cluster::{server, Cluster};
use tessera_client::{Predicate, Value};
use tessera_geometry::RegionIndex;
use tessera_protocol::Configuration;
use tessera_types::{Epoch, SubspaceId};
use tokio::time::Instant;

const SPACE: &str =
    "space t key k attributes int x subspace x create 8 partitions tolerate 1 failure";
const OBJECTS: i64 = 400;

fn transfers(config: &Configuration) -> usize {
    config.spaces.iter().map(|s| s.transfers.len()).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_server_catches_up_and_reports_its_transfers_done() {
    let mut cluster = Cluster::start_planning(2, true).await;
    let client = cluster.client().await;
    cluster.add_space(&client, SPACE).await;
    for i in 0..OBJECTS {
        client
            .put("t", format!("k{i}"), [("x", i % 50)])
            .await
            .unwrap();
    }

    // A third server joins: the coordinator sends it regions from both others (each
    // transfer replacing its donor), and completes each when the new server reports it.
    let coordinator = cluster.coordinator.local_addr();
    let joined = server(cluster.dir.path(), 2, coordinator).await;
    let new = joined.id();
    cluster.servers.push(joined);
    let mut watch = cluster.coordinator.watch_configuration();
    let deadline = Instant::now() + Duration::from_secs(60);
    let settled = loop {
        let config = watch.borrow_and_update().clone();
        let holds = config.spaces[0]
            .replicas
            .iter()
            .flatten()
            .any(|set| set.contains(&new));
        if holds && transfers(&config) == 0 {
            break config;
        }
        assert!(
            Instant::now() < deadline,
            "transfers never completed: {config:#?}"
        );
        let _ = tokio::time::timeout(Duration::from_secs(1), watch.changed()).await;
    };

    // Balanced: 8 regions × K 2 / 3 servers per subspace, every region K complete members,
    // and each region the new server holds it joined by a transfer, recorded since then.
    let space = settled.space("t").unwrap();
    for (subspace, sets) in space.replicas.iter().enumerate() {
        let mine = sets.iter().filter(|set| set.contains(&new)).count();
        assert!(
            (5..=6).contains(&mine),
            "subspace {subspace}: {mine} regions of 8"
        );
        for (region, set) in sets.iter().enumerate() {
            assert_eq!(set.len(), 2, "{set:?}");
            let (s, r) = (SubspaceId(subspace as u16), RegionIndex(region as u32));
            if set.contains(&new) {
                assert_ne!(
                    space.member_since(s, r, new),
                    Epoch(space.id),
                    "a join record"
                );
            }
        }
    }
    settled.check().unwrap();

    // Every object is where it was: searches rotate over every complete replica, the new
    // server's included, and each finds them all; gets go to the point leaders.
    cluster.settle(&settled).await;
    client.refresh().await.unwrap();
    for turn in 0..4 {
        let all = client.search("t", vec![]).await.unwrap();
        assert_eq!(all.len() as i64, OBJECTS, "search {turn}");
        let some = client
            .count("t", vec![Predicate::equals("x", 7i64)])
            .await
            .unwrap();
        assert_eq!(some, (OBJECTS / 50) as u64, "count {turn}");
    }
    for i in (0..OBJECTS).step_by(7) {
        let got = client
            .get("t", format!("k{i}"))
            .await
            .unwrap()
            .expect("the object");
        assert_eq!(got.attributes["x"], Value::Int(i % 50));
    }
    // And writes still go through every chain, the new member's included.
    for i in 0..OBJECTS {
        client
            .put("t", format!("k{i}"), [("x", 50 + i % 50)])
            .await
            .unwrap();
    }
    for turn in 0..4 {
        assert_eq!(
            client
                .count("t", vec![Predicate::equals("x", 57i64)])
                .await
                .unwrap(),
            8,
            "turn {turn}"
        );
        assert_eq!(
            client
                .count("t", vec![Predicate::equals("x", 7i64)])
                .await
                .unwrap(),
            0,
            "turn {turn}"
        );
    }
    for s in cluster.servers.drain(..) {
        s.shutdown().await;
    }
}
