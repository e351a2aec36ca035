//! Failure detection with real coordinators and fake servers made of raw protocol clients:
//! heartbeats, leases, servers taken offline, restarts, and a change of coordinator leader.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use futures::{SinkExt, StreamExt};
use tessera_coordinator::LeaseTuning;
use tessera_geometry::RegionIndex;
use tessera_protocol::{
    codec, decode_response, encode_request, Configuration, HeartbeatReply, Request, RequestFrame,
    Response, ServerState, Status,
};
use tessera_types::{Epoch, ServerId, SubspaceId};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

const SPACE: &str = "space users\nkey name\nattributes int age, string city\nsubspace age\nsubspace city, age\ncreate 16 partitions\ntolerate 1 failure\n";

fn lease(lease_ms: u64, margin_ms: u64) -> LeaseTuning {
    LeaseTuning {
        lease_ms,
        margin_ms,
        ..LeaseTuning::default()
    }
}

/// One request on a kept connection, with a short timeout; the connection is dropped on any
/// failure (and opened again next time). Never panics: a fake server lives through
/// coordinators going away.
async fn try_call(
    connection: &mut Option<Framed<TcpStream, LengthDelimitedCodec>>,
    addr: SocketAddr,
    request: Request,
) -> Option<Response> {
    let attempt = async {
        if connection.is_none() {
            let stream = TcpStream::connect(addr).await.ok()?;
            stream.set_nodelay(true).ok()?;
            *connection = Some(Framed::new(stream, codec()));
        }
        let framed = connection.as_mut()?;
        let body = encode_request(&RequestFrame {
            id: 1,
            epoch: Epoch(0),
            request,
        })
        .ok()?;
        framed.send(body).await.ok()?;
        let frame = framed.next().await?.ok()?;
        decode_response(&frame).ok().map(|f| f.response)
    };
    let response = tokio::time::timeout(Duration::from_millis(1000), attempt)
        .await
        .ok()
        .flatten();
    if response.is_none() {
        *connection = None;
    }
    response
}

fn heartbeat_request(id: ServerId, token: u128, incarnation: u64, failed: bool) -> Request {
    heartbeat_at(id, token, incarnation, failed, Epoch(0))
}

fn heartbeat_at(
    id: ServerId,
    token: u128,
    incarnation: u64,
    failed: bool,
    epoch: Epoch,
) -> Request {
    Request::Heartbeat {
        server: id,
        token,
        incarnation,
        failed,
        epoch,
    }
}

async fn heartbeat(
    addr: SocketAddr,
    id: ServerId,
    token: u128,
    incarnation: u64,
    failed: bool,
) -> Response {
    call(addr, heartbeat_request(id, token, incarnation, failed))
        .await
        .response
}

/// A fake server's heartbeat loop: every `every`, a heartbeat to every coordinator at once,
/// each on its own kept connection. Counts the replies that grant a lease.
struct Heartbeats {
    stop: Arc<AtomicBool>,
    failed: Arc<AtomicBool>,
    /// The epoch the heartbeats say the server acts on (0 until set).
    epoch: Arc<AtomicU64>,
    granted: Arc<AtomicU64>,
    last_granted: Arc<std::sync::Mutex<Option<Instant>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Heartbeats {
    fn start(
        addrs: Vec<SocketAddr>,
        id: ServerId,
        token: u128,
        incarnation: u64,
        every: Duration,
    ) -> Heartbeats {
        let stop = Arc::new(AtomicBool::new(false));
        let failed = Arc::new(AtomicBool::new(false));
        let epoch = Arc::new(AtomicU64::new(0));
        let epoch2 = epoch.clone();
        let granted = Arc::new(AtomicU64::new(0));
        let last_granted = Arc::new(std::sync::Mutex::new(None));
        let (stop2, failed2, granted2, last2) = (
            stop.clone(),
            failed.clone(),
            granted.clone(),
            last_granted.clone(),
        );
        let task = tokio::spawn(async move {
            let mut connections: Vec<Option<Framed<TcpStream, LengthDelimitedCodec>>> =
                addrs.iter().map(|_| None).collect();
            let mut interval = tokio::time::interval(every);
            while !stop2.load(Ordering::SeqCst) {
                interval.tick().await;
                let failed = failed2.load(Ordering::SeqCst);
                let epoch = Epoch(epoch2.load(Ordering::SeqCst));
                let replies =
                    futures::future::join_all(connections.iter_mut().zip(&addrs).map(|(c, a)| {
                        try_call(c, *a, heartbeat_at(id, token, incarnation, failed, epoch))
                    }))
                    .await;
                for r in replies {
                    if let Some(Response::Heartbeat(HeartbeatReply {
                        leader: true,
                        state: ServerState::Available,
                        ..
                    })) = r
                    {
                        granted2.fetch_add(1, Ordering::SeqCst);
                        *last2.lock().unwrap() = Some(Instant::now());
                    }
                }
            }
        });
        Heartbeats {
            stop,
            failed,
            epoch,
            granted,
            last_granted,
            task,
        }
    }

    /// Stops sending; returns once no heartbeat is in flight any more.
    async fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.task.await;
    }
}

