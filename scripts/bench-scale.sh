#!/usr/bin/env bash
# What grows with the server count (docs/scale.md; issue "Faster than the stores users would
# pick instead", item 6). Builds the release binary, then for each N of SERVERS starts real
# processes on 127.0.0.1 -- COORDINATORS `tessera coordinator` and N `tessera server` (every
# one on SERVER_CPU) -- and measures, with small data:
#
#  (a) the configuration's size in bytes (`tessera status --json`'s configuration_bytes):
#      servers registered, then with the YCSB and `people` spaces loaded;
#  (b) the time to install an epoch: EPOCHS changes (add-space, then rm-space, of a small
#      space `probe`, GAP_S apart), from the moment the coordinators applied each (their
#      `applied ... epoch=E` log line, the earliest of them) until each server installed it
#      (its `configuration installed epoch=E'` line, E' >= E), read from the processes' logs
#      (one clock: they all run here); and the `tessera add-space` / `rm-space` command's own
#      time (it is answered once every server's heartbeat reports the epoch);
#  (c) the client's planning time per search: `tessera bench -w plan` on CLIENT_CPU with no
#      cluster running, over configurations of PLAN_SERVERS servers that the coordinators'
#      state machine computes (one region, a few, all; both fan-outs);
#  (d) the coordinators' CPU seconds (/proc/PID/stat): idle per second over IDLE_S seconds
#      (heartbeats of N servers, 4 a second each), per epoch over the changes (less the idle
#      rate), and over the whole run;
#  (e) per-operation server CPU (every server process's user + system time, less their idle
#      rate, per operation) and throughput of gets (YCSB C), the 95/5 read/update mix of
#      HyperDex's scaling run (YCSB B), YCSB A (so updates: 2 A - C), inserts (the loads), and
#      searches (`secondary` eq1, eq2, range), the client pinned to CLIENT_CPU; from those
#      costs, a projection for clusters of 32 and 64 servers (the model is printed with it).
#
# One JSON object on stdout; progress on stderr; logs, data and raw reports in $OUT.
#
# Knobs (environment):
#   SERVERS="8 16 32"   server counts          COORDINATORS=1 (1, 3 or 5)   REPLICAS=2 (K)
#   RECORDS=10000       records of each load (YCSB's ~1 KB objects, `people`'s ~100 B)
#   DURATION_S=5        seconds of each timed run        THREADS=16 closed-loop client tasks
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
# Needs: cargo, python3, taskset. Only 127.0.0.1 is used. Every process started is stopped on
# exit, failure or Ctrl-C (by the PIDs the driver recorded, and only while they still run
# this binary).
set -euo pipefail

cd "$(dirname "$0")/.."
for tool in python3 taskset; do
    command -v "$tool" >/dev/null || { echo "bench-scale.sh: $tool not found" >&2; exit 2; }
done

if [ -z "${BIN:-}" ]; then
    command -v cargo >/dev/null || { echo "bench-scale.sh: cargo not found" >&2; exit 2; }
    echo "bench-scale.sh: cargo build --release --locked -p tessera" >&2
    nice -n 19 cargo build --release --locked -p tessera >&2
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
import calendar, json, os, re, resource, shutil, signal, socket, statistics, subprocess, sys, time

BIN, OUT = os.environ["BIN"], os.environ["OUT"]
env = os.environ.get
SERVERS = [int(n) for n in env("SERVERS", "8 16 32").split()]
COORDINATORS = int(env("COORDINATORS", 1))
REPLICAS = int(env("REPLICAS", 2))
RECORDS = int(env("RECORDS", 10_000))
DURATION_S = float(env("DURATION_S", 5))
THREADS = int(env("THREADS", 16))
EPOCHS = int(env("EPOCHS", 6))
GAP_S = float(env("GAP_S", 1.0))
IDLE_S = float(env("IDLE_S", 10))
CACHE_MB = int(env("CACHE_MB", 8))
SERVER_CPU = env("SERVER_CPU", "0")
CLIENT_CPU = env("CLIENT_CPU", "1")
PLAN_SERVERS = env("PLAN_SERVERS", "8,16,32,64,128")
PLAN_OPS = int(env("PLAN_OPS", 200_000))
QUIET_CORES = float(env("QUIET_CORES", 0.5))
QUIET_MAX_WAIT = float(env("QUIET_MAX_WAIT", 5))
MANY_OPS = 1_000_000_000  # timed runs end by --duration-s
CLK = os.sysconf("SC_CLK_TCK")
PROBE = "space probe key id attributes int a subspace a create 16 partitions"
if COORDINATORS not in (1, 3, 5):
    sys.exit("bench-scale.sh: COORDINATORS must be 1, 3 or 5")
if min(SERVERS) < REPLICAS:
    sys.exit(f"bench-scale.sh: every count of SERVERS must be at least REPLICAS ({REPLICAS})")
