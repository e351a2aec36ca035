//! A real cluster on loopback: three `tessera coordinator` processes and four `tessera server`
//! processes (every region on two of them), concurrent clients, and the recorded history
//! checked for linearizability by Porcupine (tools/lincheck, a Go program). The test fails on
//! a violation; a deliberately corrupted copy of the history must fail the checker too.

#[allow(dead_code)]
mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Daemon;
use tessera_client::{Client, ClientError, Predicate, Status, Value};

const SPACE: &str = "space kv key int k attributes int v subspace v create 8 partitions tolerate 1 failure";
const KEYS: i64 = 8;
const WORKERS: u64 = 6;
const RUN_FOR: Duration = Duration::from_secs(4);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("bound").port()
}

struct Cluster {
    coordinators: Vec<Daemon>,
    _servers: Vec<Daemon>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    fn start(coordinators: usize, servers: usize) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let ports: Vec<u16> = (0..coordinators).map(|_| free_port()).collect();
        let peers: Vec<String> = ports.iter().enumerate().map(|(i, p)| format!("{}=127.0.0.1:{p}", i + 1)).collect();
        let peers = peers.join(",");
        let coordinators: Vec<Daemon> = ports
            .iter()
            .enumerate()
            .map(|(i, port)| {
                let data = dir.path().join(format!("c{}", i + 1));
                let id = (i + 1).to_string();
                let listen = format!("127.0.0.1:{port}");
                Daemon::start(&["coordinator", "--id", &id, "--listen", &listen, "--peers", &peers, "--data-dir"], &data)
            })
            .collect();
        let addresses = coordinators.iter().map(|c| c.addr.clone()).collect::<Vec<_>>().join(",");
        let servers = (0..servers)
            .map(|i| {
                let data = dir.path().join(format!("s{}", i + 1));
                Daemon::start(&["server", "--listen", "127.0.0.1:0", "--coordinators", &addresses, "--data-dir"], &data)
            })
            .collect();
        Cluster { coordinators, _servers: servers, _dir: dir }
    }

    fn addresses(&self) -> String {
        self.coordinators.iter().map(|c| c.addr.clone()).collect::<Vec<_>>().join(",")
    }
}

/// One operation as lincheck reads it (tools/lincheck/README.md).
#[derive(Debug, Clone)]
struct Op {
    client: u64,
    op: &'static str,
    key: String,
    value: Option<i64>,
    expect: Option<i64>,
    call: u128,
    ret: Option<u128>,
    ok: Option<bool>,
    output: Option<i64>,
}

impl Op {
    fn json(&self) -> String {
        let n = |v: Option<i64>| v.map_or("null".to_owned(), |v| v.to_string());
        format!(
            r#"{{"client":{},"op":"{}","key":"{}","value":{},"expect":{},"call":{},"return":{},"ok":{},"output":{}}}"#,
            self.client,
            self.op,
            self.key,
            n(self.value),
            n(self.expect),
            self.call,
            self.ret.map_or("null".to_owned(), |r| r.to_string()),
            self.ok.map_or("null".to_owned(), |b| b.to_string()),
            n(self.output),
        )
    }
}

fn value_of(record: &tessera_client::Record) -> i64 {
    match record.attributes.get("v") {
        Some(Value::Int(v)) => *v,
        other => panic!("v is an int, got {other:?}"),
    }
}

/// The outcome of a write: known (`Some(ok)`), or unknown when the connection failed.
fn outcome(result: Result<(), ClientError>, negative: &[Status]) -> Option<bool> {
    match result {
        Ok(()) => Some(true),
        Err(e) if e.status().is_some_and(|s| negative.contains(&s)) => Some(false),
        Err(ClientError::Io(_) | ClientError::ConnectionClosed) => None,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

async fn worker(client: Arc<Client>, id: u64, started: Instant) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut seq = 0i64;
    let mut rng = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    while started.elapsed() < RUN_FOR {
        let key = (next() % KEYS as u64) as i64;
        seq += 1;
        // Every written value is unique, so the checker can tell writes apart.
        let value = (id as i64 + 1) * 1_000_000 + seq;
        let call = started.elapsed().as_nanos();
        let mut op = Op { client: id, op: "get", key: key.to_string(), value: None, expect: None, call, ret: None, ok: None, output: None };
        match next() % 10 {
            0..=3 => {
                let found = client.get("kv", key).await.unwrap_or_else(|e| panic!("get: {e}"));
                op.output = found.as_ref().map(value_of);
            }
            4..=5 => {
                op.op = "put";
                op.value = Some(value);
                op.ok = outcome(client.put("kv", key, [("v", value)]).await, &[]);
            }
            6 => {
                op.op = "del";
                op.ok = outcome(client.del("kv", key).await, &[Status::NotFound]);
            }
            7 => {
                // put_if_not_exist: a cas expecting no object.
                op.op = "cas";
                op.value = Some(value);
                op.ok = outcome(client.put_if_not_exist("kv", key, [("v", value)]).await, &[Status::CmpFail]);
            }
            _ => {
                // Compare-and-set against what this worker read last for the key, if anything.
                let expect = ops.iter().rev().find(|o: &&Op| o.key == key.to_string() && o.op == "get").and_then(|o| o.output);
                let Some(expect) = expect else { continue };
                op.op = "cas";
                op.value = Some(value);
                op.expect = Some(expect);
                let conditions = vec![Predicate::equals("v", expect)];
                op.ok = outcome(
                    client.cond_put("kv", key, conditions, [("v", value)]).await,
                    &[Status::CmpFail, Status::NotFound],
                );
            }
        }
        if op.op == "get" || op.ok.is_some() {
            op.ret = Some(started.elapsed().as_nanos());
        }
        ops.push(op);
    }
    ops
}

fn go() -> PathBuf {
    let on_path = Command::new("go").arg("version").output().is_ok_and(|o| o.status.success());
    if on_path {
        return PathBuf::from("go");
    }
    let fallback = PathBuf::from("/usr/local/go/bin/go");
    assert!(fallback.exists(), "the linearizability check needs Go (https://go.dev): none on PATH or in /usr/local/go");
    fallback
}

/// Builds tools/lincheck (Porcupine) into the target directory.
fn lincheck() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = root.join("target").join("lincheck");
    let status = Command::new(go())
        .arg("-C")
        .arg(root.join("tools/lincheck"))
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .status()
        .expect("running go build");
    assert!(status.success(), "building tools/lincheck failed");
    out
}