fn state_of(cfg: &Configuration, id: ServerId) -> ServerState {
    cfg.server(id).expect("registered").state
}

/// Every replica set of every space, flattened.
fn sets(cfg: &Configuration) -> Vec<Vec<ServerId>> {
    cfg.spaces
        .iter()
        .flat_map(|s| s.replicas.iter().flatten().cloned())
        .collect()
}

/// Every replica set of every space, flattened, without the targets of the transfers `after`
/// started (they catch up at the end of their sets; `before` has none).
fn sets_without_new_transfers(after: &Configuration) -> Vec<Vec<ServerId>> {
    let mut cfg = after.clone();
    for space in &mut cfg.spaces {
        for t in std::mem::take(&mut space.transfers) {
            let set = &mut space.replicas[t.subspace.get()][t.region.0 as usize];
            assert_eq!(set.pop(), Some(t.to), "a transfer's target is last");
        }
    }
    sets(&cfg)
}

/// `after` took `victim` out of every set of `before` where it had company, keeping the
/// others' order (so the next replica heads where it headed). With transfers `planned`, it
/// started re-replicating the regions it left: each gains a member catching up at the end of
/// its set, never the victim (unless it restarted, so it is back), never more than 8 per
/// target; without, those regions stay a replica short.
fn assert_removed(before: &Configuration, after: &Configuration, victim: ServerId, planned: bool) {
    assert!(before.spaces.iter().all(|s| s.transfers.is_empty()));
    let (old, new) = (sets(before), sets_without_new_transfers(after));
    assert_eq!(old.len(), new.len());
    let transfers: Vec<_> = after
        .spaces
        .iter()
        .flat_map(|s| s.transfers.iter().copied())
        .collect();
    assert_eq!(
        !transfers.is_empty(),
        planned,
        "re-replication started only if planned: {transfers:?}"
    );
    for t in &transfers {
        assert_eq!((t.id, t.replaces), (after.epoch.0, None), "{t:?}");
        assert_eq!(
            after.server(t.to).map(|s| s.state),
            Some(ServerState::Available)
        );
        assert!(transfers.iter().filter(|u| u.to == t.to).count() <= 8);
    }
    let mut moved_heads = 0;
    for (o, n) in old.iter().zip(&new) {
        if o.len() > 1 && o.contains(&victim) {
            let expected: Vec<ServerId> = o.iter().copied().filter(|s| *s != victim).collect();
            assert_eq!(n, &expected, "the others keep their order");
            if o[0] == victim {
                assert_eq!(n[0], o[1], "the next replica becomes the point leader");
                moved_heads += 1;
            }
        } else {
            assert_eq!(n, o);
        }
        assert!(
            !n.contains(&victim) || n.len() == 1,
            "{victim} left every set it had company in: {n:?}"
        );
    }
    assert!(moved_heads > 0, "the victim led some regions before");
}

/// Follows the configuration at `addr` until `done` holds, for at most `within`.
async fn wait_config(
    addr: SocketAddr,
    within: Duration,
    done: impl Fn(&Configuration) -> bool,
) -> Configuration {
    let deadline = Instant::now() + within;
    let mut client = Client::connect(addr).await;
    let mut known = Epoch(0);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let r = client
            .call(Request::WaitConfig {
                after: known,
                timeout_ms: left.as_millis().max(1) as u32,
            })
            .await;
        let Response::Config(c) = r.response else {
            panic!("wait config: {:?}", r.response)
        };
        if done(&c) {
            return *c;
        }
        assert!(
            Instant::now() < deadline,
            "not within {within:?}; configuration now {c:#?}"
        );
        known = c.epoch;
    }
}

