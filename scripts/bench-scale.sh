#!/usr/bin/env bash
# What grows with the server count (docs/scale.md; issue "Faster than the stores users would
# pick instead", item 6). Builds the release binary, then for each N of SERVERS starts real
# processes on 127.0.0.1 -- COORDINATORS `tessera coordinator` and N `tessera server` (every
# one on SERVER_CPU) -- and measures, with small data:
#
#  (a) the configuration's size in bytes (`tessera status --json`'s configuration_bytes):
#      servers registered, then with the YCSB and `people` spaces loaded;
#  (b) the time to install an epoch: EPOCHS changes (add-space, then rm-space, of a small
#      space `probe`, GAP_S apart; once before the loads, once after), from the moment the coordinators applied each (their
#      `applied ... epoch=E` log line, the earliest of them) until each server installed it
#      (its `configuration installed epoch=E'` line, E' >= E), read from the processes' logs
#      (one clock: they all run here); and the `tessera add-space` / `rm-space` command's own
#      time (it is answered once every server's heartbeat reports the epoch);
#  (c) the client's planning time per search: `tessera bench -w plan` on CLIENT_CPU with no
#      cluster running, over configurations of PLAN_SERVERS servers that the coordinators'
#      state machine computes (one region, a few, all; both fan-outs);
#  (d) the coordinators' CPU seconds (/proc/PID/stat): idle per second over IDLE_S seconds
#      (heartbeats of N servers, one every quarter lease each), per epoch over the changes (less the idle
#      rate), and over the whole run;
#  (e) per-operation server CPU (every server process's user + system time, less their idle
#      rate, per operation) and throughput of gets (YCSB C), the 95/5 read/update mix of
#      HyperDex's scaling run (YCSB B), YCSB A (so updates: 2 A - C), inserts (the loads), and
#      searches (`secondary` eq1, eq2, range), the client pinned to CLIENT_CPU with
#      max(THREADS, THREADS_PER_SERVER x N) tasks (the same requests in flight per server at
#      every N); from those costs, a projection for clusters of 32 and 64 servers (the model
#      is printed with it). Servers the coordinators took offline (a lease that lapsed on the
#      crowded core) are counted: a run with any is suspect.
#
# One JSON object on stdout; progress on stderr; logs, data and raw reports in $OUT.
#
# Knobs (environment):
#   SERVERS="8 16 32"   server counts          COORDINATORS=1 (1, 3 or 5)   REPLICAS=2 (K)
#   RECORDS=10000       records of each load (YCSB's ~1 KB objects, `people`'s ~100 B)
#   DURATION_S=5        seconds of each timed run
#   THREADS=16 THREADS_PER_SERVER=4   closed-loop client tasks: max(THREADS, THREADS_PER_SERVER x N)
#   LEASE_MS=1000       the servers' lease (`tessera coordinator --lease-ms`)
#   EPOCHS=6            configuration changes timed       GAP_S=1.0 seconds between them
#   IDLE_S=10           seconds of the idle sample       CACHE_MB=8 each server's block cache
#   SERVER_CPU=0 CLIENT_CPU=1   taskset CPU lists (coordinators and servers share SERVER_CPU)
#   PLAN_SERVERS=8,16,32,64,128  PLAN_OPS=200000   the planning benchmark's clusters and plans
#   QUIET_CORES=0.5 QUIET_MAX_WAIT=5    before a timed run, wait (at most that long) until other
#                       processes use less than QUIET_CORES cores
#   BIN=...             a built `tessera` (skips the build)
#   OUT=$(mktemp -d)    data directories, logs and raw reports
# Smoke run (about a minute): SERVERS=2 RECORDS=500 DURATION_S=1 EPOCHS=2 IDLE_S=2 \
#   PLAN_SERVERS=2,4 PLAN_OPS=5000 scripts/bench-scale.sh
#
# Needs: cargo, python3; taskset if available. Only 127.0.0.1 is used. Every process started is stopped on
# exit, failure or Ctrl-C (by the PIDs the driver recorded, and only while they still run
# this binary).
set -euo pipefail