# The processes' logs say when each configuration was applied and installed.
LOG_ENV = dict(os.environ, NO_COLOR="1",
               RUST_LOG="warn,openraft=error,tessera_server::chain=info,tessera_coordinator::sm_store=debug")

def log(*a):
    print("bench-scale.sh:", *a, file=sys.stderr, flush=True)

def on_signal(signum, _frame):
    raise SystemExit(128 + signum)
signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port

def cpu_s(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK
    except (OSError, IndexError, ValueError):
        return 0.0

def machine_busy_s():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / CLK

def git(*a):
    return subprocess.run(["git", *a], capture_output=True, text=True).stdout.strip()

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
                                         "--peers", peers, "--default-tolerate", str(REPLICAS - 1)])
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
        p = subprocess.Popen(["taskset", "-c", SERVER_CPU, BIN, *args, "--data-dir", data],
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

def wait_quiet(own):
    """Other processes' cores, waiting (at most QUIET_MAX_WAIT) until below QUIET_CORES."""
    start = time.time()
    while True:
        b0 = machine_busy_s(); o0 = sum(cpu_s(p) for p in own); t0 = time.time()
        time.sleep(1.0)
        other = max(0.0, (machine_busy_s() - b0) - (sum(cpu_s(p) for p in own) - o0)) / (time.time() - t0)
        if other < QUIET_CORES or time.time() - start > QUIET_MAX_WAIT:
            return round(other, 2)
        log(f"machine busy ({other:.2f} other cores); waiting")

def bench(cluster, args, label, idle_servers_per_s):
    """One `tessera bench` on CLIENT_CPU against the cluster: its report and what it cost."""
    quiet = wait_quiet(cluster.pids())
    cmd = ["taskset", "-c", CLIENT_CPU, BIN, "bench", "--target", f"tessera://{cluster.addr}",
           "--progress", "never", "--threads", str(THREADS), "--records", str(RECORDS)] + [str(a) for a in args]
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

def run_cluster(n):
    log(f"N={n}: starting {COORDINATORS} coordinator(s) and {n} servers on CPU {SERVER_CPU}")
    t_start = time.time()
    cluster = Cluster(n)
    try:
        st = cluster.settled()
        started_s = time.time() - t_start
        r = {"servers": n, "coordinators": COORDINATORS, "replicas": REPLICAS, "start_s": round(started_s, 2)}
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
                     "coordinator_cpu_us_per_server_heartbeat": round(max(idle_coord) * 1e6 / (4 * n), 1),
                     "servers_cpu_per_s": round(idle_servers, 4),
                     "server_cpu_per_s_each": round(idle_servers / n, 5)}
        log(f"  N={n}: idle coordinator {max(idle_coord):.4f} CPU s/s, servers {idle_servers:.3f} CPU s/s in all")

        # Loads: inserts into `ycsb` (K replicas, 2 subspaces) and `people` (3).
        runs = {}
        runs["insert_ycsb"] = bench(cluster, ["-w", "b", "--phase", "load"], "load-ycsb", idle_servers)
        runs["insert_people"] = bench(cluster, ["-w", "secondary", "--phase", "load"], "load-people", idle_servers)
        sizes["loaded"] = cluster.settled()["configuration_bytes"]

        # Configuration changes: a small space added, then removed, EPOCHS times in all.
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
        coord_changes = [(b - a) for a, b in zip(c0["coordinators"], c1["coordinators"])]
        per_epoch = [max(0.0, d - rate * (w1 - w0)) / max(EPOCHS, 1) for d, rate in zip(coord_changes, idle_coord)]
        servers_per_epoch = max(0.0, (c1["servers"] - c0["servers"]) - idle_servers * (w1 - w0)) / max(EPOCHS, 1)
        r["epochs"] = {"commands": commands, "window": [w0, w1],
                       "coordinator_cpu_ms_per_epoch": [round(x * 1000, 2) for x in per_epoch],
                       "servers_cpu_ms_per_epoch": round(servers_per_epoch * 1000, 2),
                       "servers_cpu_ms_per_epoch_each": round(servers_per_epoch * 1000 / n, 3)}
        if EPOCHS % 2:
            cluster.cli("rm-space", "probe")

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
    r["epochs"]["changes"] = install_times(cluster, r["epochs"].pop("window"))
    ch = r["epochs"]["changes"]
    r["epochs"]["all_installed_ms_median"] = med([c["all_installed_ms"] for c in ch if c["all_installed_ms"] is not None])
    r["epochs"]["median_server_ms_median"] = med([c["median_server_ms"] for c in ch if c["median_server_ms"] is not None])
    r["epochs"]["command_ms_median"] = med([c["ms"] for c in r["epochs"]["commands"]])
    log(f"  N={n}: epoch installed everywhere {r['epochs']['all_installed_ms_median']} ms after it was applied "
        f"(median of {len(ch)}); coordinator {max(r['epochs']['coordinator_cpu_ms_per_epoch'] or [0])} CPU ms per epoch")
    shutil.rmtree(cluster.dir + "-data", ignore_errors=True)
    for p in cluster.procs:
        shutil.rmtree(os.path.join(cluster.dir, p.name), ignore_errors=True)
    return r

