//! A real cluster of `tessera coordinator` and `tessera server` processes on loopback, clients
//! that record what they saw, and the Porcupine checker (tools/lincheck) that judges it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_client::{
    Client, ClientError, DocValue, Document, FormulaSpec, Predicate, Status, Value,
};
use tessera_types::DOCUMENT_ATTRIBUTE;

use super::proxy::Network;
use super::Daemon;

/// A key-value space the workers use: every region on two servers.
pub const SPACE: &str =
    "space kv key int k attributes int v subspace v create 8 partitions tolerate 1 failure";
pub const KEYS: i64 = 8;

use super::{free_port, reserve_port};

pub struct Cluster {
    pub coordinators: Vec<Option<Daemon>>,
    /// A server's `addr` is the address it advertises (its proxy's, on a cuttable network).
    pub servers: Vec<Option<Daemon>>,
    /// When set, servers talk through its proxies, so that one can be cut off.
    pub network: Option<Network>,
    /// More arguments for every `tessera server`.
    pub server_args: Vec<String>,
    pub dir: tempfile::TempDir,
}

impl Cluster {
    /// `coordinators` coordinator processes (with `coordinator_args` more, e.g. a lease), then
    /// `servers` server processes registered with them.
    pub fn start(coordinators: usize, servers: usize, coordinator_args: &[&str]) -> Cluster {
        Cluster::start_on(None, coordinators, servers, coordinator_args, &[])
    }

