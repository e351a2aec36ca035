//! State transfers over the real service: servers reporting transfers done, decommission, and
//! space changes answered once the servers act on them. Fake servers are raw protocol clients.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use tessera_coordinator::LeaseTuning;
use tessera_protocol::{
    Configuration, Request, Response, ResponseFrame, ServerState, Status, TransferRef,
};
use tessera_types::{Epoch, ServerId};
use tokio::time::Instant;

const SPACE: &str =
    "space users\nkey name\nattributes int age, string city\nsubspace age\ncreate 16 partitions\ntolerate 1 failure\n";

/// A lease long enough that fake servers that never heartbeat stay Available for the test.
fn long_lease() -> LeaseTuning {
    LeaseTuning {
        lease_ms: 60_000,
        margin_ms: 1_000,
        ..LeaseTuning::default()
    }
}

/// A transfer report, as a server makes it: its heartbeat first, since the coordinators
/// complete transfers only into a server whose lease they see current.
async fn report(
    addr: SocketAddr,
    server: ServerId,
    token: u128,
    incarnation: u64,
    done: Vec<TransferRef>,
) -> ResponseFrame {
    let heartbeat = Request::Heartbeat {
        server,
        token,
        incarnation,
        failed: false,
        epoch: Epoch(0),
    };
    call(addr, heartbeat).await;
    write(
        addr,
        Request::TransfersDone {
            server,
            token,
            incarnation,
            done,
            backfilled: Vec::new(),
        },
    )
    .await
}

/// Every transfer into `to`, as the server names them when it reports them done.
fn refs_into(cfg: &Configuration, to: ServerId) -> Vec<TransferRef> {
    cfg.spaces
        .iter()
        .flat_map(|s| s.transfer_refs_into(to))
        .collect()
}

fn transfers(cfg: &Configuration) -> usize {
    cfg.spaces.iter().map(|s| s.transfers.len()).sum()
}

/// Regions of every subspace `id` is a member of.
fn held(cfg: &Configuration, id: ServerId) -> usize {
    cfg.spaces
        .iter()
        .flat_map(|s| s.replicas.iter().flatten())
        .filter(|set| set.contains(&id))
        .count()
}