cd "$(dirname "$0")/.."
for tool in python3; do
    command -v "$tool" >/dev/null || { echo "bench-scale.sh: $tool not found" >&2; exit 2; }
done

if [ -z "${BIN:-}" ]; then
    command -v cargo >/dev/null || { echo "bench-scale.sh: cargo not found" >&2; exit 2; }
    echo "bench-scale.sh: cargo build --release --locked -p tessera --features peers" >&2
    nice -n 19 cargo build --release --locked -p tessera --features peers >&2
    BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/tessera"
fi
export BIN
export OUT="${OUT:-$(mktemp -d /tmp/tessera-bench-scale.XXXXXX)}"
mkdir -p "$OUT"
: > "$OUT/pids"
echo "bench-scale.sh: working directory $OUT" >&2

cleanup() {
    while read -r pid; do
        [ -n "$pid" ] || continue
        if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF "$BIN "; then
            echo "bench-scale.sh: stopping leftover process $pid" >&2
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done < "$OUT/pids"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

python3 - <<'PY'
import calendar, json, os, re, resource, shutil, signal, statistics, subprocess, sys, time

sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import benchkit
from benchkit import cpu_s, free_port, git, log, pin

BIN, OUT = os.environ["BIN"], os.environ["OUT"]
env = os.environ.get
SERVERS = [int(n) for n in env("SERVERS", "8 16 32").split()]
COORDINATORS = int(env("COORDINATORS", 1))
REPLICAS = int(env("REPLICAS", 2))
RECORDS = int(env("RECORDS", 10_000))
DURATION_S = float(env("DURATION_S", 5))
THREADS = int(env("THREADS", 16))
THREADS_PER_SERVER = int(env("THREADS_PER_SERVER", 4))
LEASE_MS = int(env("LEASE_MS", 1000))
EPOCHS = int(env("EPOCHS", 6))
GAP_S = float(env("GAP_S", 1.0))
IDLE_S = float(env("IDLE_S", 10))
CACHE_MB = int(env("CACHE_MB", 8))
SERVER_CPU, CLIENT_CPU = benchkit.cpus("0", "1")
PLAN_SERVERS = env("PLAN_SERVERS", "8,16,32,64,128")
PLAN_OPS = int(env("PLAN_OPS", 200_000))
QUIET_CORES = float(env("QUIET_CORES", 0.5))
QUIET_MAX_WAIT = float(env("QUIET_MAX_WAIT", 5))
MANY_OPS = 1_000_000_000  # timed runs end by --duration-s
PROBE = "space probe key id attributes int a subspace a create 16 partitions"
if COORDINATORS not in (1, 3, 5):
    sys.exit("bench-scale.sh: COORDINATORS must be 1, 3 or 5")
if min(SERVERS) < REPLICAS:
    sys.exit(f"bench-scale.sh: every count of SERVERS must be at least REPLICAS ({REPLICAS})")
# The processes' logs say when each configuration was applied and installed.
LOG_ENV = dict(os.environ, NO_COLOR="1",
               RUST_LOG="warn,openraft=error,tessera_server::chain=info,tessera_coordinator::sm_store=debug")

benchkit.configure("bench-scale.sh", OUT, BIN, SERVER_CPU, QUIET_CORES, QUIET_MAX_WAIT, CLIENT_CPU)

def on_signal(signum, _frame):
    raise SystemExit(128 + signum)
signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)

def machine_busy_s():
    return benchkit.machine_busy_jiffies() / benchkit.CLK

def med(xs):
    return statistics.median(xs) if xs else None

