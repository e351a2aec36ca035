//! Real faults in a real cluster: three `tessera coordinator` and five `tessera server`
//! processes, every region on two servers, six clients writing and reading while one fault
//! strikes — `kill -9` of a server, a server stopped (SIGSTOP) for longer than its lease and
//! then continued, `kill -9` of the coordinators' Raft leader. After each run:
//! - the clients' history is linearizable (Porcupine, tools/lincheck);
//! - every key's final value is the same read by key and found by search (so every
//!   acknowledged write that the history keeps is on the servers that now hold its regions);
//! - a failed server is offline and in no replica set, and every region still has a replica;
//!   then, by state transfer, every region is back to two replicas on available servers;
//! - writes to the keys the failed server led succeeded again soon after the fault.

#[allow(dead_code)]
mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cluster::{check, final_state_agrees, lincheck, worker, Cluster, Op, KEYS, SPACE};
use tessera_client::{Client, ClientOptions, Configuration, ServerId, ServerState, Value};

const WORKERS: u64 = 6;
const RUN_FOR: Duration = Duration::from_secs(8);
/// When the fault strikes, after the clients started.
const FAULT_AT: Duration = Duration::from_secs(2);
/// A short lease, so a failure is acted on quickly.
const LEASE_MS: &str = "400";

#[derive(Clone, Copy, Debug)]
enum Fault {
    KillServer,
    StopServer,
    KillCoordinatorLeader,
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status().expect("running kill");
    assert!(status.success(), "kill -{name} {pid}");
}

/// How many key regions of the space each server leads.
fn key_regions_led(config: &Configuration) -> BTreeMap<ServerId, usize> {
    let mut led = BTreeMap::new();
    let space = config.space("kv").expect("the space");
    for set in &space.replicas[0] {
        *led.entry(set[0]).or_default() += 1;
    }
    led
}