    /// As `start`, with every server's connections through `network`'s proxies (if given) and
    /// `server_args` for every server.
    pub fn start_on(
        network: Option<Network>,
        coordinators: usize,
        servers: usize,
        coordinator_args: &[&str],
        server_args: &[&str],
    ) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let ports: Vec<u16> = (0..coordinators).map(|_| free_port()).collect();
        let peers: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{}=127.0.0.1:{p}", i + 1))
            .collect();
        let peers = peers.join(",");
        let coordinators: Vec<Option<Daemon>> = ports
            .iter()
            .enumerate()
            .map(|(i, port)| {
                let data = dir.path().join(format!("c{}", i + 1));
                let id = (i + 1).to_string();
                let listen = format!("127.0.0.1:{port}");
                let mut args = vec![
                    "coordinator",
                    "--id",
                    &id,
                    "--listen",
                    &listen,
                    "--peers",
                    &peers,
                ];
                args.extend_from_slice(coordinator_args);
                args.push("--data-dir");
                Some(Daemon::start(&args, &data))
            })
            .collect();
        let server_args = server_args.iter().map(|a| a.to_string()).collect();
        let mut cluster = Cluster {
            coordinators,
            servers: vec![],
            network,
            server_args,
            dir,
        };
        for _ in 0..servers {
            cluster.add_server();
        }
        cluster
    }

    /// Starts one more server process (with a fresh data directory); returns its index.
    pub fn add_server(&mut self) -> usize {
        let n = self.servers.len();
        let data = self.dir.path().join(format!("s{}", n + 1));
        let addresses = self.addresses();
        let mut args = vec!["server".to_owned()];
        args.extend(self.server_args.iter().cloned());
        let Some(network) = &self.network else {
            args.extend(
                [
                    "--listen",
                    "127.0.0.1:0",
                    "--coordinators",
                    &addresses,
                    "--data-dir",
                ]
                .map(String::from),
            );
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            self.servers.push(Some(Daemon::start(&args, &data)));
            return n;
        };
        // Through its own proxies: one that peers and clients reach it by (its advertised
        // address), and one to each coordinator.
        // The server's port is held until its proxies have bound theirs, which once took it.
        let (held, port) = reserve_port();
        let listen = format!("127.0.0.1:{port}");
        let advertise = network.proxy(n, &listen);
        let coordinators: Vec<String> = addresses.split(',').map(|c| network.proxy(n, c)).collect();
        let coordinators = coordinators.join(",");
        drop(held);
        args.extend(
            [
                "--listen",
                &listen,
                "--advertise",
                &advertise,
                "--coordinators",
                &coordinators,
                "--data-dir",
            ]
            .map(String::from),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut daemon = Daemon::start(&args, &data);
        daemon.addr = advertise;
        self.servers.push(Some(daemon));
        n
    }

    /// Starts server `n` again on its data directory, listening at `listen` (its address
    /// before, as a restart by systemd would), after it stopped. For a cluster started without
    /// a network of proxies.
    pub fn restart_server(&mut self, n: usize, listen: &str) {
        assert!(
            self.network.is_none(),
            "restarts are for clusters on loopback"
        );
        let data = self.dir.path().join(format!("s{}", n + 1));
        let addresses = self.addresses();
        let mut args = vec!["server".to_owned()];
        args.extend(self.server_args.iter().cloned());
        args.extend(
            [
                "--listen",
                listen,
                "--coordinators",
                &addresses,
                "--data-dir",
            ]
            .map(String::from),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.servers[n] = Some(Daemon::start(&args, &data));
    }

    pub fn addresses(&self) -> String {
        self.coordinators
            .iter()
            .flatten()
            .map(|c| c.addr.clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The index of the server process listening at `address`.
    pub fn server_at(&self, address: &str) -> Option<usize> {
        self.servers
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.addr == address))
    }
}

/// One operation as lincheck reads it (tools/lincheck/README.md).
#[derive(Debug, Clone)]
pub struct Op {
    pub client: u64,
    pub op: &'static str,
    pub key: String,
    pub value: Option<i64>,
    pub expect: Option<i64>,
    pub call: u128,
    pub ret: Option<u128>,
    pub ok: Option<bool>,
    pub output: Option<i64>,
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

/// One search of everything in `space`: each object's `value` by its `key`; each key is
/// found once.
async fn search_everything<K: Ord>(
    admin: &Client,
    space: &str,
    key: impl Fn(&Value) -> K,
    value: fn(&tessera_client::Record) -> i64,
) -> BTreeMap<K, i64> {
    let found = admin.search(space, vec![]).await.expect("final search");
    let searched: BTreeMap<K, i64> = found.iter().map(|r| (key(&r.key), value(r))).collect();
    assert_eq!(
        found.len(),
        searched.len(),
        "a search returns each key once"
    );
    searched
}

/// Every key read by key, and one search over every server, agree; so does a count. Returns
/// the final values.
pub async fn final_state_agrees(admin: &Client) -> BTreeMap<i64, i64> {
    let mut gets = BTreeMap::new();
    for key in 0..KEYS {
        if let Some(r) = admin.get("kv", key).await.expect("final get") {
            gets.insert(key, value_of(&r));
        }
    }
    let searched = search_everything(
        admin,
        "kv",
        |k| match k {
            Value::Int(k) => *k,
            other => panic!("int keys, got {other:?}"),
        },
        value_of,
    )
    .await;
    assert_eq!(
        searched, gets,
        "a search sees exactly the committed objects"
    );
    assert_eq!(
        admin.count("kv", vec![]).await.expect("count"),
        gets.len() as u64
    );
    gets
}

pub fn value_of(record: &tessera_client::Record) -> i64 {
    match record.attributes.get("v") {
        Some(Value::Int(v)) => *v,
        other => panic!("v is an int, got {other:?}"),
    }
}

/// The outcome of a write: known (`Some(ok)`), or unknown (`None`) when the connection failed
/// or no answer came in time (TIMEOUT: it may or may not have been applied, and lincheck
/// treats it as an operation that may take effect at any time after its call, or never).
fn outcome(result: Result<(), ClientError>, negative: &[Status]) -> Option<bool> {
    match result {
        Ok(()) => Some(true),
        Err(e) if e.status().is_some_and(|s| negative.contains(&s)) => Some(false),
        Err(e @ (ClientError::Io(_) | ClientError::ConnectionClosed)) => {
            eprintln!("a write of unknown outcome: {e}");
            None
        }
        Err(e) if e.status() == Some(Status::Timeout) => {
            eprintln!("a write of unknown outcome: {e}");
            None
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}

/// A seeded xorshift generator: each worker's own sequence of choices.
fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed | 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// A client doing random gets, puts, deletes and compare-and-sets on the [`KEYS`] keys of
/// [`SPACE`] for `run_for`, recording what it saw. A get that fails (its server is down and
/// the deadline passed) is left out: it had no effect.
pub async fn worker(client: Arc<Client>, id: u64, started: Instant, run_for: Duration) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut seq = 0i64;
    let mut next = xorshift(id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    while started.elapsed() < run_for {
        let key = (next() % KEYS as u64) as i64;
        seq += 1;
        // Every written value is unique, so the checker can tell writes apart.
        let value = (id as i64 + 1) * 1_000_000 + seq;
        let call = started.elapsed().as_nanos();
        let mut op = Op {
            client: id,
            op: "get",
            key: key.to_string(),
            value: None,
            expect: None,
            call,
            ret: None,
            ok: None,
            output: None,
        };
        match next() % 10 {
            0..=3 => match client.get("kv", key).await {
                Ok(found) => op.output = found.as_ref().map(value_of),
                Err(e) if e.status() == Some(Status::Timeout) => continue,
                Err(e) => panic!("get: {e}"),
            },
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
                op.ok = outcome(
                    client.put_if_not_exist("kv", key, [("v", value)]).await,
                    &[Status::CmpFail],
                );
            }
            _ => {
                // Compare-and-set against what this worker read last for the key, if anything.
                let expect = ops
                    .iter()
                    .rev()
                    .find(|o: &&Op| o.key == key.to_string() && o.op == "get")
                    .and_then(|o| o.output);
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

/// A multi-threaded runtime for a test's clients.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A client of `cluster`'s coordinators, once they have added the space `description`.
pub async fn admin_with_space(cluster: &Cluster, description: &str) -> Client {
    let admin = Client::connect(&cluster.addresses())
        .await
        .expect("connecting to the coordinators");
    admin.add_space(description).await.expect("add-space");
    admin
}

/// `workers` [`worker`]s on `cluster` with default client options, running for `run_for` from
/// now: when they started, and their tasks.
pub async fn start_workers(
    cluster: &Cluster,
    workers: u64,
    run_for: Duration,
) -> (Instant, Vec<tokio::task::JoinHandle<Vec<Op>>>) {
    let started = Instant::now();
    let options = tessera_client::ClientOptions::default();
    let tasks = spawn_workers(&cluster.addresses(), options, workers, started, run_for).await;
    (started, tasks)
}

/// `workers` [`worker`]s, each on its own client connected to `addresses` with `options`,
/// numbered from 0.
pub async fn spawn_workers(
    addresses: &str,
    options: tessera_client::ClientOptions,
    workers: u64,
    started: Instant,
    run_for: Duration,
) -> Vec<tokio::task::JoinHandle<Vec<Op>>> {
    let mut tasks = Vec::new();
    for id in 0..workers {
        let client = Client::connect_with(addresses, options.clone())
            .await
            .expect("connecting");
        tasks.push(tokio::spawn(worker(Arc::new(client), id, started, run_for)));
    }
    tasks
}

/// A dynamic space beside [`SPACE`]: documents `{"v": N}`, every region on two servers.
pub const DOC_SPACE: &str =
    "space docs dynamic key k dimensions 2 create 8 partitions tolerate 1 failure";
pub const DOC_KEYS: i64 = 6;
/// The compression formula a third of the document writes name: placed by `v` in an overlay
/// that holds copies.
pub const DOC_FORMULA: &str = "by_v";
/// The formula another third name: placed by `v` in an overlay that holds pointers (a search
/// reading it reads each document from its point leader).
pub const DOC_POINTER_FORMULA: &str = "by_v_pointer";

/// Registers [`DOC_SPACE`] and its formulas [`DOC_FORMULA`] and [`DOC_POINTER_FORMULA`].
pub async fn add_document_space(admin: &Client) {
    admin.add_space(DOC_SPACE).await.expect("add-space docs");
    for (id, overlay) in [(DOC_FORMULA, "v"), (DOC_POINTER_FORMULA, "&v")] {
        let spec = FormulaSpec::parse(Some(id), &[overlay]).expect("a formula");
        admin.add_formula("docs", spec).await.expect("add-formula");
    }
}

fn document_key(key: i64) -> String {
    format!("d{key}")
}

/// The `v` of a document of [`DOC_SPACE`].
pub fn document_value(record: &tessera_client::Record) -> i64 {
    match record.attributes.get(DOCUMENT_ATTRIBUTE) {
        Some(Value::Document(doc)) => match doc.get("v") {
            Some(DocValue::Int(v)) => *v,
            other => panic!("v is an int, got {other:?}"),
        },
        other => panic!("a document, got {other:?}"),
    }
}

/// [`worker`] on [`DOC_SPACE`]: gets, puts (each naming the default formula, [`DOC_FORMULA`]
/// or [`DOC_POINTER_FORMULA`], so documents move between the unispace and the overlays) and deletes of
/// documents `{"v": N}`, recorded as registers under keys `d0`, `d1`, … for the checker.
pub async fn document_worker(
    client: Arc<Client>,
    id: u64,
    started: Instant,
    run_for: Duration,
) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut seq = 0i64;
    let mut next = xorshift(id.wrapping_mul(0x2545_F491_4F6C_DD1D));
    while started.elapsed() < run_for {
        let key = document_key((next() % DOC_KEYS as u64) as i64);
        seq += 1;
        let value = (id as i64 + 1) * 1_000_000 + seq;
        let mut op = Op {
            client: id,
            op: "get",
            key: key.clone(),
            value: None,
            expect: None,
            call: started.elapsed().as_nanos(),
            ret: None,
            ok: None,
            output: None,
        };
        match next() % 8 {
            0..=3 => match client.get("docs", key.as_str()).await {
                Ok(found) => op.output = found.as_ref().map(document_value),
                Err(e) if e.status() == Some(Status::Timeout) => continue,
                Err(e) => panic!("get: {e}"),
            },
            4..=6 => {
                op.op = "put";
                op.value = Some(value);
                let formula = ["", DOC_FORMULA, DOC_POINTER_FORMULA][(value % 3) as usize];
                let doc = Document::new([("v".to_owned(), DocValue::Int(value))].into());
                let put = client.put_document_with_formula("docs", key.as_str(), doc, formula);
                op.ok = outcome(put.await, &[]);
            }
            _ => {
                op.op = "del";
                op.ok = outcome(client.del("docs", key.as_str()).await, &[Status::NotFound]);
            }
        }
        if op.op == "get" || op.ok.is_some() {
            op.ret = Some(started.elapsed().as_nanos());
        }
        ops.push(op);
    }
    ops
}

/// The final documents: by get, by a search of everything, and by a search on `v` (which reads
/// each formula's overlay for its documents, following the pointers of
/// [`DOC_POINTER_FORMULA`]'s, and the unispace for the others) agree.
pub async fn final_documents_agree(admin: &Client) -> BTreeMap<String, i64> {
    let mut gets = BTreeMap::new();
    for key in 0..DOC_KEYS {
        let key = document_key(key);
        if let Some(r) = admin.get("docs", key.as_str()).await.expect("final get") {
            gets.insert(key, document_value(&r));
        }
    }
    let searched = search_everything(
        admin,
        "docs",
        |k| match k {
            Value::String(k) => k.as_str().expect("text keys").to_owned(),
            other => panic!("string keys, got {other:?}"),
        },
        document_value,
    )
    .await;
    assert_eq!(
        searched, gets,
        "a search sees exactly the committed documents"
    );
    for (key, v) in &gets {
        let by_value = admin
            .search("docs", vec![Predicate::equals("v", *v)])
            .await
            .expect("search by v");
        let keys: Vec<&Value> = by_value.iter().map(|r| &r.key).collect();
        assert_eq!(keys, vec![&Value::from(key.clone())], "v = {v}");
    }
    gets
}

fn go() -> PathBuf {
    let on_path = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if on_path {
        return PathBuf::from("go");
    }
    let fallback = PathBuf::from("/usr/local/go/bin/go");
    assert!(
        fallback.exists(),
        "the linearizability check needs Go (https://go.dev): none on PATH or in /usr/local/go"
    );
    fallback
}

/// Builds tools/lincheck (Porcupine) into the target directory.
pub fn lincheck() -> PathBuf {
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

/// Asserts that a run did real work: more than `ops_min` operations, more than `writes_min`
/// of them successful writes.
pub fn assert_did_work(history: &[Op], ops_min: usize, writes_min: usize) {
    let writes = history
        .iter()
        .filter(|o| o.op != "get" && o.ok == Some(true))
        .count();
    assert!(
        history.len() > ops_min && writes > writes_min,
        "the run did real work: {} ops, {writes} successful writes",
        history.len()
    );
}

/// Asserts that the checker finds `history` linearizable (`name`: its file, and the run in the
/// failure message).
pub fn assert_linearizable(checker: &Path, history: &[Op], name: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, summary) = check(checker, history, dir.path(), &format!("{name}.jsonl"));
    assert_eq!(
        code, 0,
        "{name}: the history is not linearizable (see lincheck's output above)"
    );
    assert!(summary.contains(r#""result":"ok""#), "{summary}");
}

/// Runs the checker on `ops`: (exit code, its JSON summary line).
pub fn check(checker: &Path, ops: &[Op], dir: &Path, name: &str) -> (i32, String) {
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).expect("history file");
    for op in ops {
        writeln!(f, "{}", op.json()).expect("writing the history");
    }
    drop(f);
    let out = Command::new(checker)
        .args(["-timeout", "120s"])
        .arg(&path)
        .output()
        .expect("running lincheck");
    eprintln!(
        "lincheck {name}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if let Some(keep) =
        std::env::var_os("TESSERA_KEEP_HISTORY").filter(|_| out.status.code() != Some(0))
    {
        // For looking into a failure: the history outlives the test's temporary directory.
        let kept = Path::new(&keep).join(name);
        std::fs::copy(&path, &kept).expect("keeping the history");
        eprintln!("history kept in {}", kept.display());
    }
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}
