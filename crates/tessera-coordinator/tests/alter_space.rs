//! `tessera alter-space` over the real service: a subspace added to a live space is built on
//! replica sets the coordinators assign, backfill reports finish it, a drop empties it, and a
//! change that cannot apply is refused, typed, changing nothing. Fake servers are raw protocol
//! clients that never heartbeat (so no answer waits for them) until they report backfills.

mod common;

use common::*;
use tessera_coordinator::LeaseTuning;
use tessera_protocol::{BackfillRef, Build, Configuration, Request, Response, SpaceChange, Status};
use tessera_types::{Epoch, ServerId, SubspaceId, SubspaceState};

const SPACE: &str =
    "space users\nkey name\nattributes int age, string city\nsubspace age\ncreate 8 partitions\ntolerate 1 failure\n";

/// A lease long enough that fake servers that never heartbeat stay Available for the test.
fn long_lease() -> LeaseTuning {
    LeaseTuning {
        lease_ms: 60_000,
        margin_ms: 1_000,
        ..LeaseTuning::default()
    }
}

fn alter(space: &str, change: SpaceChange) -> Request {
    Request::AlterSpace {
        space: space.into(),
        change,
        fence: None,
    }
}

fn add(attributes: &[&str]) -> SpaceChange {
    SpaceChange::AddSubspace {
        attributes: attributes.iter().map(|a| a.to_string()).collect(),
    }
}