async fn wait_for(client: &Client, what: &str, deadline: Duration, ok: impl Fn(&Configuration) -> bool) -> Arc<Configuration> {
    let started = Instant::now();
    loop {
        let config = client.refresh().await.expect("the configuration");
        if ok(&config) {
            return config;
        }
        assert!(started.elapsed() < deadline, "{what}: not within {deadline:?}; configuration {config:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn run(fault: Fault) {
    let checker = lincheck();
    let mut cluster = Cluster::start(3, 5, &["--lease-ms", LEASE_MS]);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let history = runtime.block_on(async {
        let options = ClientOptions::with_timeout(Duration::from_secs(5));
        let admin = Client::connect_with(&cluster.addresses(), options.clone()).await.expect("connecting");
        admin.add_space(SPACE).await.expect("add-space");
        let config = admin.configuration();
        // The server leading the most key regions: failing it hurts most.
        let led = key_regions_led(&config);
        let (victim_id, _) = led.iter().max_by_key(|(_, n)| **n).map(|(s, n)| (*s, *n)).expect("a leader");
        let victim_address = config.server(victim_id).expect("listed").address.clone();
        let started = Instant::now();
        let mut tasks = Vec::new();
        for id in 0..WORKERS {
            let client = Arc::new(Client::connect_with(&cluster.addresses(), options.clone()).await.expect("connecting"));
            tasks.push(tokio::spawn(worker(client, id, started, RUN_FOR)));
        }
        tokio::time::sleep(FAULT_AT).await;
        let struck = Instant::now();
        let mut stopped = None;
        let mut admin_ops = Vec::new();
        match fault {
            Fault::KillServer => {
                let n = cluster.server_at(&victim_address).expect("the victim's process");
                let mut daemon = cluster.servers[n].take().expect("running");
                daemon.child.kill().expect("kill -9");
                daemon.child.wait().expect("reaped");
            }
            Fault::StopServer => {
                let n = cluster.server_at(&victim_address).expect("the victim's process");
                let pid = cluster.servers[n].as_ref().expect("running").child.id();
                signal(pid, "STOP");
                stopped = Some(pid);
            }
            Fault::KillCoordinatorLeader => {
                let statuses = admin.coordinator_statuses().await;
                let leader = statuses.iter().find_map(|(_, s)| s.as_ref().ok().and_then(|s| s.leader)).expect("a leader");
                let mut daemon = cluster.coordinators[leader as usize - 1].take().expect("running");
                daemon.child.kill().expect("kill -9");
                daemon.child.wait().expect("reaped");
            }
        }
        let server_failed = !matches!(fault, Fault::KillCoordinatorLeader);
        if server_failed {
            // Taken out of every replica set, within a few leases.
            let config = wait_for(&admin, "the failed server offline", Duration::from_secs(15), |c| {
                c.server(victim_id).is_some_and(|s| s.state == ServerState::Offline)
            })
            .await;
            let space = config.space("kv").expect("the space");
            for set in space.replicas.iter().flatten() {
                assert!(!set.is_empty(), "every region keeps a replica");
                assert!(!set.contains(&victim_id) || set.len() == 1, "{victim_id} left in {set:?}");
            }
            // Writes to every key (those the failed server led among them) succeed again. They
            // join the history as client 99's.
            let mut pending: Vec<i64> = (0..KEYS).collect();
            let mut attempt = 0;
            while !pending.is_empty() {
                assert!(struck.elapsed() < Duration::from_secs(20), "writes to {pending:?} did not resume");
                let mut still = Vec::new();
                for k in pending {
                    attempt += 1;
                    let value = -(attempt * 100 + k);
                    let call = started.elapsed().as_nanos();
                    let result = admin.put("kv", k, [("v", value)]).await;
                    let ok = result.is_ok().then_some(true);
                    let ret = ok.map(|_| started.elapsed().as_nanos());
                    let (key, value) = (k.to_string(), Some(value));
                    admin_ops.push(Op { client: 99, op: "put", key, value, expect: None, call, ret, ok, output: None });
                    if result.is_err() {
                        still.push(k);
                    }
                }
                pending = still;
            }
            eprintln!("{fault:?}: writes resumed {:?} after the fault", struck.elapsed());
        }
        if let Some(pid) = stopped {
            // SIGCONT: it wakes up on its old configuration with a lapsed lease, and must not
            // serve or disturb anything; it comes back as a server holding nothing.
            signal(pid, "CONT");
        }
        let mut history = admin_ops;
        for t in tasks {
            history.extend(t.await.expect("a worker panicked"));
        }
        if server_failed {
            // Re-replication (under the clients' load until they stopped): every region is
            // back to two replicas, all on available servers, with no transfer left.
            let healed = wait_for(&admin, "every region back to two replicas", Duration::from_secs(60), |c| {
                let space = c.space("kv").expect("the space");
                let available = |s: &ServerId| c.server(*s).is_some_and(|i| i.state == ServerState::Available);
                space.transfers.is_empty() && space.replicas.iter().flatten().all(|set| set.len() == 2 && set.iter().all(available))
            })
            .await;
            eprintln!("{fault:?}: every region back to two replicas {:?} after the fault (epoch {})", struck.elapsed(), healed.epoch);
        }
        // The final state: every key by get, and one search (which now asks the new replicas
        // too), agree.
        final_state_agrees(&admin).await;
        history
    });
    let writes = history.iter().filter(|o| o.op != "get" && o.ok == Some(true)).count();
    assert!(history.len() > 100 && writes > 30, "the run did real work: {} ops, {writes} writes", history.len());
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, summary) = check(&checker, &history, dir.path(), &format!("{fault:?}.jsonl"));
    assert_eq!(code, 0, "{fault:?}: the history is not linearizable (see lincheck's output above)");
    assert!(summary.contains(r#""result":"ok""#), "{summary}");
    drop(cluster);
}

#[test]
fn kill_9_of_a_server() {
    run(Fault::KillServer);
}

#[test]
fn a_server_stopped_past_its_lease() {
    run(Fault::StopServer);
}

#[test]
fn kill_9_of_the_coordinator_leader() {
    run(Fault::KillCoordinatorLeader);
}

/// `make bench-failover`: how long writes to the keys a server led fail after `kill -9` of that
/// server, with the default lease (1 s, margin 0.5 s), over `TESSERA_FAILOVER_RUNS` (10) runs
/// on a fresh cluster each. Prints one JSON line: every run, the median and the maximum.
#[test]
#[ignore = "a benchmark: make bench-failover"]
fn failover_time() {
    let runs: usize = std::env::var("TESSERA_FAILOVER_RUNS").ok().and_then(|n| n.parse().ok()).unwrap_or(10);
    let mut times_ms = Vec::new();
    for _ in 0..runs {
        let mut cluster = Cluster::start(3, 5, &[]);
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
        let elapsed = runtime.block_on(async {
            let options = ClientOptions::with_timeout(Duration::from_secs(3));
            let admin = Client::connect_with(&cluster.addresses(), options).await.expect("connecting");
            admin.add_space(SPACE).await.expect("add-space");
            let config = admin.configuration();
            let space = config.space("kv").expect("the space").clone();
            let (victim, _) = key_regions_led(&config).into_iter().max_by_key(|(_, n)| *n).expect("a leader");
            let key_space = &space.tessellations()[0];
            let led: Vec<i64> = (0..256)
                .filter(|k| {
                    let region = tessera_geometry::key_region(key_space, &Value::Int(*k));
                    space.replicas_of(tessera_types::SubspaceId::KEY, region)[0] == victim
                })
                .collect();
            assert!(!led.is_empty(), "the victim leads some keys");
            for k in &led {
                admin.put("kv", *k, [("v", 0i64)]).await.expect("a put before the fault");
            }
            let address = config.server(victim).expect("listed").address.clone();
            let n = cluster.server_at(&address).expect("the victim's process");
            let mut daemon = cluster.servers[n].take().expect("running");
            daemon.child.kill().expect("kill -9");
            let struck = Instant::now();
            daemon.child.wait().expect("reaped");
            let mut pending = led;
            while !pending.is_empty() {
                assert!(struck.elapsed() < Duration::from_secs(30), "writes did not resume");
                let mut still = Vec::new();
                for k in pending {
                    if admin.put("kv", k, [("v", 1i64)]).await.is_err() {
                        still.push(k);
                    }
                }
                pending = still;
            }
            struck.elapsed()
        });
        times_ms.push(elapsed.as_millis() as u64);
        drop(cluster);
    }
    let mut sorted = times_ms.clone();
    sorted.sort_unstable();
    let median = sorted[sorted.len() / 2];
    let max = *sorted.last().expect("at least one run");
    println!(
        r#"{{"benchmark":"failover","what":"kill -9 of the server leading most key regions until a put to every key it led succeeds","lease_ms":1000,"margin_ms":500,"runs_ms":{times_ms:?},"median_ms":{median},"max_ms":{max}}}"#
    );
}
