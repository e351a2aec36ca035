//! `make bench-transfers`: what state transfer costs, on a real cluster of three coordinators
//! and five (then four, or six) server processes with the default lease. Reported, not
//! asserted. For each run, on a fresh cluster:
//! 1. load `TESSERA_TRANSFER_OBJECTS` (50 000) objects of about 1 KB into a K = 2 space of 32
//!    key regions (the load's own rate, in MB/s, is the baseline of the copy rate);
//! 2. start 8 closed-loop clients, half gets and half puts of random keys, counting answers
//!    per 100 ms window;
//! 3. strike: `kill -9` of a server (re-replication) or a sixth server started (a join);
//! 4. wait until every region has two replicas, balanced, no transfer under way.
//!
//! Figures per run: throughput (median of its 100 ms windows) before the strike, while a killed
//! server is not yet detected, while regions are copied (first transfer to healed), and after;
//! the copy rate, the bytes of the objects in the regions that gained a member over the
//! time from the first transfer to the last completion; for a kill, the time until the server
//! was taken offline. One JSON line per scenario: every run, and the medians.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use tessera_client::{Client, ClientOptions, Configuration, ServerId, ServerState, Value};
use tessera_geometry::key_region;

const SPACE: &str =
    "space blobs key int k attributes string body create 32 partitions tolerate 1 failure";
/// Bytes of one object as the user wrote it: an 8-byte key and a 1000-byte body.
const BODY: usize = 1000;
const OBJECT_BYTES: usize = 8 + BODY;
const CLIENTS: u64 = 8;
const WINDOW: Duration = Duration::from_millis(100);
const BEFORE: Duration = Duration::from_secs(3);
const AFTER: Duration = Duration::from_secs(2);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Strike {
    KillServer,
    JoinServer,
}

/// Each region of the key subspace and its replica set.
fn key_sets(config: &Configuration) -> Vec<Vec<ServerId>> {
    config.space("blobs").expect("the space").replicas[0].clone()
}

fn healed(config: &Configuration) -> bool {
    let space = config.space("blobs").expect("the space");
    let available: Vec<ServerId> = config
        .servers
        .iter()
        .filter(|s| s.state == ServerState::Available)
        .map(|s| s.id)
        .collect();
    let regions = &space.replicas[0];
    let (floor, ceil) = (
        regions.len() * 2 / available.len(),
        (regions.len() * 2).div_ceil(available.len()),
    );
    space.transfers.is_empty()
        && regions
            .iter()
            .all(|set| set.len() == 2 && set.iter().all(|s| available.contains(s)))
        && available
            .iter()
            .all(|s| (floor..=ceil).contains(&regions.iter().filter(|set| set.contains(s)).count()))
}

fn body(seed: u64) -> String {
    let letter = (b'a' + (seed % 26) as u8) as char;
    std::iter::repeat_n(letter, BODY).collect()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    if values.is_empty() {
        0.0
    } else {
        values[values.len() / 2]
    }
}

/// Loads `objects` objects with 32 concurrent writers; returns the load's rate in MB/s.
async fn load(client: &Arc<Client>, objects: u64) -> f64 {
    let started = Instant::now();
    let writers: Vec<_> = (0..32)
        .map(|w| {
            let client = client.clone();
            tokio::spawn(async move {
                for k in (w..objects).step_by(32) {
                    client
                        .put("blobs", k as i64, [("body", body(k))])
                        .await
                        .expect("a put while loading");
                }
            })
        })
        .collect();
    for w in writers {
        w.await.expect("a writer panicked");
    }
    (objects as usize * OBJECT_BYTES) as f64 / 1e6 / started.elapsed().as_secs_f64()
}