fn users(cfg: &Configuration) -> &tessera_protocol::SpaceConfig {
    cfg.space("users").expect("space users")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_space_adds_builds_and_drops_subspaces() {
    let mut cluster = Cluster::start_planning(3, fast_tuning(), long_lease(), true).await;
    let leader = cluster.leader().await;
    // Through a follower: the command is forwarded to the leader.
    let addr = cluster.addrs[(0..3).find(|i| *i as u64 + 1 != leader).unwrap()];
    let mut servers = Vec::new();
    for t in 1..=3u128 {
        servers.push((register(addr, t, &format!("10.0.0.{t}:2000")).await.0, t));
    }
    let r = write(
        addr,
        Request::AddSpace {
            description: SPACE.into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    let created = get_config(addr).await;

    // Adding a subspace over city: Done, in one new epoch; it is being built.
    let r = write(addr, alter("users", add(&["city"]))).await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    let cfg = get_config(addr).await;
    cfg.check().unwrap();
    assert_eq!(cfg.epoch, Epoch(created.epoch.0 + 1));
    assert_eq!(r.epoch, cfg.epoch);
    let space = users(&cfg);
    let city = space.schema.attribute_index("city").unwrap();
    assert_eq!(space.schema.subspaces.len(), 3);
    assert_eq!(space.schema.subspaces[2].dimensions, vec![city]);
    assert_eq!(space.schema.subspaces[2].state, SubspaceState::Building);
    assert_eq!(
        space.build,
        Some(Build {
            subspace: SubspaceId(2),
            since: cfg.epoch.0,
            done: vec![],
            replaces: None,
        })
    );
    assert_eq!(space.replicas[..2], users(&created).replicas[..]);
    // One dimension over 8 partitions: 8 regions, each of K = 2 distinct registered servers,
    // 16 memberships spread over 3 servers (5 or 6 each).
    assert_eq!(space.replicas[2].len(), 8);
    let mut hold = [0usize; 3];
    for set in &space.replicas[2] {
        assert_eq!(set.len(), 2, "{set:?}");
        assert_ne!(set[0], set[1], "{set:?}");
        for s in set {
            let i = servers.iter().position(|(id, _)| id == s).expect("known");
            hold[i] += 1;
        }
    }
    assert!(hold.iter().all(|h| (5..=6).contains(h)), "{hold:?}");

    // Changes that cannot apply: typed refusals, nothing changes.
    for (request, status) in [
        (alter("users", add(&["age"])), Status::BadAlteration),
        (alter("users", add(&["age", "city"])), Status::BadAlteration),
        (alter("users", add(&["name"])), Status::BadAlteration),
        (alter("users", add(&["zip"])), Status::BadAlteration),
        (
            alter("users", SpaceChange::DropSubspace { subspace: 0 }),
            Status::BadAlteration,
        ),
        (
            alter("users", SpaceChange::DropSubspace { subspace: 7 }),
            Status::BadAlteration,
        ),
        (alter("nobody", add(&["city"])), Status::UnknownSpace),
    ] {
        let r = write(addr, request.clone()).await;
        let (got, message) = error_of(&r);
        assert_eq!(got, status, "{request:?}: {message}");
        assert!(!message.is_empty());
    }
    let (_, message) = error_of(&write(addr, alter("users", add(&["age", "city"]))).await);
    assert!(message.contains("being built"), "{message}");
    assert_eq!(get_config(addr).await, cfg, "nothing changed");

    // Dropping subspace 1 (age): Done; it keeps its id, with no region.
    let r = write(
        addr,
        alter("users", SpaceChange::DropSubspace { subspace: 1 }),
    )
    .await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    let dropped = get_config(addr).await;
    dropped.check().unwrap();
    assert_eq!(dropped.epoch, Epoch(cfg.epoch.0 + 1));
    let space = users(&dropped);
    assert_eq!(space.schema.subspaces[1].state, SubspaceState::Dropped);
    assert!(space.replicas[1].is_empty());
    assert_eq!(space.replicas[2], users(&cfg).replicas[2]);
    let r = write(
        addr,
        alter("users", SpaceChange::DropSubspace { subspace: 1 }),
    )
    .await;
    assert_eq!(error_of(&r).0, Status::BadAlteration);

    // Servers report the key regions backfilled (after a heartbeat: the report needs a
    // current lease). A part first, then the rest: the subspace serves.
    let (space_id, since) = (space.id, space.build.as_ref().unwrap().since);
    let key_regions = space.replicas[0].len() as u32;
    let reference = |region| BackfillRef {
        space: space_id,
        subspace: SubspaceId(2),
        region,
        since,
    };
    let report = |server: ServerId, token: u128, regions: Vec<u32>| {
        let backfilled: Vec<BackfillRef> = regions.into_iter().map(reference).collect();
        async move {
            call(
                addr,
                Request::Heartbeat {
                    server,
                    token,
                    incarnation: 1,
                    failed: false,
                    epoch: Epoch(0),
                },
            )
            .await;
            write(
                addr,
                Request::TransfersDone {
                    server,
                    token,
                    incarnation: 1,
                    done: vec![],
                    backfilled,
                },
            )
            .await
        }
    };
    let (first, first_token) = servers[0];
    let r = report(first, first_token, vec![0, 1, 2]).await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    let partial = get_config(addr).await;
    assert_eq!(partial.epoch, Epoch(dropped.epoch.0 + 1));
    assert_eq!(
        users(&partial).build.as_ref().map(|b| b.done.clone()),
        Some(vec![0, 1, 2])
    );
    // Repeated: Done, no new epoch.
    let r = report(first, first_token, vec![2, 1]).await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    assert_eq!(get_config(addr).await, partial);
    let (second, second_token) = servers[1];
    let r = report(second, second_token, (0..key_regions).collect()).await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    let built = get_config(addr).await;
    built.check().unwrap();
    assert_eq!(built.epoch, Epoch(partial.epoch.0 + 1));
    assert_eq!(users(&built).build, None);
    assert_eq!(
        users(&built).schema.subspaces[2].state,
        SubspaceState::Serving
    );
    // Built, it spans city: a subspace over city again is refused.
    let r = write(addr, alter("users", add(&["city"]))).await;
    let (status, message) = error_of(&r);
    assert_eq!(status, Status::BadAlteration, "{message}");
    assert!(message.contains("subspace 2"), "{message}");
    assert_eq!(get_config(addr).await, built);
    cluster.stop_all().await;
}