def plan_bench():
    log(f"planning benchmark over computed clusters of {PLAN_SERVERS} servers, CPU {CLIENT_CPU}")
    wait_quiet([])
    cmd = ["taskset", "-c", CLIENT_CPU, BIN, "bench", "-w", "plan", "--plan-servers", PLAN_SERVERS,
           "--plan-replicas", str(REPLICAS), "--operations", str(PLAN_OPS), "--progress", "never"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"bench-scale.sh: {' '.join(cmd)} failed: {res.stderr.strip()}")
    return json.loads(res.stdout)["plan"]

def fit(xs, ys):
    """Least squares y = a + b x: (a, b)."""
    n = len(xs)
    if n < 2 or len(set(xs)) < 2:
        return (ys[0] if ys else 0.0), 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b

def projection(clusters, plan):
    """Throughput of clusters of 32 and 64 servers from the per-operation server CPU measured:
    each server process has one core like those here and saturates it; an operation costs the
    cluster the server CPU it cost here (all replicas and chain hops included); a cost is taken
    at N = 32 when measured there, else from a least-squares line over the N measured."""
    ns = [c["servers"] for c in clusters]
    classes = ["get", "mix_95_5", "mix_50_50", "insert_ycsb", "insert_people", "search_eq1", "search_eq2", "search_range"]
    cost = {k: [c["runs"][k]["server_cpu_us_per_op"] for c in clusters] for k in classes}
    client = {k: [c["runs"][k]["client_cpu_us_per_op"] for c in clusters] for k in classes}
    out = {"model": projection.__doc__.split("\n")[0] + " " + " ".join(l.strip() for l in projection.__doc__.split("\n")[1:]),
           "measured_at": ns, "clusters": {}}
    for m in (32, 64):
        row = {}
        for k in classes:
            if m in ns:
                c = cost[k][ns.index(m)]; cl = client[k][ns.index(m)]; how = "measured"
            else:
                a, b = fit(ns, cost[k]); c = max(a + b * m, min(cost[k]))
                a2, b2 = fit(ns, client[k]); cl = max(a2 + b2 * m, min(client[k]))
                how = "extrapolated"
            tput = m * 1e6 / c if c else None
            row[k] = {"server_cpu_us_per_op": round(c, 1), "cost": how,
                      "ops_per_s": round(tput) if tput else None,
                      "client_cores_needed": round(tput * cl / 1e6, 1) if tput else None}
        # An update from A and C: A is half reads, half updates.
        upd = 2 * row["mix_50_50"]["server_cpu_us_per_op"] - row["get"]["server_cpu_us_per_op"]
        row["update_derived"] = {"server_cpu_us_per_op": round(upd, 1), "ops_per_s": round(m * 1e6 / upd) if upd > 0 else None}
        mix = 0.95 * row["get"]["server_cpu_us_per_op"] + 0.05 * upd
        row["mix_95_5_from_parts"] = {"server_cpu_us_per_op": round(mix, 1), "ops_per_s": round(m * 1e6 / mix)}
        row["hyperdex_3_2M_on_32"] = {"ratio_of_mix_95_5": round(row["mix_95_5"]["ops_per_s"] / 3.2e6, 3) if row["mix_95_5"]["ops_per_s"] else None}
        out["clusters"][str(m)] = row
    return out

raw = {"config": {"servers": SERVERS, "coordinators": COORDINATORS, "replicas": REPLICAS, "records": RECORDS,
                  "duration_s": DURATION_S, "threads": THREADS, "epochs": EPOCHS, "gap_s": GAP_S, "idle_s": IDLE_S,
                  "cache_mb": CACHE_MB, "server_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU,
                  "plan_servers": PLAN_SERVERS, "plan_ops": PLAN_OPS, "nproc": os.cpu_count(),
                  "git": git("describe", "--always", "--dirty"), "commit": git("rev-parse", "HEAD"),
                  "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
                  "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
       "clusters": []}
for n in SERVERS:
    raw["clusters"].append(run_cluster(n))
    with open(os.path.join(OUT, "raw.json"), "w") as f:
        json.dump(raw, f, indent=1)
raw["plan"] = plan_bench()
raw["projection"] = projection(raw["clusters"], raw["plan"])
raw["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
with open(os.path.join(OUT, "raw.json"), "w") as f:
    json.dump(raw, f, indent=1)
print(json.dumps(raw, indent=1))
PY