/// The configuration must stay exactly `cfg` for `period`.
async fn assert_unchanged(addr: SocketAddr, cfg: &Configuration, period: Duration) {
    let mut client = Client::connect(addr).await;
    let r = client
        .call(Request::WaitConfig {
            after: cfg.epoch,
            timeout_ms: period.as_millis() as u32,
        })
        .await;
    let Response::Config(c) = r.response else {
        panic!("wait config: {:?}", r.response)
    };
    assert_eq!(*c, *cfg, "the configuration changed");
}

async fn register_three(addr: SocketAddr) -> Vec<(ServerId, u128)> {
    let mut servers = Vec::new();
    for t in 1..=3u128 {
        let (id, _) = register(addr, t, &format!("10.0.0.{t}:2000")).await;
        servers.push((id, t));
    }
    let r = write(
        addr,
        Request::AddSpace {
            description: SPACE.into(),
        },
    )
    .await;
    assert_eq!(r.response, Response::Done, "{r:?}");
    servers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_is_taken_offline_after_its_lease_and_margin() {
    // Planning on: the silent server's regions start re-replicating as it is taken offline.
    let mut cluster = Cluster::start_planning(1, fast_tuning(), lease(300, 200), true).await;
    cluster.leader().await;
    let addr = cluster.addrs[0];
    let servers = register_three(addr).await;
    let every = Duration::from_millis(75);
    let mut beats: Vec<Heartbeats> = servers
        .iter()
        .map(|&(id, token)| Heartbeats::start(cluster.addrs.clone(), id, token, 1, every))
        .collect();

    // A heartbeat is answered by the leader: lease granted, the coordinators' lease length.
    let Response::Heartbeat(reply) = heartbeat(addr, servers[0].0, servers[0].1, 1, false).await
    else {
        panic!()
    };
    assert_eq!(
        reply,
        HeartbeatReply {
            leader: true,
            state: ServerState::Available,
            epoch: Epoch(4),
            lease_ms: 300
        }
    );

    // Heartbeating, nobody is taken offline (several leases long).
    let cfg = get_config(addr).await;
    assert_eq!(cfg.epoch, Epoch(4));
    assert_unchanged(addr, &cfg, Duration::from_millis(1500)).await;
    for b in &beats {
        assert!(b.granted.load(Ordering::SeqCst) >= 5, "leases were renewed");
    }
    let status = status(addr).await;
    assert_eq!(status.servers.len(), 3, "{status:?}");
    for s in &status.servers {
        let ago = s.heard_ms_ago.expect("heard");
        assert!(ago < 1000, "{s:?}");
    }

    // Server 2 falls silent.
    let (victim, _) = servers[1];
    let last = *beats[1].last_granted.lock().unwrap();
    beats.remove(1).stop().await;
    let silent_from = Instant::now();
    let after = wait_config(addr, Duration::from_secs(5), |c| {
        state_of(c, victim) == ServerState::Offline
    })
    .await;
    let took = silent_from.elapsed();
    // Not before its last lease surely lapsed: the last heartbeat left at most one period
    // before it stopped, so lease + margin - period is the earliest the leader may act.
    assert!(
        took >= Duration::from_millis(500) - every,
        "taken offline after only {took:?}"
    );
    assert!(
        took <= Duration::from_millis(500 + 1000),
        "taken offline only after {took:?}"
    );
    assert!(last.is_some());
    assert_eq!(after.epoch, Epoch(5), "one new epoch");
    assert_removed(&cfg, &after, victim, true);
    for &(id, _) in &servers {
        if id != victim {
            assert_eq!(state_of(&after, id), ServerState::Available);
        }
    }
    // The leader knows it last heard the victim a while ago.
    let status = common::status(addr).await;
    let v = status.servers.iter().find(|s| s.id == victim).unwrap();
    assert!(v.heard_ms_ago.unwrap() >= 400, "{v:?}");

    // The others stay Available; nothing else changes.
    assert_unchanged(addr, &after, Duration::from_millis(1000)).await;

    // The victim comes back: it hears it is Offline, registers again, and is Available with no
    // complete region (re-replication sends it some to catch up on).
    let Response::Heartbeat(reply) = heartbeat(addr, victim, 2, 1, false).await else {
        panic!()
    };
    assert_eq!((reply.state, reply.epoch), (ServerState::Offline, Epoch(5)));
    let (id, epoch) = register(addr, 2, "10.0.0.2:2000").await;
    assert_eq!((id, epoch), (victim, Epoch(6)));
    let back = get_config(addr).await;
    assert_eq!(state_of(&back, victim), ServerState::Available);
    for space in &back.spaces {
        for (sub, sets) in space.replicas.iter().enumerate() {
            for region in 0..sets.len() {
                let (sub, region) = (SubspaceId(sub as u16), RegionIndex(region as u32));
                assert!(!space.complete_replicas(sub, region).contains(&victim));
            }
        }
    }
    // Now it must keep heartbeating, or it goes offline again.
    let back = wait_config(addr, Duration::from_secs(5), |c| {
        state_of(c, victim) == ServerState::Offline
    })
    .await;
    assert_eq!(back.epoch, Epoch(7));
    for b in beats {
        b.stop().await;
    }
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_reporting_a_storage_failure_is_taken_offline_at_once() {
    // A long lease: silence alone would take 1.5 s to act on.
    let mut cluster = Cluster::start_with_lease(1, fast_tuning(), lease(1000, 500)).await;
    cluster.leader().await;
    let addr = cluster.addrs[0];
    let servers = register_three(addr).await;
    let beats: Vec<Heartbeats> = servers
        .iter()
        .map(|&(id, token)| {
            Heartbeats::start(
                cluster.addrs.clone(),
                id,
                token,
                1,
                Duration::from_millis(250),
            )
        })
        .collect();
    let cfg = get_config(addr).await;
    assert_unchanged(addr, &cfg, Duration::from_millis(600)).await;

    let (victim, token) = servers[2];
    let reported = Instant::now();
    beats[2].failed.store(true, Ordering::SeqCst);
    let Response::Heartbeat(reply) = heartbeat(addr, victim, token, 1, true).await else {
        panic!()
    };
    assert!(
        !reply.leader,
        "a failed server is granted no lease: {reply:?}"
    );
    let after = wait_config(addr, Duration::from_secs(5), |c| {
        state_of(c, victim) == ServerState::Offline
    })
    .await;
    let took = reported.elapsed();
    assert!(
        took < Duration::from_millis(1000),
        "at once, not after a lease: {took:?}"
    );
    assert_eq!(after.epoch, Epoch(cfg.epoch.0 + 1));
    assert_removed(&cfg, &after, victim, cluster.plan_transfers);
    // It keeps saying it failed: no more epochs, and no lease.
    assert_unchanged(addr, &after, Duration::from_millis(800)).await;
    let Response::Heartbeat(reply) = heartbeat(addr, victim, token, 1, true).await else {
        panic!()
    };
    assert_eq!((reply.leader, reply.state), (false, ServerState::Offline));
    for b in beats {
        b.stop().await;
    }
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_heartbeats_are_refused_and_restarts_leave_their_replica_sets() {
    let mut cluster = Cluster::start_with_lease(1, fast_tuning(), lease(300, 200)).await;
    cluster.leader().await;
    let addr = cluster.addrs[0];
    let servers = register_three(addr).await;
    let cfg = get_config(addr).await;

    // Unknown id, wrong token: refused, typed, nothing changes.
    for (id, token) in [(ServerId(99), 1), (servers[0].0, 12345), (ServerId(0), 0)] {
        match heartbeat(addr, id, token, 1, false).await {
            Response::Error(e) => assert_eq!(e.status, Status::Malformed, "{e}"),
            other => panic!("{other:?}"),
        }
        match heartbeat(addr, id, token, 1, true).await {
            Response::Error(e) => assert_eq!(e.status, Status::Malformed, "{e}"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(get_config(addr).await, cfg);

    // Server 1 restarts: a new incarnation takes it out of its replica sets at once.
    let (first, token) = servers[0];
    let (id, epoch) = register_incarnation(addr, token, "10.0.0.1:2000", 2).await;
    assert_eq!((id, epoch), (first, Epoch(cfg.epoch.0 + 1)));
    let after = get_config(addr).await;
    assert_eq!(state_of(&after, first), ServerState::Available);
    assert_removed(&cfg, &after, first, cluster.plan_transfers);
    // Its previous life is refused, registering or heartbeating.
    match heartbeat(addr, first, token, 1, false).await {
        Response::Error(e) => assert_eq!(e.status, Status::StaleServer, "{e}"),
        other => panic!("{other:?}"),
    }
    let r = write(
        addr,
        Request::RegisterServer {
            token,
            address: "10.0.0.1:2000".into(),
            incarnation: 1,
        },
    )
    .await;
    assert_eq!(error_of(&r).0, Status::StaleServer);
    // The new incarnation heartbeats normally.
    let Response::Heartbeat(reply) = heartbeat(addr, first, token, 2, false).await else {
        panic!()
    };
    assert_eq!((reply.leader, reply.state), (true, ServerState::Available));
    assert_eq!(get_config(addr).await, after);
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_waits_a_lease_and_margin_before_taking_servers_offline() {
    // Long enough that an election (up to ~2 s here) fits well inside it.
    let (lease_ms, margin_ms) = (2500, 500);
    let patience = Duration::from_millis(lease_ms + margin_ms);
    let mut cluster = Cluster::start_with_lease(3, fast_tuning(), lease(lease_ms, margin_ms)).await;
    let old = cluster.leader().await;
    let addrs = cluster.addrs.clone();
    let servers = register_three(addrs[0]).await;
    let every = Duration::from_millis(250);
    let mut beats: Vec<Heartbeats> = servers
        .iter()
        .map(|&(id, token)| Heartbeats::start(addrs.clone(), id, token, 1, every))
        .collect();
    let cfg = config_at_least(addrs[0], Epoch(4)).await;
    assert_unchanged(addrs[0], &cfg, Duration::from_millis(1000)).await;

    // Server 3 falls silent a second before the leader goes away: counting from its last
    // heartbeat, a leader would act on it 2 s after the shutdown; the new one must wait
    // `patience` from its election, which comes after the shutdown.
    let (victim, _) = servers[2];
    beats.remove(2).stop().await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let deposed = Instant::now();
    cluster.stop(cluster.node_index(old)).await;
    let new = cluster.leader().await;
    assert_ne!(new, old);
    let survivor = cluster.addrs[cluster.node_index(new)];
    let after = wait_config(survivor, Duration::from_secs(10), |c| {
        state_of(c, victim) == ServerState::Offline
    })
    .await;
    let took = deposed.elapsed();
    assert!(
        took >= patience,
        "the new leader acted {took:?} after the old one went, before a lease and margin"
    );
    assert_eq!(
        after.epoch,
        Epoch(cfg.epoch.0 + 1),
        "only the victim changed"
    );
    assert_removed(&cfg, &after, victim, cluster.plan_transfers);

    // The others kept heartbeating through the change: still Available, and the new leader
    // renews their leases.
    let granted: Vec<u64> = beats
        .iter()
        .map(|b| b.granted.load(Ordering::SeqCst))
        .collect();
    assert_unchanged(survivor, &after, Duration::from_millis(1000)).await;
    for (b, before) in beats.iter().zip(granted) {
        assert!(
            b.granted.load(Ordering::SeqCst) > before,
            "the new leader grants leases"
        );
    }
    for &(id, _) in &servers[..2] {
        assert_eq!(state_of(&after, id), ServerState::Available);
    }
    let status = common::status(survivor).await;
    assert_eq!(status.servers.len(), 3);
    for b in beats {
        b.stop().await;
    }
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_grant_no_lease_and_unheard_servers_are_suspected_by_default() {
    // With suspect_unheard off, a server that never heartbeats is left alone.
    let quiet = LeaseTuning {
        suspect_unheard: false,
        ..lease(300, 200)
    };
    let mut cluster = Cluster::start_with_lease(3, fast_tuning(), quiet).await;
    let leader = cluster.leader().await;
    let addrs = cluster.addrs.clone();
    let servers = register_three(addrs[0]).await;
    let cfg = config_at_least(addrs[0], Epoch(4)).await;
    for (i, &a) in addrs.iter().enumerate() {
        config_at_least(a, Epoch(4)).await;
        let Response::Heartbeat(reply) = heartbeat(a, servers[0].0, servers[0].1, 1, false).await
        else {
            panic!()
        };
        assert_eq!(
            reply.leader,
            i == cluster.node_index(leader),
            "only the leader grants: {reply:?}"
        );
        assert_eq!((reply.state, reply.lease_ms), (ServerState::Available, 300));
        let status = common::status(a).await;
        assert_eq!(
            status.servers.is_empty(),
            i != cluster.node_index(leader),
            "liveness comes from the leader"
        );
    }
    // Server 1 was heard once, then fell silent: taken offline. Servers 2 and 3 were never
    // heard: left alone.
    let (heard_once, _) = servers[0];
    let after = wait_config(addrs[0], Duration::from_secs(5), |c| {
        state_of(c, heard_once) == ServerState::Offline
    })
    .await;
    assert_eq!(after.epoch, Epoch(cfg.epoch.0 + 1));
    assert_unchanged(addrs[0], &after, Duration::from_millis(1500)).await;
    for &(id, _) in &servers[1..] {
        assert_eq!(state_of(&after, id), ServerState::Available);
    }
    cluster.stop_all().await;

    // By default, the leader takes a server it never heard from offline too.
    let tuning = lease(300, 200);
    assert!(tuning.suspect_unheard);
    let mut cluster = Cluster::start_with_lease(1, fast_tuning(), tuning).await;
    cluster.leader().await;
    let addr = cluster.addrs[0];
    let servers = register_three(addr).await;
    let beats: Vec<Heartbeats> = servers[..2]
        .iter()
        .map(|&(id, token)| {
            Heartbeats::start(
                cluster.addrs.clone(),
                id,
                token,
                1,
                Duration::from_millis(75),
            )
        })
        .collect();
    let (silent, _) = servers[2];
    let after = wait_config(addr, Duration::from_secs(5), |c| {
        state_of(c, silent) == ServerState::Offline
    })
    .await;
    for &(id, _) in &servers[..2] {
        assert_eq!(state_of(&after, id), ServerState::Available);
    }
    let status = common::status(addr).await;
    assert_eq!(
        status
            .servers
            .iter()
            .find(|s| s.id == silent)
            .unwrap()
            .heard_ms_ago,
        None
    );
    for b in beats {
        b.stop().await;
    }
    cluster.stop_all().await;
}

/// A server that announces a planned stop rests: out of every replica set it had company in,
/// its regions wait for it (no transfer) for the rest grace, then it is taken offline and they
/// are re-replicated. A server whose lease lapses rests for the down grace the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resting_servers_are_waited_for_their_grace_then_taken_offline() {
    let tuning = LeaseTuning {
        rest_grace_ms: 1500,
        down_grace_ms: 800,
        ..lease(300, 200)
    };
    let mut cluster = Cluster::start_planning(1, fast_tuning(), tuning, true).await;
    cluster.leader().await;
    let addr = cluster.addrs[0];
    let servers = register_three(addr).await;
    let every = Duration::from_millis(75);
    let beats: Vec<Heartbeats> = servers
        .iter()
        .map(|&(id, token)| Heartbeats::start(cluster.addrs.clone(), id, token, 1, every))
        .collect();
    for b in &beats {
        b.epoch.store(u64::MAX, Ordering::SeqCst);
    }
    let before = get_config(addr).await;

    // A planned stop: answered once the others act on the configuration without it.
    let (planned, token) = servers[0];
    let r = call(
        addr,
        Request::RestServer {
            server: planned,
            token,
            incarnation: 1,
        },
    )
    .await;
    assert_eq!(r.response, Response::Done);
    let rested_at = Instant::now();
    let mut beats = beats.into_iter();
    beats.next().unwrap().stop().await;
    let resting = get_config(addr).await;
    assert_eq!(state_of(&resting, planned), ServerState::Resting);
    assert_removed(&before, &resting, planned, false);
    let places: usize = resting.spaces.iter().map(|s| s.resting.len()).sum();
    assert!(places > 0);
    // Its grace, then offline and re-replicated.
    let offline = wait_config(addr, Duration::from_secs(5), |c| {
        state_of(c, planned) == ServerState::Offline
    })
    .await;
    let waited = rested_at.elapsed();
    assert!(
        waited >= Duration::from_millis(1400),
        "offline after {waited:?}"
    );
    assert!(offline.spaces.iter().all(|s| s.resting.is_empty()));
    assert!(offline.spaces.iter().any(|s| !s.transfers.is_empty()));

    // A lapsed lease: resting after lease + margin, offline after the down grace more.
    let (silent, _) = servers[1];
    let b = beats.next().unwrap();
    let silent_from = Instant::now();
    b.stop().await;
    wait_config(addr, Duration::from_secs(5), |c| {
        state_of(c, silent) == ServerState::Resting
    })
    .await;
    let rested = silent_from.elapsed();
    wait_config(addr, Duration::from_secs(5), |c| {
        state_of(c, silent) == ServerState::Offline
    })
    .await;
    let offline = silent_from.elapsed();
    assert!(rested >= Duration::from_millis(500) - every, "{rested:?}");
    assert!(
        offline >= rested + Duration::from_millis(700),
        "{rested:?} then {offline:?}"
    );
    for b in beats {
        b.stop().await;
    }
    cluster.stop_all().await;
}