/// Runs the checker on `ops`: (exit code, its JSON summary line).
fn check(checker: &Path, ops: &[Op], dir: &Path, name: &str) -> (i32, String) {
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).expect("history file");
    for op in ops {
        writeln!(f, "{}", op.json()).expect("writing the history");
    }
    drop(f);
    let out = Command::new(checker).args(["-timeout", "120s"]).arg(&path).output().expect("running lincheck");
    eprintln!("lincheck {name}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn three_coordinators_four_servers_linearizable() {
    let checker = lincheck();
    let cluster = Cluster::start(3, 4);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let history = runtime.block_on(async {
        let admin = Client::connect(&cluster.addresses()).await.expect("connecting to the coordinators");
        assert!(admin.is_cluster());
        admin.add_space(SPACE).await.expect("add-space");
        let config = admin.configuration();
        assert_eq!(config.servers.len(), 4, "every server registered");
        let space = config.space("kv").expect("the new space");
        for regions in &space.replicas {
            for set in regions {
                assert_eq!(set.len(), 2, "K = f + 1 = 2 replicas");
                assert_ne!(set[0], set[1], "distinct replicas");
            }
        }
        let started = Instant::now();
        let mut tasks = Vec::new();
        for id in 0..WORKERS {
            let client = Arc::new(Client::connect(&cluster.addresses()).await.expect("connecting"));
            tasks.push(tokio::spawn(worker(client, id, started)));
        }
        let mut history = Vec::new();
        for t in tasks {
            history.extend(t.await.expect("a worker panicked"));
        }
        // The final state, as gets and as one search over every server, agree.
        let mut gets = BTreeMap::new();
        for key in 0..KEYS {
            if let Some(r) = admin.get("kv", key).await.expect("final get") {
                gets.insert(key, value_of(&r));
            }
        }
        let found = admin.search("kv", vec![]).await.expect("final search");
        let searched: BTreeMap<i64, i64> = found
            .iter()
            .map(|r| match r.key {
                Value::Int(k) => (k, value_of(r)),
                ref other => panic!("int keys, got {other:?}"),
            })
            .collect();
        assert_eq!(found.len(), searched.len(), "a search returns each key once");
        assert_eq!(searched, gets, "a search sees exactly the committed objects");
        assert_eq!(admin.count("kv", vec![]).await.expect("count"), gets.len() as u64);
        history
    });
    let writes = history.iter().filter(|o| o.op != "get" && o.ok == Some(true)).count();
    assert!(history.len() > 200 && writes > 50, "the run did real work: {} ops, {writes} successful writes", history.len());
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, summary) = check(&checker, &history, dir.path(), "history.jsonl");
    assert_eq!(code, 0, "the history is not linearizable (see lincheck's output above)");
    assert!(summary.contains(r#""result":"ok""#), "{summary}");

    // The checker must be able to fail: a read, after everything, of a value never written.
    let mut corrupted = history.clone();
    let end = corrupted.iter().filter_map(|o| o.ret).max().unwrap_or(0) + 1;
    corrupted.push(Op { client: 99, op: "get", key: "0".into(), value: None, expect: None, call: end, ret: Some(end + 1), ok: None, output: Some(-7) });
    let (code, _) = check(&checker, &corrupted, dir.path(), "corrupted.jsonl");
    assert_eq!(code, 1, "lincheck must reject a read of a value never written");
    drop(cluster);
}