/// Closed-loop clients counting answers per window since `t0` until `stop`.
fn start_clients(
    clients: &[Arc<Client>],
    objects: u64,
    t0: Instant,
    windows: Arc<Vec<AtomicU64>>,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    clients
        .iter()
        .enumerate()
        .map(|(i, client)| {
            let (client, windows, stop) = (client.clone(), windows.clone(), stop.clone());
            tokio::spawn(async move {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (i as u64 + 1);
                while !stop.load(Ordering::Relaxed) {
                    // xorshift: a fixed sequence per client, no shared generator.
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let k = (x % objects) as i64;
                    let ok = if x & (1 << 40) == 0 {
                        client.get("blobs", k).await.is_ok()
                    } else {
                        client.put("blobs", k, [("body", body(x))]).await.is_ok()
                    };
                    let w = (t0.elapsed().as_nanos() / WINDOW.as_nanos()) as usize;
                    if ok && w < windows.len() {
                        windows[w].fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect()
}

/// One run: its figures as JSON fields.
fn run(strike: Strike, objects: u64, transfer_mb_s: &str) -> BTreeMap<&'static str, f64> {
    let mut cluster = Cluster::start_on(None, 3, 5, &[], &["--transfer-mb-s", transfer_mb_s]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let figures = runtime.block_on(async {
        let options = ClientOptions::with_timeout(Duration::from_secs(5));
        let admin = Arc::new(
            Client::connect_with(&cluster.addresses(), options.clone())
                .await
                .expect("connecting"),
        );
        admin.add_space(SPACE).await.expect("add-space");
        let load_mb_s = load(&admin, objects).await;
        let key_space = admin
            .configuration()
            .space("blobs")
            .expect("the space")
            .tessellations()[0]
            .clone();
        let mut per_region = vec![0usize; 32];
        for k in 0..objects {
            per_region[key_region(&key_space, &Value::Int(k as i64)).0 as usize] += 1;
        }

        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            clients.push(Arc::new(
                Client::connect_with(&cluster.addresses(), options.clone())
                    .await
                    .expect("connecting"),
            ));
        }
        let windows: Arc<Vec<AtomicU64>> = Arc::new((0..6000).map(|_| AtomicU64::new(0)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let t0 = Instant::now();
        let tasks = start_clients(&clients, objects, t0, windows.clone(), stop.clone());
        tokio::time::sleep(BEFORE).await;

        let before = admin.refresh().await.expect("the configuration");
        let struck = Instant::now();
        let mut victim = None;
        match strike {
            Strike::KillServer => {
                // The server holding the most regions.
                let held = |s: ServerId| {
                    key_sets(&before)
                        .iter()
                        .filter(|set| set.contains(&s))
                        .count()
                };
                let id = before
                    .servers
                    .iter()
                    .map(|s| s.id)
                    .max_by_key(|s| held(*s))
                    .expect("servers");
                let n = cluster
                    .server_at(&before.server(id).expect("listed").address)
                    .expect("its process");
                let mut daemon = cluster.servers[n].take().expect("running");
                daemon.child.kill().expect("kill -9");
                daemon.child.wait().expect("reaped");
                victim = Some(id);
            }
            Strike::JoinServer => {
                cluster.add_server();
            }
        }
        // Poll the configuration: when the server went offline, when the first transfer
        // appeared, when every region was back.
        let (mut offline_at, mut first_transfer_at) = (None, None);
        let after = loop {
            let config = admin.refresh().await.expect("the configuration");
            let space = config.space("blobs").expect("the space");
            if offline_at.is_none()
                && victim.is_some_and(|v| {
                    config
                        .server(v)
                        .is_some_and(|s| s.state == ServerState::Offline)
                })
            {
                offline_at = Some(struck.elapsed());
            }
            if first_transfer_at.is_none() && !space.transfers.is_empty() {
                first_transfer_at = Some(struck.elapsed());
            }
            if first_transfer_at.is_some() && healed(&config) {
                break config;
            }
            assert!(
                struck.elapsed() < Duration::from_secs(120),
                "not healed within 120 s: {config:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let healed_at = struck.elapsed();
        tokio::time::sleep(AFTER).await;
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.expect("a client panicked");
        }

        // The copy: every region's members now that it did not have before.
        let copied_bytes: usize = key_sets(&before)
            .iter()
            .zip(key_sets(&after))
            .enumerate()
            .map(|(r, (was, now))| {
                now.iter().filter(|s| !was.contains(s)).count() * per_region[r] * OBJECT_BYTES
            })
            .sum();
        let first = first_transfer_at.expect("a transfer");
        let copy_s = (healed_at - first).as_secs_f64();
        let window_of = |t: Duration| ((struck - t0 + t).as_nanos() / WINDOW.as_nanos()) as usize;
        let rates = |from: usize, to: usize| -> f64 {
            let mut v: Vec<f64> = (from..to.min(windows.len()))
                .map(|w| windows[w].load(Ordering::Relaxed) as f64 / WINDOW.as_secs_f64())
                .collect();
            median(&mut v)
        };
        // Skip the first second (connections warming up) and the windows cut by the strike
        // and the heal.
        let strike_w = window_of(Duration::ZERO);
        let heal_w = window_of(healed_at);
        let end_w = window_of(healed_at + AFTER);
        let mut f = BTreeMap::new();
        f.insert("load_mb_s", load_mb_s);
        let copy_w = window_of(first);
        f.insert("ops_s_before", rates(10, strike_w));
        if let Some(o) = offline_at {
            f.insert("ops_s_detecting", rates(strike_w + 1, window_of(o)));
        }
        f.insert("ops_s_copying", rates(copy_w + 1, heal_w.max(copy_w + 2)));
        f.insert("ops_s_after", rates(heal_w + 1, end_w));
        f.insert("healed_ms", healed_at.as_millis() as f64);
        f.insert("first_transfer_ms", first.as_millis() as f64);
        if let Some(o) = offline_at {
            f.insert("offline_ms", o.as_millis() as f64);
        }
        f.insert("copied_mb", copied_bytes as f64 / 1e6);
        f.insert("copy_mb_s", copied_bytes as f64 / 1e6 / copy_s);
        f
    });
    drop(cluster);
    figures
}

fn report(strike: Strike, what: &str) {
    let objects: u64 = std::env::var("TESSERA_TRANSFER_OBJECTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(50_000);
    let runs: usize = std::env::var("TESSERA_TRANSFER_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let rate = std::env::var("TESSERA_TRANSFER_MB_S").unwrap_or_else(|_| "8".into());
    let all: Vec<BTreeMap<&str, f64>> = (0..runs).map(|_| run(strike, objects, &rate)).collect();
    let mut medians = BTreeMap::new();
    for key in all[0].keys() {
        let mut values: Vec<f64> = all.iter().filter_map(|r| r.get(key).copied()).collect();
        medians.insert(*key, median(&mut values));
    }
    let copying_vs_before = medians["ops_s_copying"] / medians["ops_s_before"];
    let copy_vs_load = medians["copy_mb_s"] / medians["load_mb_s"];
    let json = |m: &BTreeMap<&str, f64>| {
        let fields: Vec<String> = m.iter().map(|(k, v)| format!(r#""{k}":{v:.1}"#)).collect();
        format!("{{{}}}", fields.join(","))
    };
    let runs: Vec<String> = all.iter().map(json).collect();
    println!(
        r#"{{"benchmark":"{what}","strike":"{strike:?}","transfer_mb_s":{rate},"objects":{objects},"object_bytes":{OBJECT_BYTES},"clients":{CLIENTS},"runs":[{}],"median":{},"copying_vs_before":{copying_vs_before:.2},"copy_vs_load":{copy_vs_load:.2}}}"#,
        runs.join(","),
        json(&medians)
    );
}

#[test]
#[ignore = "a benchmark: make bench-transfers"]
fn re_replication_after_kill_9() {
    report(Strike::KillServer, "re-replication");
}

#[test]
#[ignore = "a benchmark: make bench-transfers"]
fn a_server_joining() {
    report(Strike::JoinServer, "join");
}