class Cluster:
    """COORDINATORS coordinators and n servers, each its own process."""
    def __init__(self, n):
        self.n = n
        self.dir = os.path.join(OUT, f"n{n}")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.procs = []
        ports = [free_port() for _ in range(COORDINATORS)]
        peers = ",".join(f"{i + 1}=127.0.0.1:{p}" for i, p in enumerate(ports))
        self.coordinators = []
        for i, port in enumerate(ports):
            p = self.spawn(f"c{i + 1}", ["coordinator", "--id", str(i + 1), "--listen", f"127.0.0.1:{port}",
                                         "--peers", peers, "--default-tolerate", str(REPLICAS - 1),
                                         "--lease-ms", str(LEASE_MS)])
            self.coordinators.append(p)
        self.addrs = [f"127.0.0.1:{p}" for p in ports]
        for p in self.coordinators:
            self.ready(p)
        self.servers = [self.spawn(f"s{i + 1}", ["server", "--listen", "127.0.0.1:0", "--coordinators",
                                                  ",".join(self.addrs), "--cache-mb", str(CACHE_MB)])
                        for i in range(n)]
        for p in self.servers:
            self.ready(p)
        self.addr = self.addrs[0]

    def spawn(self, name, args):
        data = os.path.join(self.dir, name)
        logf = open(os.path.join(self.dir, name + ".log"), "w")
        p = subprocess.Popen([*pin(SERVER_CPU), BIN, *args, "--data-dir", data],
                             stdout=subprocess.PIPE, stderr=logf, text=True, env=LOG_ENV)
        p.name, p.log = name, logf.name
        with open(os.path.join(OUT, "pids"), "a") as f:
            f.write(f"{p.pid}\n")
        self.procs.append(p)
        return p

    def ready(self, p):
        line = p.stdout.readline()
        if "ready on" not in line or p.poll() is not None:
            sys.exit(f"bench-scale.sh: {p.name} did not start ({line.strip()!r}): see {p.log}")

    def stop(self):
        for p in self.servers + self.coordinators:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def cpu(self):
        return {"servers": sum(cpu_s(p.pid) for p in self.servers),
                "coordinators": [cpu_s(p.pid) for p in self.coordinators]}

    def pids(self):
        return [p.pid for p in self.procs]

    def cli(self, *args, stdin=None):
        t0 = time.time()
        res = subprocess.run([BIN, "--addr", ",".join(self.addrs), *args], input=stdin,
                             capture_output=True, text=True)
        if res.returncode != 0:
            sys.exit(f"bench-scale.sh: tessera {' '.join(args)} failed: {res.stderr.strip()}")
        return res.stdout, time.time() - t0

    def status(self):
        return json.loads(self.cli("status", "--json")[0])

    def settled(self, timeout=60):
        """Waits until every server is available and reports the configuration's epoch."""
        deadline = time.time() + timeout
        while True:
            st = self.status()
            heard = [s for s in st["servers"] if s["state"] == "available" and s["epoch"] == st["epoch"]]
            if len(st["servers"]) == self.n and len(heard) == self.n:
                return st
            if time.time() > deadline:
                sys.exit(f"bench-scale.sh: {self.n} servers did not settle: {json.dumps(st)[:500]}")
            time.sleep(0.25)

def threads(n):
    """Client tasks for n servers: as many requests in flight per server at every N."""
    return max(THREADS, THREADS_PER_SERVER * n)

def wait_quiet(own):
    """Other processes' cores (benchkit's, sampled over 1 s: QUIET_MAX_WAIT is a few seconds here)."""
    return round(benchkit.wait_quiet(own, sample_s=1.0, pause_s=0), 2)

