//! Coordinator groups in one process, on loopback ports, spoken to over the wire protocol.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use tessera_coordinator::RaftTuning;
use tessera_protocol::{Configuration, Request, Response, Status};
use tessera_types::{Epoch, ServerId};

const SPACE: &str = "space users\nkey name\nattributes int age, string city\nsubspace age\nsubspace city, age\ncreate 16 partitions\ntolerate 1 failure\n";

fn check_replicas(cfg: &Configuration, space: &str, k: usize) {
    let s = cfg.space(space).expect("space exists");
    let servers: BTreeSet<ServerId> = cfg.servers.iter().map(|s| s.id).collect();
    assert_eq!(s.replicas.len(), s.schema.subspaces.len());
    for (sub, t) in s.replicas.iter().zip(s.tessellations()) {
        assert_eq!(sub.len(), t.regions_count() as usize);
        let bound = (sub.len() * k).div_ceil(servers.len()) + 1;
        for server in &servers {
            let held = sub.iter().filter(|set| set.contains(server)).count();
            assert!(
                held <= bound,
                "{server:?} holds {held} regions, bound {bound}"
            );
        }
        for set in sub {
            assert_eq!(set.len(), k);
            let distinct: BTreeSet<_> = set.iter().collect();
            assert_eq!(distinct.len(), k, "{set:?}");
            assert!(set.iter().all(|s| servers.contains(s)));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_coordinators_replicate_forward_and_validate() {
    let mut cluster = Cluster::start(3, fast_tuning()).await;
    let leader = cluster.leader().await;
    let li = cluster.node_index(leader);
    let followers: Vec<usize> = (0..3).filter(|&i| i != li).collect();

    // Register 4 servers, alternating between the leader and the followers (forwarding).
    let mut epoch = Epoch(0);
    for t in 0..4u64 {
        let at = cluster.addrs[[li, followers[0], followers[1], li][t as usize]];
        let (id, e) = register(at, 100 + t as u128, &format!("10.1.0.{t}:7000")).await;
        assert_eq!(id, ServerId(t + 1), "ids in order of first registration");
        assert!(e > epoch, "a new server is a new epoch");
        epoch = e;
    }
    assert_eq!(epoch, Epoch(4));
    // Same token, same address, sent to a follower: same id, no new epoch.
    let (id, e) = register(cluster.addrs[followers[1]], 102, "10.1.0.2:7000").await;
    assert_eq!((id, e), (ServerId(3), Epoch(4)));
    // Same token at a new address: same id, new epoch.
    let (id, e) = register(cluster.addrs[followers[0]], 102, "10.1.0.22:7000").await;
    assert_eq!((id, e), (ServerId(3), Epoch(5)));

    // AddSpace sent to a follower.
    let r = write(
        cluster.addrs[followers[0]],
        Request::AddSpace {
            description: SPACE.into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    assert_eq!(
        r.epoch,
        Epoch(6),
        "the follower answers once it has applied the change"
    );

    // Every coordinator converges on the same configuration.
    let mut configs = Vec::new();
    for &a in &cluster.addrs {
        configs.push(config_at_least(a, Epoch(6)).await);
    }
    assert!(configs.iter().all(|c| *c == configs[0]), "{configs:#?}");
    let cfg = &configs[0];
    assert_eq!(cfg.epoch, Epoch(6));
    assert_eq!(cfg.servers.len(), 4);
    assert_eq!(cfg.server(ServerId(3)).unwrap().address, "10.1.0.22:7000");
    let space = cfg.space("users").unwrap();
    assert_eq!(space.id, 6, "a space's id is the epoch that created it");
    check_replicas(cfg, "users", 2);

    // K = 5 > 4 servers: refused, nothing changed.
    let too_many = SPACE
        .replace("users", "wide")
        .replace("tolerate 1 failure", "tolerate 4 failures");
    let r = write(
        cluster.addrs[followers[1]],
        Request::AddSpace {
            description: too_many,
        },
    )
    .await;
    let (status, msg) = error_of(&r);
    assert_eq!(status, Status::TooFewServers, "{msg}");
    assert!(
        msg.contains('5') && msg.contains('4'),
        "names both numbers: {msg}"
    );
    let r = write(
        cluster.addrs[li],
        Request::AddSpace {
            description: SPACE.into(),
        },
    )
    .await;
    assert_eq!(error_of(&r).0, Status::SpaceExists);
    for &a in &cluster.addrs {
        assert_eq!(get_config(a).await, *cfg, "failed commands change nothing");
    }

    // Validation at the edge.
    let r = call(
        cluster.addrs[followers[0]],
        Request::AddSpace {
            description: "space 9x\nkey k\n".into(),
        },
    )
    .await;
    let (status, msg) = error_of(&r);
    assert_eq!(status, Status::BadDescription);
    assert!(
        msg.starts_with("1:7"),
        "the parse error with its position: {msg}"
    );
    let huge = format!(
        "{SPACE}#{}\n",
        "x".repeat(tessera_protocol::constants::DESCRIPTION_BYTES_MAX)
    );
    assert_eq!(
        error_of(&call(cluster.addrs[li], Request::AddSpace { description: huge }).await).0,
        Status::TooLarge
    );
    let r = write(
        cluster.addrs[followers[0]],
        Request::RmSpace {
            name: "nope".into(),
        },
    )
    .await;
    assert_eq!(error_of(&r).0, Status::UnknownSpace);
    let r = call(
        cluster.addrs[li],
        Request::Get {
            space: "users".into(),
            key: "k".into(),
        },
    )
    .await;
    let (status, msg) = error_of(&r);
    assert_eq!(
        (status, msg.as_str()),
        (Status::Malformed, "that request is for a server")
    );
    assert_eq!(
        r.epoch,
        Epoch(6),
        "every response carries the applied epoch"
    );

    // WaitConfig does not hold up later requests on the same connection.
    let mut client = Client::connect(cluster.addrs[followers[0]]).await;
    let wait = client
        .send(Request::WaitConfig {
            after: Epoch(6),
            timeout_ms: 10_000,
        })
        .await;
    let get = client.send(Request::GetConfig).await;
    let first = client.recv().await;
    assert_eq!(first.id, get, "GetConfig answered while WaitConfig waits");
    // RmSpace through the other follower wakes the waiter with epoch 7.
    let r = write(
        cluster.addrs[followers[1]],
        Request::RmSpace {
            name: "users".into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done);
    let second = client.recv().await;
    assert_eq!(second.id, wait);
    let Response::Config(c) = second.response else {
        panic!("{second:?}")
    };
    assert_eq!(c.epoch, Epoch(7));
    assert!(c.space("users").is_none());
    // A WaitConfig with nothing new answers the current configuration at its timeout.
    let started = std::time::Instant::now();
    let r = client
        .call(Request::WaitConfig {
            after: Epoch(7),
            timeout_ms: 300,
        })
        .await;
    assert!(started.elapsed() >= Duration::from_millis(250));
    let Response::Config(c) = r.response else {
        panic!()
    };
    assert_eq!(c.epoch, Epoch(7));

    // Everybody agrees on the group.
    for &a in &cluster.addrs {
        let s = common::status(a).await;
        assert_eq!(s.leader, Some(leader));
        assert_eq!(s.members.len(), 3);
        assert_eq!(
            s.members.iter().map(|m| m.0).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert!(s.term >= 1);
    }
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_takes_over() {
    let mut cluster = Cluster::start(3, fast_tuning()).await;
    let old = cluster.leader().await;
    let (id, _) = register(cluster.addrs[0], 1, "a:1").await;
    assert_eq!(id, ServerId(1));
    cluster.stop(cluster.node_index(old)).await;
    let new = cluster.leader().await;
    assert_ne!(new, old);
    // Writes go through to the new leader, from either survivor.
    for (n, i) in cluster.running().into_iter().enumerate() {
        let (id, _) = register(cluster.addrs[i], 10 + n as u128, "b:1").await;
        assert_eq!(id, ServerId(2 + n as u64));
    }
    let r = write(
        cluster.addrs[cluster.running()[0]],
        Request::AddSpace {
            description: SPACE.into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    let mut configs = Vec::new();
    for i in cluster.running() {
        configs.push(config_at_least(cluster.addrs[i], Epoch(4)).await);
    }
    assert_eq!(configs[0], configs[1]);
    check_replicas(&configs[0], "users", 2);
    // The old leader comes back as a follower and catches up.
    cluster.restart(cluster.node_index(old)).await;
    let back = config_at_least(cluster.addrs[cluster.node_index(old)], Epoch(4)).await;
    assert_eq!(back, configs[0]);
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_cluster_restarts_from_its_data() {
    let mut cluster = Cluster::start(3, fast_tuning()).await;
    cluster.leader().await;
    for t in 0..3u128 {
        register(cluster.addrs[t as usize], 500 + t, &format!("s{t}:1")).await;
    }
    let r = write(
        cluster.addrs[1],
        Request::AddSpace {
            description: SPACE.into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done);
    let mut before = Vec::new();
    for &a in &cluster.addrs {
        before.push(config_at_least(a, Epoch(4)).await);
    }
    cluster.stop_all().await;

    for i in 0..3 {
        cluster.restart(i).await;
    }
    // The log is replayed (commit index known locally) or re-committed under the new leader.
    for (i, &a) in cluster.addrs.iter().enumerate() {
        assert_eq!(config_at_least(a, Epoch(4)).await, before[i]);
    }
    cluster.leader().await;
    // Known tokens keep their ids; a new one gets the next.
    assert_eq!(
        register(cluster.addrs[2], 501, "s1:1").await,
        (ServerId(2), Epoch(4))
    );
    assert_eq!(
        register(cluster.addrs[0], 900, "s9:1").await,
        (ServerId(4), Epoch(5))
    );
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_coordinator_restarts_from_its_data() {
    let mut cluster = Cluster::start(1, fast_tuning()).await;
    let a = cluster.addrs[0];
    assert_eq!(register(a, 7, "x:1").await, (ServerId(1), Epoch(1)));
    assert_eq!(register(a, 8, "y:1").await, (ServerId(2), Epoch(2)));
    let r = write(
        a,
        Request::AddSpace {
            description: SPACE.into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done);
    let before = get_config(a).await;
    cluster.stop(0).await;
    cluster.restart(0).await;
    assert_eq!(config_at_least(a, Epoch(3)).await, before);
    assert_eq!(register(a, 8, "y:1").await, (ServerId(2), Epoch(3)));
    let s = status(a).await;
    assert_eq!((s.id, s.leader, s.members.len()), (1, Some(1), 1));
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_coordinator_catches_up_from_a_snapshot() {
    let tuning = RaftTuning {
        snapshot_every: 5,
        logs_kept_after_snapshot: 0,
        ..fast_tuning()
    };
    let mut cluster = Cluster::start(3, tuning).await;
    let leader = cluster.leader().await;
    let li = cluster.node_index(leader);
    register(cluster.addrs[li], 1, "a:1").await;
    let lagging = (li + 1) % 3;
    let other = (li + 2) % 3;
    config_at_least(cluster.addrs[lagging], Epoch(1)).await;
    cluster.stop(lagging).await;

    for t in 2..=30u128 {
        let (id, _) = register(cluster.addrs[other], t, &format!("h{t}:1")).await;
        assert_eq!(id, ServerId(t as u64));
    }
    let r = write(
        cluster.addrs[li],
        Request::AddSpace {
            description: SPACE.into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done);
    let want = config_at_least(cluster.addrs[li], Epoch(31)).await;
    // The leader has snapshotted and purged past everything the lagging node has.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let node = cluster.nodes[li].as_ref().unwrap();
        if node.snapshot_upto().is_some() && node.log_purged_upto().is_some_and(|p| p > 5) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "leader never purged its log"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(cluster.dirs[li].path().join("raft/snapshot").exists());

    cluster.restart(lagging).await;
    assert_eq!(
        config_at_least(cluster.addrs[lagging], Epoch(31)).await,
        want
    );
    assert!(
        cluster.nodes[lagging]
            .as_ref()
            .unwrap()
            .snapshot_upto()
            .is_some(),
        "the lagging node installed a snapshot"
    );
    assert!(cluster.dirs[lagging].path().join("raft/snapshot").exists());

    // And it restarts from that snapshot plus its log.
    cluster.stop(lagging).await;
    cluster.restart(lagging).await;
    assert_eq!(
        config_at_least(cluster.addrs[lagging], Epoch(31)).await,
        want
    );
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_coordinators_agree() {
    let mut cluster = Cluster::start(5, fast_tuning()).await;
    cluster.leader().await;
    for i in 0..5 {
        let (id, _) = register(cluster.addrs[i], 40 + i as u128, &format!("n{i}:1")).await;
        assert_eq!(id, ServerId(i as u64 + 1));
    }
    let r = write(
        cluster.addrs[4],
        Request::AddSpace {
            description: SPACE.replace("tolerate 1 failure", "tolerate 2 failures"),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done);
    let want = config_at_least(cluster.addrs[0], Epoch(6)).await;
    check_replicas(&want, "users", 3);
    // Two of five may fail.
    let leader = cluster.leader().await;
    cluster.stop(cluster.node_index(leader)).await;
    let other = cluster.running()[0];
    cluster.stop(other).await;
    let r = write(
        cluster.addrs[cluster.running()[0]],
        Request::RmSpace {
            name: "users".into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done);
    for i in cluster.running() {
        assert_eq!(
            config_at_least(cluster.addrs[i], Epoch(7))
                .await
                .spaces
                .len(),
            0
        );
    }
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_are_answered_and_a_dropped_coordinator_stops() {
    use futures::{SinkExt, StreamExt};
    use tessera_protocol::{codec, decode_response};
    let mut cluster = Cluster::start(1, fast_tuning()).await;
    let addr = cluster.addrs[0];
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut framed = tokio_util::codec::Framed::new(stream, codec());
    // Version byte right, body garbage: Malformed, and the connection goes on.
    framed
        .send(bytes::Bytes::from_static(&[
            tessera_protocol::PROTOCOL_VERSION,
            5,
            0xFF,
            0xFF,
        ]))
        .await
        .unwrap();
    let r = decode_response(&framed.next().await.unwrap().unwrap()).unwrap();
    assert_eq!((r.id, error_of(&r).0), (5, Status::Malformed));
    let ok = tessera_protocol::encode_request(&tessera_protocol::RequestFrame {
        id: 6,
        epoch: Epoch(0),
        request: Request::GetConfig,
    })
    .unwrap();
    framed.send(ok).await.unwrap();
    let r = decode_response(&framed.next().await.unwrap().unwrap()).unwrap();
    assert!(matches!(r.response, Response::Config(_)) && r.id == 6);
    // Another protocol version: answered, then closed.
    framed
        .send(bytes::Bytes::from_static(&[99, 1, 2]))
        .await
        .unwrap();
    let r = decode_response(&framed.next().await.unwrap().unwrap()).unwrap();
    assert_eq!(error_of(&r).0, Status::UnsupportedProtocol);
    assert!(
        framed.next().await.is_none(),
        "closed after a version mismatch"
    );

    // Dropping without shutdown stops serving.
    drop(cluster.nodes[0].take());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still accepting after drop"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A coordinator marks a new data directory with its format, opens it again, and refuses one
/// of a newer format, writing nothing in it (`tessera_protocol::data_format`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_refuses_a_newer_data_directory() {
    use tessera_coordinator::{Coordinator, CoordinatorOptions};
    use tessera_protocol::data_format::{self, DataKind, Found};
    let (c, dir) = one_coordinator(|_| {}).await;
    let data = dir.path().join("c1");
    c.shutdown().await;
    let current = DataKind::Coordinator.current();
    assert_eq!(
        data_format::read(&data, DataKind::Coordinator).unwrap(),
        Found::Format(current)
    );
    data_format::write(&data, DataKind::Coordinator, current + 1).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let options = CoordinatorOptions::new(1, &data, address, vec![(1, address.to_string())]);
    let refused = Coordinator::start_with_listener(options, listener)
        .await
        .err()
        .expect("refused");
    assert!(refused.to_string().contains("newer"), "{refused}");
    assert_eq!(
        data_format::read(&data, DataKind::Coordinator).unwrap(),
        Found::Format(current + 1)
    );
}