/// Each server reports every transfer into it done, through `addr`, until none is left.
async fn complete_all(addr: SocketAddr, tokens: &[(ServerId, u128)]) -> Configuration {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let cfg = get_config(addr).await;
        if transfers(&cfg) == 0 {
            return cfg;
        }
        assert!(Instant::now() < deadline, "transfers never end: {cfg:#?}");
        for &(id, token) in tokens {
            let done = refs_into(&cfg, id);
            if done.is_empty() {
                continue;
            }
            let r = report(addr, id, token, 1, done).await;
            assert_eq!(r.response, Response::Done, "{r:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfers_done_completes_transfers_through_any_coordinator() {
    let mut cluster = Cluster::start_planning(3, fast_tuning(), long_lease(), true).await;
    let leader = cluster.leader().await;
    let follower = cluster.addrs[(0..3).find(|i| *i as u64 + 1 != leader).unwrap()];
    let mut tokens = Vec::new();
    for t in 1..=3u128 {
        tokens.push((
            register(follower, t, &format!("10.0.0.{t}:2000")).await.0,
            t,
        ));
    }
    let r = write(
        follower,
        Request::AddSpace {
            description: SPACE.into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done, "{r:?}");

    // A fourth server joins: it is sent regions from the others to catch up on.
    let (new, _) = register(follower, 4, "10.0.0.4:2000").await;
    tokens.push((new, 4));
    let cfg = get_config(follower).await;
    let done = refs_into(&cfg, new);
    assert!(!done.is_empty() && done.len() <= 8, "{done:?}");

    // Refused like a heartbeat: unknown, wrong token, earlier incarnation. Nothing changes.
    for (server, token, incarnation, status) in [
        (ServerId(99), 4, 1, Status::Malformed),
        (new, 5, 1, Status::Malformed),
        (new, 4, 0, Status::StaleServer),
    ] {
        let r = call(
            follower,
            Request::TransfersDone {
                server,
                token,
                incarnation,
                done: done.clone(),
                backfilled: Vec::new(),
            },
        )
        .await;
        assert_eq!(error_of(&r).0, status, "{r:?}");
    }
    // A later incarnation than the registered one passes the check here but is refused where
    // the command applies.
    let r = write(
        follower,
        Request::TransfersDone {
            server: new,
            token: 4,
            incarnation: 2,
            done: done.clone(),
            backfilled: Vec::new(),
        },
    )
    .await;
    assert_eq!(error_of(&r).0, Status::StaleServer, "{r:?}");
    // Not heard from within a lease (it never sent a heartbeat): it may have failed since it
    // reported, so nothing completes, and it is told to report again after a heartbeat.
    let r = write(
        follower,
        Request::TransfersDone {
            server: new,
            token: 4,
            incarnation: 1,
            done: done.clone(),
            backfilled: Vec::new(),
        },
    )
    .await;
    assert_eq!(error_of(&r).0, Status::Unavailable, "{r:?}");
    assert_eq!(get_config(follower).await, cfg);
    // References that name nothing, or nothing at all: Done, no new epoch.
    let stale = TransferRef {
        id: done[0].id + 1000,
        ..done[0]
    };
    for done in [vec![], vec![stale]] {
        let r = report(follower, new, 4, 1, done).await;
        assert_eq!(r.response, Response::Done);
    }
    assert_eq!(get_config(follower).await, cfg);

    // The real report, through a follower: applied once, one new epoch, visible right away.
    let r = report(follower, new, 4, 1, done.clone()).await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    let after = get_config(follower).await;
    assert_eq!(after.epoch, Epoch(cfg.epoch.0 + 1));
    for d in &done {
        let space = after.spaces.iter().find(|s| s.id == d.space).unwrap();
        let region = tessera_geometry::RegionIndex(d.region);
        assert!(space.complete_replicas(d.subspace, region).contains(&new));
        assert!(space
            .transfer_at(d.subspace, region)
            .is_none_or(|t| t.id != d.id));
    }
    // Reported again (a lost answer): Done, nothing changes.
    let r = report(follower, new, 4, 1, done).await;
    assert_eq!(r.response, Response::Done);
    assert_eq!(get_config(follower).await.epoch, after.epoch);

    // Completing what is planned next, round after round: the new server ends up with its
    // share (16 regions * 2 subspaces * K 2 / 4 servers).
    let settled = complete_all(follower, &tokens).await;
    for &(id, _) in &tokens {
        assert_eq!(held(&settled, id), 16, "server {id}");
    }
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decommission_drains_a_server_then_it_is_gone() {
    let mut cluster = Cluster::start_planning(1, fast_tuning(), long_lease(), true).await;
    cluster.leader().await;
    let addr = cluster.addrs[0];
    let mut tokens = Vec::new();
    for t in 1..=3u128 {
        tokens.push((register(addr, t, &format!("10.0.0.{t}:2000")).await.0, t));
    }
    let r = write(
        addr,
        Request::AddSpace {
            description: SPACE.into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done, "{r:?}");

    let r = write(
        addr,
        Request::Decommission {
            server: ServerId(99),
        },
    )
    .await;
    assert_eq!(error_of(&r).0, Status::Malformed, "{r:?}");
    let (gone, token) = tokens[0];
    let r = write(addr, Request::Decommission { server: gone }).await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    let cfg = get_config(addr).await;
    assert_eq!(cfg.server(gone).unwrap().state, ServerState::Leaving);
    assert!(transfers(&cfg) > 0);
    assert!(cfg
        .spaces
        .iter()
        .flat_map(|s| &s.transfers)
        .all(|t| t.replaces == Some(gone)));
    // It still gets a lease while it hands its regions over.
    let r = call(
        addr,
        Request::Heartbeat {
            server: gone,
            token,
            incarnation: 1,
            failed: false,
            epoch: cfg.epoch,
        },
    )
    .await;
    let Response::Heartbeat(reply) = r.response else {
        panic!("{r:?}")
    };
    assert_eq!((reply.leader, reply.state), (true, ServerState::Leaving));
    let (status, message) = error_of(&write(addr, Request::Decommission { server: gone }).await);
    assert_eq!(status, Status::CmpFail, "{message}");
    assert!(message.contains("already"), "{message}");
    // Two left for K = 2: neither may go.
    let (status, message) = error_of(
        &write(
            addr,
            Request::Decommission {
                server: tokens[1].0,
            },
        )
        .await,
    );
    assert_eq!(status, Status::TooFewServers, "{message}");
    assert!(message.contains("users"), "{message}");

    let settled = complete_all(addr, &tokens[1..]).await;
    assert!(settled.server(gone).is_none(), "{settled:#?}");
    assert_eq!(held(&settled, tokens[1].0), 32);
    assert_eq!(held(&settled, tokens[2].0), 32);
    // It is unknown now: its heartbeats are refused.
    let r = call(
        addr,
        Request::Heartbeat {
            server: gone,
            token,
            incarnation: 1,
            failed: false,
            epoch: settled.epoch,
        },
    )
    .await;
    assert_eq!(error_of(&r).0, Status::Malformed);
    let r = write(addr, Request::Decommission { server: gone }).await;
    assert_eq!(error_of(&r).0, Status::Malformed);
    cluster.stop_all().await;
}

/// Coordinators that plan no transfers (the default for now): a decommission that would need
/// some is refused at once, typed and saying why, and changes nothing; one of a server holding
/// nothing works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decommission_is_refused_while_transfers_are_not_planned() {
    let mut cluster = Cluster::start_planning(1, fast_tuning(), long_lease(), false).await;
    cluster.leader().await;
    let addr = cluster.addrs[0];
    for t in 1..=3u128 {
        register(addr, t, &format!("10.0.0.{t}:2000")).await;
    }
    let r = write(
        addr,
        Request::AddSpace {
            description: SPACE.into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    let (late, _) = register(addr, 4, "10.0.0.4:2000").await;
    let cfg = get_config(addr).await;
    assert_eq!(transfers(&cfg), 0, "a joining server is sent nothing");
    assert_eq!(held(&cfg, late), 0);

    let (status, message) = error_of(
        &write(
            addr,
            Request::Decommission {
                server: ServerId(1),
            },
        )
        .await,
    );
    assert_eq!(status, Status::CmpFail, "{message}");
    assert!(message.contains("no state transfers"), "{message}");
    assert_eq!(get_config(addr).await, cfg, "nothing changed");

    let r = write(addr, Request::Decommission { server: late }).await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    assert!(
        get_config(addr).await.server(late).is_none(),
        "gone at once"
    );
    cluster.stop_all().await;
}

/// A fake server heartbeating every coordinator every 50 ms, reporting the epoch of the
/// configuration it last fetched while `follow` is set, the last one it reported otherwise.
struct FakeServer {
    follow: Arc<AtomicBool>,
    epoch: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServer {
    fn start(addr: SocketAddr, id: ServerId, token: u128) -> FakeServer {
        let (follow, epoch, stop) = (
            Arc::new(AtomicBool::new(true)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (follow2, epoch2, stop2) = (follow.clone(), epoch.clone(), stop.clone());
        let task = tokio::spawn(async move {
            let mut client = Client::connect(addr).await;
            while !stop2.load(Ordering::SeqCst) {
                if follow2.load(Ordering::SeqCst) {
                    let Response::Config(c) = client.call(Request::GetConfig).await.response else {
                        panic!()
                    };
                    epoch2.store(c.epoch.0, Ordering::SeqCst);
                }
                let epoch = Epoch(epoch2.load(Ordering::SeqCst));
                let r = client
                    .call(Request::Heartbeat {
                        server: id,
                        token,
                        incarnation: 1,
                        failed: false,
                        epoch,
                    })
                    .await;
                assert!(matches!(r.response, Response::Heartbeat(_)), "{r:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        FakeServer {
            follow,
            epoch,
            stop,
            task,
        }
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn space_changes_are_answered_once_the_servers_act_on_them() {
    let mut cluster = Cluster::start_with_lease(
        1,
        fast_tuning(),
        LeaseTuning {
            lease_ms: 1000,
            margin_ms: 500,
            ..Default::default()
        },
    )
    .await;
    cluster.leader().await;
    let addr = cluster.addrs[0];
    let mut servers = Vec::new();
    for t in 1..=2u128 {
        let (id, _) = register(addr, t, &format!("10.0.0.{t}:2000")).await;
        servers.push((id, FakeServer::start(addr, id, t)));
    }

    // Both follow the configuration: the change is answered soon after it applies.
    let asked = Instant::now();
    let r = write(
        addr,
        Request::AddSpace {
            description: SPACE.into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    let created = r.epoch;
    let status = status(addr).await;
    for s in &status.servers {
        assert_eq!(
            s.epoch,
            Some(created),
            "the leader knows the epoch each server acts on: {s:?}"
        );
    }

    // Server 2 stops following (stuck on the old configuration, still heartbeating): the
    // change applies, but the answer says who does not act on it.
    let (stuck, fake) = &servers[1];
    fake.follow.store(false, Ordering::SeqCst);
    let old = fake.epoch.load(Ordering::SeqCst);
    let asked = Instant::now();
    let r = write(
        addr,
        Request::AddSpace {
            description: SPACE.replace("users", "other"),
        },
    )
    .await;
    let waited = asked.elapsed();
    let (status, message) = error_of(&r);
    assert_eq!(status, Status::Timeout, "{message}");
    let next = get_config(addr).await;
    assert!(next.space("other").is_some(), "the change is made");
    assert_eq!(
        message,
        format!(
            "space \"other\" created in epoch {}, but server {stuck} does not serve it yet: its heartbeats did not report that epoch within 5 s",
            next.epoch.0
        )
    );
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_secs(8),
        "{waited:?}"
    );
    assert_eq!(
        common::status(addr).await.servers[1].epoch,
        Some(Epoch(old))
    );

    // It catches up: removing a space is answered as soon as both act on it.
    fake.follow.store(true, Ordering::SeqCst);
    let r = write(
        addr,
        Request::RmSpace {
            name: "other".into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done, "{r:?}");

    // A server that falls silent is not waited for (it holds no lease to serve with).
    let (_, fake) = servers.remove(1);
    fake.stop().await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let asked = Instant::now();
    let r = write(
        addr,
        Request::RmSpace {
            name: "users".into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    assert!(asked.elapsed() < Duration::from_secs(2));
    for (_, fake) in servers {
        fake.stop().await;
    }
    cluster.stop_all().await;
}