def bench(cluster, args, label, idle_servers_per_s):
    """One `tessera bench` on CLIENT_CPU against the cluster: its report and what it cost."""
    quiet = wait_quiet(cluster.pids())
    cmd = [*pin(CLIENT_CPU), BIN, "bench", "--target", f"tessera://{cluster.addr}",
           "--progress", "never", "--threads", str(threads(cluster.n)), "--records", str(RECORDS)] + [str(a) for a in args]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    c0 = cluster.cpu(); b0 = machine_busy_s(); t0 = time.time()
    res = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0; c1 = cluster.cpu(); b1 = machine_busy_s()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        sys.exit(f"bench-scale.sh: {' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()[-2000:]}")
    report = json.loads(res.stdout)
    with open(os.path.join(cluster.dir, f"bench-{label}.json"), "w") as f:
        f.write(res.stdout)
    phase = report["run"] or report["load"]
    client_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    servers_s = c1["servers"] - c0["servers"]
    coord_s = sum(c1["coordinators"]) - sum(c0["coordinators"])
    ops = phase["operations"]
    # The servers' own idle cost (ticks, heartbeats) over the same wall time is not the ops'.
    net = max(0.0, servers_s - idle_servers_per_s * wall)
    out = {
        "ops_per_s": round(phase["overall_throughput"]),
        "operations": ops, "errors": phase["errors"], "elapsed_s": round(phase["elapsed_s"], 2),
        "latency_us": {op: {"p50": o["p50_us"], "p99": o["p99_us"]} for op, o in phase["ops"].items()},
        "server_cpu_s": round(servers_s, 3), "server_cores_busy": round(servers_s / wall, 2),
        "server_cpu_us_per_op": round(net * 1e6 / ops, 1) if ops else None,
        "client_cpu_us_per_op": round(client_s * 1e6 / ops, 1) if ops else None,
        "coordinator_cpu_s": round(coord_s, 3),
        "other_cores_before": quiet,
        "other_cores_during": round(max(0.0, (b1 - b0) - servers_s - client_s - coord_s) / wall, 2),
        "wall_s": round(wall, 2),
    }
    benchkit.stamp(out, quiet)
    if report.get("secondary"):
        out["secondary"] = {k: report["secondary"].get(k) for k in ("query", "agreement_samples", "mean_expected_matches")}
    log(f"  N={cluster.n} {label}: {out['ops_per_s']} ops/s, server {out['server_cpu_us_per_op']} µs/op "
        f"(cores {out['server_cores_busy']}), client {out['client_cpu_us_per_op']} µs/op, errors {out['errors']}")
    if out["errors"]:
        log(f"  WARNING: {out['errors']} errors in {label}")
    return out

STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z\s+\w+\s+(\S+): (.*)$")

def stamped(path, target, message):
    """(seconds since the Unix epoch, text) of each log line of `target` carrying `message`."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = STAMP.match(re.sub(r"\x1b\[[0-9;]*m", "", line.strip()))
            if m and m.group(3) == target and m.group(4).startswith(message):
                t = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) + float(m.group(2) or 0)
                out.append((t, m.group(4)))
    return out

def epoch_of(text):
    m = re.search(r"epoch=(\d+)\s*$", text)
    return int(m.group(1)) if m else None

def install_times(cluster, window):
    """Per configuration change applied within `window`: when the coordinators applied it and
    how long after each server installed it (or a later epoch)."""
    applied = {}
    for p in cluster.coordinators:
        for t, text in stamped(p.log, "tessera_coordinator::sm_store", "applied"):
            e = epoch_of(text)
            if e is not None and ("SpaceAdded" in text or "SpaceRemoved" in text) and window[0] <= t <= window[1]:
                applied[e] = min(applied.get(e, t), t)
    installs = [[(epoch_of(text), t) for t, text in stamped(p.log, "tessera_server::chain", "configuration installed")]
                for p in cluster.servers]
    changes = []
    for e in sorted(applied):
        lags = []
        for server in installs:
            t = min((t for (ee, t) in server if ee is not None and ee >= e), default=None)
            lags.append(None if t is None else round((t - applied[e]) * 1000, 2))
        known = [x for x in lags if x is not None]
        changes.append({"epoch": e, "servers_installed": len(known),
                        "all_installed_ms": max(known) if len(known) == len(lags) else None,
                        "median_server_ms": med(known), "first_server_ms": min(known) if known else None})
    return changes

def changes(cluster, idle_coord, idle_servers):
    """EPOCHS configuration changes, GAP_S apart (a small space added, then removed, ...):
    the commands' times, the window the coordinators applied them in, and CPU per change."""
    c0 = cluster.cpu(); w0 = time.time(); commands = []
    for i in range(EPOCHS):
        time.sleep(GAP_S)
        if i % 2 == 0:
            _, took = cluster.cli("add-space", stdin=PROBE)
            commands.append({"change": "add-space", "ms": round(took * 1000, 1)})
        else:
            _, took = cluster.cli("rm-space", "probe")
            commands.append({"change": "rm-space", "ms": round(took * 1000, 1)})
    time.sleep(GAP_S)
    w1 = time.time(); c1 = cluster.cpu()
    if EPOCHS % 2:
        cluster.cli("rm-space", "probe")
    coord = [(b - a) for a, b in zip(c0["coordinators"], c1["coordinators"])]
    per_epoch = [max(0.0, d - rate * (w1 - w0)) / max(EPOCHS, 1) for d, rate in zip(coord, idle_coord)]
    servers = max(0.0, (c1["servers"] - c0["servers"]) - idle_servers * (w1 - w0)) / max(EPOCHS, 1)
    return {"commands": commands, "window": [w0, w1],
            "coordinator_cpu_ms_per_epoch": [round(x * 1000, 2) for x in per_epoch],
            "servers_cpu_ms_per_epoch": round(servers * 1000, 2),
            "servers_cpu_ms_per_epoch_each": round(servers * 1000 / cluster.n, 3)}

def summarize_changes(cluster, e):
    """Reads the install times of the changes in `e`'s window from the logs."""
    e["changes"] = install_times(cluster, e.pop("window"))
    ch = e["changes"]
    e["all_installed_ms_median"] = med([c["all_installed_ms"] for c in ch if c["all_installed_ms"] is not None])
    e["first_server_ms_median"] = med([c["first_server_ms"] for c in ch if c["first_server_ms"] is not None])
    e["command_ms_median"] = med([c["ms"] for c in e["commands"]])

def run_cluster(n):
    log(f"N={n}: starting {COORDINATORS} coordinator(s) and {n} servers on CPU {SERVER_CPU}")
    t_start = time.time()
    cluster = Cluster(n)
    try:
        st = cluster.settled()
        started_s = time.time() - t_start
        r = {"servers": n, "coordinators": COORDINATORS, "replicas": REPLICAS, "start_s": round(started_s, 2),
             "client_threads": threads(n)}
        cpu_start = cluster.cpu()
        sizes = {"registered": st["configuration_bytes"]}
        log(f"  N={n}: up in {started_s:.1f} s, configuration {sizes['registered']} bytes")

        # Idle first, with nothing loaded: what N servers' heartbeats cost.
        time.sleep(1.0)
        c0 = cluster.cpu(); t0 = time.time()
        time.sleep(IDLE_S)
        c1 = cluster.cpu(); idle_wall = time.time() - t0
        idle_servers = (c1["servers"] - c0["servers"]) / idle_wall
        idle_coord = [(b - a) / idle_wall for a, b in zip(c0["coordinators"], c1["coordinators"])]
        leader = next((c["id"] for c in cluster.status()["coordinators"] if c.get("leader") == c.get("id")), None)
        r["idle"] = {"seconds": round(idle_wall, 1),
                     "coordinator_cpu_per_s": [round(x, 4) for x in idle_coord],
                     "coordinator_leader": leader,
                     "coordinator_cpu_us_per_server_heartbeat": round(max(idle_coord) * 1e6 / (4000 / LEASE_MS * n), 1),
                     "servers_cpu_per_s": round(idle_servers, 4),
                     "server_cpu_per_s_each": round(idle_servers / n, 5)}
        log(f"  N={n}: idle coordinator {max(idle_coord):.4f} CPU s/s, servers {idle_servers:.3f} CPU s/s in all")
        # Configuration changes on the empty cluster (the spaces below not loaded yet).
        r["epochs"] = {"empty": changes(cluster, idle_coord, idle_servers)}

        # Loads: inserts into `ycsb` (K replicas, 2 subspaces) and `people` (3).
        runs = {}
        runs["insert_ycsb"] = bench(cluster, ["-w", "b", "--phase", "load"], "load-ycsb", idle_servers)
        runs["insert_people"] = bench(cluster, ["-w", "secondary", "--phase", "load"], "load-people", idle_servers)
        sizes["loaded"] = cluster.settled()["configuration_bytes"]

        # The same changes again, with data on every server.
        r["epochs"]["loaded"] = changes(cluster, idle_coord, idle_servers)

        # Timed runs.
        for label, args in [("get", ["-w", "c"]), ("mix_95_5", ["-w", "b"]), ("mix_50_50", ["-w", "a"]),
                            ("search_eq1", ["-w", "secondary", "--query", "eq1"]),
                            ("search_eq2", ["-w", "secondary", "--query", "eq2"]),
                            ("search_range", ["-w", "secondary", "--query", "range"])]:
            runs[label] = bench(cluster, args + ["--phase", "run", "--operations", MANY_OPS,
                                                 "--duration-s", DURATION_S], label, idle_servers)
        r["runs"] = runs
        st = cluster.status()
        sizes["end"] = st["configuration_bytes"]
        r["configuration_bytes"] = sizes
        r["epoch_at_end"] = st["epoch"]
        cpu_end = cluster.cpu()
        r["coordinator_cpu_total_s"] = [round(b - a, 3) for a, b in zip(cpu_start["coordinators"], cpu_end["coordinators"])]
        r["wall_s"] = round(time.time() - t_start, 1)
    finally:
        cluster.stop()
    for when, e in r["epochs"].items():
        summarize_changes(cluster, e)
        log(f"  N={n} ({when}): an epoch installed on every server {e['all_installed_ms_median']} ms after the "
            f"coordinators applied it (median of {len(e['changes'])}); coordinator "
            f"{max(e['coordinator_cpu_ms_per_epoch'] or [0])} CPU ms per epoch")
    # A server the coordinators took offline (its heartbeats late on a crowded core) skews
    # everything after it: counted, so that a run can be judged.
    r["servers_taken_offline"] = sum(len(stamped(p.log, "tessera_coordinator::detector", "taking server"))
                                     for p in cluster.coordinators)
    if r["servers_taken_offline"]:
        log(f"  WARNING: N={n}: the coordinators took servers offline {r['servers_taken_offline']} times (leases lapsed)")
    shutil.rmtree(cluster.dir + "-data", ignore_errors=True)
    for p in cluster.procs:
        shutil.rmtree(os.path.join(cluster.dir, p.name), ignore_errors=True)
    return r

def plan_bench():
    log(f"planning benchmark over computed clusters of {PLAN_SERVERS} servers, CPU {CLIENT_CPU}")
    wait_quiet([])
    cmd = [*pin(CLIENT_CPU), BIN, "bench", "-w", "plan", "--plan-servers", PLAN_SERVERS,
           "--plan-replicas", str(REPLICAS), "--operations", str(PLAN_OPS), "--progress", "never"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"bench-scale.sh: {' '.join(cmd)} failed: {res.stderr.strip()}")
    return json.loads(res.stdout)["plan"]

CLASSES = ["get", "mix_95_5", "mix_50_50", "insert_ycsb", "insert_people", "search_eq1", "search_eq2", "search_range"]
HYPERDEX_OPS, HYPERDEX_NODES, HYPERDEX_CORES = 3.2e6, 32, 12  # seed 002 §6.3: 2 x 6-core Xeon X5650 a node

def projection(clusters):
    """Throughput of M = 32 and 64 servers from the server CPU an operation cost here.
    Model: each server process has one core like these and keeps it busy; an operation costs
    the cluster the server CPU it cost here, summed over every process it touched (a put: both
    replicas of every region on its chain; a search: every server asked), less the servers'
    idle CPU; load spreads evenly over the servers; so M servers serve M x 1e6 / cost
    operations a second. Clients are not the limit (the cores they need are given), nor the
    coordinators (not on the data path; their CPU for M servers' heartbeats is given), nor the
    network or the disks. Two bases: the costs measured with the fewest server processes
    sharing SERVER_CPU (the smallest N) and with the most (the largest N)."""
    out = {"model": " ".join(l.strip() for l in projection.__doc__.split("\n")), "bases": {}}
    largest = clusters[-1]
    us_per_heartbeat = largest["idle"]["coordinator_cpu_us_per_server_heartbeat"]
    for basis, c in (("fewest_processes", clusters[0]), ("most_processes", largest)):
        costs = {k: {"server_cpu_us_per_op": c["runs"][k]["server_cpu_us_per_op"],
                     "client_cpu_us_per_op": c["runs"][k]["client_cpu_us_per_op"]} for k in CLASSES}
        # YCSB A is half reads, half updates.
        upd = 2 * costs["mix_50_50"]["server_cpu_us_per_op"] - costs["get"]["server_cpu_us_per_op"]
        costs["update_derived"] = {"server_cpu_us_per_op": round(upd, 1), "client_cpu_us_per_op": None}
        rows = {}
        for m in (32, 64):
            row = {}
            for k, v in costs.items():
                cost = v["server_cpu_us_per_op"]
                tput = m * 1e6 / cost if cost and cost > 0 else None
                row[k] = {"ops_per_s": round(tput) if tput else None,
                          "client_cores": round(tput * v["client_cpu_us_per_op"] / 1e6, 1)
                          if tput and v["client_cpu_us_per_op"] else None}
            mix = row["mix_95_5"]["ops_per_s"]
            row["against_hyperdex"] = {
                "mix_95_5_over_3_2M": round(mix / HYPERDEX_OPS, 3) if mix else None,
                "per_core_mix_95_5": round(mix / m) if mix else None,
                "hyperdex_per_core": round(HYPERDEX_OPS / (HYPERDEX_NODES * HYPERDEX_CORES)),
                "hyperdex_per_node": round(HYPERDEX_OPS / HYPERDEX_NODES)}
            row["coordinator_cores_for_heartbeats"] = round(us_per_heartbeat * 4 * m / 1e6 * (1000 / LEASE_MS), 4)
            rows[str(m)] = row
        out["bases"][basis] = {"measured_with_servers": c["servers"], "costs": costs, "clusters": rows}
    return out

raw = {"config": {"servers": SERVERS, "coordinators": COORDINATORS, "replicas": REPLICAS, "records": RECORDS,
                  "duration_s": DURATION_S, "threads": THREADS, "threads_per_server": THREADS_PER_SERVER,
                  "lease_ms": LEASE_MS, "epochs": EPOCHS, "gap_s": GAP_S, "idle_s": IDLE_S,
                  "cache_mb": CACHE_MB, "server_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU,
                  "plan_servers": PLAN_SERVERS, "plan_ops": PLAN_OPS, "nproc": os.cpu_count(),
                  "git": git("describe", "--always", "--dirty"), "commit": git("rev-parse", "HEAD"), "bin": BIN,
                  "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
                  "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
       "clusters": []}
for n in SERVERS:
    raw["clusters"].append(run_cluster(n))
    with open(os.path.join(OUT, "raw.json"), "w") as f:
        json.dump(raw, f, indent=1)
raw["plan"] = plan_bench()
raw["projection"] = projection(raw["clusters"])
raw["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
with open(os.path.join(OUT, "raw.json"), "w") as f:
    json.dump(raw, f, indent=1)

# --- the tables of docs/scale.md, into $OUT/tables.md ------------------------------------------
def table(title, header, rows):
    return [f"\n{title}\n", "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"] + \
        ["| " + " | ".join("—" if c is None else str(c) for c in r) + " |" for r in rows]

def n0(x):
    return "—" if x is None else f"{x:,.0f}".replace(",", " ")

def r1(x):
    return None if x is None else round(x, 1)

md = [f"bench-scale.sh at {raw['config']['git']}, {raw['config']['started']} .. {raw['finished']}"]
cl = raw["clusters"]
md += table("Configuration (bytes, `tessera status --json`)", ["servers", "registered", "with ycsb and people", "at the end"],
            [[c["servers"], c["configuration_bytes"]["registered"], c["configuration_bytes"]["loaded"], c["configuration_bytes"]["end"]] for c in cl])
md += table("Computed configurations (`tessera bench -w plan`)", ["servers", "bytes", "regions", "tessellations µs"],
            [[c["servers"], c["configuration_bytes"], c["regions"], round(c["tessellations_us"], 2)] for c in raw["plan"]["clusters"]])
rows = []
for c in cl:
    for when in ("empty", "loaded"):
        e = c["epochs"][when]
        rows.append([c["servers"], when, r1(e["all_installed_ms_median"]), r1(e["first_server_ms_median"]),
                     ", ".join(n0(ch["all_installed_ms"]) for ch in e["changes"]), r1(e["command_ms_median"]),
                     e["servers_cpu_ms_per_epoch_each"], max(e["coordinator_cpu_ms_per_epoch"] or [0])])
md += table("Installing an epoch (ms after the coordinators applied it; medians of the changes)",
            ["servers", "cluster", "every server", "first server", "each change: every server", "command", "server CPU ms each", "coordinator CPU ms"], rows)
md += table("Coordinator", ["servers", "idle CPU s/s", "µs per heartbeat", "servers idle CPU s/s (all)", "CPU s over the run", "run s", "servers taken offline"],
            [[c["servers"], max(c["idle"]["coordinator_cpu_per_s"]), c["idle"]["coordinator_cpu_us_per_server_heartbeat"],
              c["idle"]["servers_cpu_per_s"], max(c["coordinator_cpu_total_s"]), c["wall_s"], c["servers_taken_offline"]] for c in cl])
rows = []
for k in CLASSES:
    rows.append([k] + [f"{n0(c['runs'][k]['ops_per_s'])} / {c['runs'][k]['server_cpu_us_per_op']} / {c['runs'][k]['client_cpu_us_per_op']}" for c in cl])
md += table("Per operation: ops/s on this machine / server CPU µs / client CPU µs", ["operation"] + [f"{c['servers']} servers ({c['client_threads']} tasks)" for c in cl], rows)
rows = []
for pc in raw["plan"]["clusters"]:
    for sr in pc["searches"]:
        rows.append([pc["servers"], sr["class"], sr["fanout"], sr["regions"], round(sr["servers_mean"], 1), round(sr["ns_per_plan"])])
md += table("Planning a search (ns per plan, one core)", ["servers", "class", "fan-out", "regions", "servers asked", "ns"], rows)
rows = []
for basis, b in raw["projection"]["bases"].items():
    for m, row in b["clusters"].items():
        rows.append([m, f"{basis} ({b['measured_with_servers']})", n0(row["get"]["ops_per_s"]), n0(row["mix_95_5"]["ops_per_s"]),
                     n0(row["update_derived"]["ops_per_s"]), n0(row["insert_ycsb"]["ops_per_s"]), n0(row["search_eq1"]["ops_per_s"]),
                     n0(row["search_range"]["ops_per_s"]), row["against_hyperdex"]["mix_95_5_over_3_2M"],
                     row["mix_95_5"]["client_cores"], row["coordinator_cores_for_heartbeats"]])
md += table("Projection (ops/s; not a measurement)", ["servers", "costs from", "get", "95/5 mix", "update", "insert", "eq1", "range",
                                                     "95/5 over HyperDex's 3.2 M", "client cores for the mix", "coordinator cores"], rows)
with open(os.path.join(OUT, "tables.md"), "w") as f:
    f.write("\n".join(md) + "\n")
log(f"tables in {os.path.join(OUT, 'tables.md')}")
print(json.dumps(raw, indent=1))
PY
