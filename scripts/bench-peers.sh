#!/usr/bin/env bash
# Tessera against the stores users would pick instead (issue 12: "Faster than the stores users
# would pick instead"), on this machine, with one driver (`tessera bench`) for every system:
# the same generators, concurrency and JSON report: PostgreSQL 15, Redis 7, etcd 3.4 (Debian's)
# and Apache Cassandra 5.0 (jars from Maven Central), beside Tessera.
#
# Builds the release binary; starts each system itself, pinned to SERVER_CPU (the client to
# CLIENT_CPU), every one acknowledging a write only once it is on disk: a fresh `tessera dev`
# (fsync on every commit, its default); a PostgreSQL cluster of its own (initdb into a temporary
# directory; fsync and synchronous_commit on, its defaults); redis-server with `appendfsync
# always` (and, as `redis-everysec`, with `appendfsync everysec`: the issue's baseline for YCSB
# E, which acknowledges before the disk); an etcd member (its WAL fsynced before an answer, its default); a Cassandra node
# (scripts/cassandra.sh: `commitlog_sync: batch`, 1 GiB heap; the first run downloads its jars
# into ~/.cache/tessera-bench). Then, for each part and each system that can express it:
#
#  * secondary (Tessera, PostgreSQL, Cassandra): loads RECORDS people (`tessera bench -w
#    secondary`: city ~100 people a city, age, score, name; Tessera subspaces `city` and `age,
#    score`, or `city`, `age` and `score` with PEOPLE_SUBSPACES=per-index, and the queries
#    timed once its re-cut driver has cut the int axes by the data; PostgreSQL B-tree indexes on city, age and score with ANALYZE after the load,
#    Cassandra storage-attached indexes on the same three), then times each query kind (eq1:
#    city = C, ~100 matches; eq2: city and age, ~1; range: score over 0.1 %) for DURATION_S,
#    RUNS times. Redis and etcd have no search on values: they sit this part out;
#  * ycsb (every system): loads RECORDS YCSB records, then times workloads YCSB (a, c and e by
#    default; any of a-f).
#
# Every secondary run checks a sample of its queries against what the load wrote before it is
# timed; the YCSB load is checked by 32 scans of e right after it (a timed run of e, after
# earlier runs inserted records, is not: what the system holds is no longer known exactly).
# Prints a JSON summary on stdout: per part, query and system the medians of throughput, p50
# and p99, the server's and the client's CPU per operation (and the server's per object returned,
# for searches), the cores each kept busy (CPU over wall time, the client's setup included), with
# Tessera's ratio to each other system (`tessera_over_SYSTEM`). Raw reports go to
# $OUT/raw.json; progress to stderr.
#
# Usage: scripts/bench-peers.sh [secondary] [ycsb]       (default: both)
# Knobs (environment): RECORDS=100000 DURATION_S=10 RUNS=3 THREADS=16 SERVER_CPU=1
#   CLIENT_CPU=0 PEOPLE_SUBSPACES=grid SYSTEMS="tessera postgres redis redis-everysec etcd cassandra" YCSB="a c e"
#   QUIET_CORES=0.3 QUIET_MAX_WAIT=300 (wait for a quiet machine before each timed run) OUT=$(mktemp -d)
#   TESSERA_BIN (a built `tessera` to use instead of building one; CARGO_TARGET_DIR is honoured)
# Needs: cargo, python3, taskset if available, and for the systems asked: PostgreSQL 15's initdb/pg_ctl/
# postgres (Debian: apt-get install postgresql), redis-server, etcd (etcd-server), java 17 and
# mvn (openjdk-17-jre-headless, maven). Run as root, PostgreSQL runs as user postgres. Only
# 127.0.0.1 is used.
set -euo pipefail

cd "$(dirname "$0")/.."
for tool in python3; do
    command -v "$tool" >/dev/null || { echo "bench-peers.sh: $tool not found" >&2; exit 2; }
done

BIN="$(python3 scripts/benchkit.py bin bench-peers.sh)" || exit 1
export BIN
export OUT="${OUT:-$(mktemp -d /tmp/tessera-bench-peers.XXXXXX)}"
mkdir -p "$OUT"
echo "bench-peers.sh: working directory $OUT" >&2

exec python3 - "$@" <<'PY'
import json, os, resource, signal, statistics, subprocess, sys, time

sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import benchkit
from benchkit import Cassandra, Etcd, Postgres, Redis, Tessera, cpu_s, log, med, pin, ratio, wait_quiet

BIN, OUT = os.environ["BIN"], os.environ["OUT"]
RECORDS = int(os.environ.get("RECORDS", 100_000))
DURATION_S = float(os.environ.get("DURATION_S", 10))
RUNS = int(os.environ.get("RUNS", 3))
THREADS = int(os.environ.get("THREADS", 16))
PEOPLE_SUBSPACES = os.environ.get("PEOPLE_SUBSPACES", "grid")
SERVER_CPU, CLIENT_CPU = benchkit.cpus("1", "0")
ALL_SYSTEMS = ["tessera", "postgres", "redis", "redis-everysec", "etcd", "cassandra"]
SYSTEMS = os.environ.get("SYSTEMS", " ".join(ALL_SYSTEMS)).split()
benchkit.configure("bench-peers.sh", OUT, BIN, SERVER_CPU, float(os.environ.get("QUIET_CORES", 0.3)),
                   float(os.environ.get("QUIET_MAX_WAIT", 300)), CLIENT_CPU)
PARTS = {"secondary": ["eq1", "eq2", "range"], "ycsb": os.environ.get("YCSB", "a c e").split()}
# The systems that can express each part: Redis and etcd have no search on values.
CAN = {"secondary": {"tessera", "postgres", "cassandra"}, "ycsb": set(ALL_SYSTEMS)}
parts = sys.argv[1:] or list(PARTS)
for p in parts:
    if p not in PARTS:
        sys.exit(f"bench-peers.sh: unknown part {p!r} ({', '.join(PARTS)})")
for s in SYSTEMS:
    if s not in ALL_SYSTEMS:
        sys.exit(f"bench-peers.sh: unknown system {s!r} ({', '.join(ALL_SYSTEMS)})")
for w in PARTS["ycsb"]:
    if w not in "abcdef" or len(w) != 1:
        sys.exit(f"bench-peers.sh: YCSB={w!r}: a YCSB workload is one of a-f")

def _raise(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")
signal.signal(signal.SIGTERM, _raise)
signal.signal(signal.SIGHUP, _raise)

def bench(url, pid, args):
    """One `tessera bench` run on CLIENT_CPU; its report, with the server's CPU seconds."""
    cmd = [*pin(CLIENT_CPU), BIN, "bench", "--target", url, "--threads", str(THREADS),
           "--records", str(RECORDS), "--progress", "never", *args]
    s0, t0 = cpu_s(pid), time.time()
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run(cmd, capture_output=True, text=True)
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        # A disagreement with the load (or any failure) stops everything, loudly.
        raise SystemExit(f"bench-peers.sh: {' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()}")
    report = json.loads(res.stdout)
    client_cpu_s = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    report["env"] = {"server_cpu_s": round(cpu_s(pid) - s0, 2), "wall_s": round(time.time() - t0, 1),
                     "client_cpu_s": round(client_cpu_s, 2)}
    return report

def start(system, part):
    """The system, started fresh for one part."""
    if system == "postgres":
        srv = Postgres()
        srv.start()
        return srv
    if system == "redis-everysec":
        return Redis(f"{system}-{part}", appendfsync="everysec")
    return {"tessera": Tessera, "redis": Redis, "etcd": Etcd,
            "cassandra": Cassandra}[system](f"{system}-{part}")

def load(system, url, pid, part):
    if part == "secondary":
        args = ["-w", "secondary", "--query", "eq1", "--phase", "load",
                "--people-subspaces", PEOPLE_SUBSPACES]
    else:
        # A load and run of e checks 32 scans against what the load wrote (only a run right
        # after its own load knows what the system holds); its one timed operation is noise.
        args = ["-w", "e", "--phase", "both", "--operations", "1"]
    rep = bench(url, pid, args)
    log(f"  {system} {part}: loaded {RECORDS} at {rep['load']['overall_throughput']:.0f}/s")
    return rep

def timed(system, url, pid, part, kind, run):
    quiet = wait_quiet(pid)
    args = (["-w", "secondary", "--query", kind] if part == "secondary" else ["-w", kind])
    rep = bench(url, pid, args + ["--phase", "run", "--operations", "1000000000",
                                  "--duration-s", str(DURATION_S), "--seed", str(run + 1)])
    benchkit.stamp(rep, quiet)
    r = rep["run"]
    log(f"  {system} {part} {kind}: {r['overall_throughput']:.0f} ops/s, errors {r['errors']}")
    return rep

raw = {"config": {"records": RECORDS, "duration_s": DURATION_S, "runs": RUNS, "threads": THREADS,
                  "server_cpu": SERVER_CPU, "people_subspaces": PEOPLE_SUBSPACES, "client_cpu": CLIENT_CPU, "systems": SYSTEMS,
                  "nproc": os.cpu_count(),
                  "git": benchkit.git("describe", "--always", "--dirty"), "bin": BIN,
                  "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
       "runs": {}}

def save_raw():
    with open(os.path.join(OUT, "raw.json"), "w") as f:
        json.dump(raw, f, indent=1)

for part in parts:
    for system in SYSTEMS:
        if system not in CAN[part]:
            log(f"  {system} {part}: skipped ({system} has no search on values)")
            continue
        srv = None
        try:
            srv = start(system, part)
            url, pid = srv.url, srv.pid
            if system != "tessera":
                raw["config"][system] = srv.version()
            raw["runs"].setdefault(part, {}).setdefault(system, {})["load"] = load(system, url, pid, part)
            if system == "postgres":
                subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(srv.port), "-U", "postgres", "-d",
                                "postgres", "-q", "-c", "ANALYZE"], capture_output=True)
                srv.checkpoint()
            for kind in PARTS[part]:
                for run in range(RUNS):
                    rep = timed(system, url, pid, part, kind, run)
                    raw["runs"][part][system].setdefault(kind, []).append(rep)
                    save_raw()
        finally:
            if srv is not None:
                srv.stop()
raw["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
save_raw()

summary = {"config": raw["config"]}
for part, by_system in raw["runs"].items():
    out = {}
    for system, reps in by_system.items():
        s = {"load_per_s": round(reps["load"]["load"]["overall_throughput"])}
        for kind in PARTS[part]:
            runs = reps[kind]
            ops = [r["run"]["operations"] for r in runs]
            k = {"per_s": med([r["run"]["overall_throughput"] for r in runs]),
                 "runs": [round(r["run"]["overall_throughput"]) for r in runs],
                 "server_cpu_us_per_op": med([r["env"]["server_cpu_s"] * 1e6 / max(o, 1) for r, o in zip(runs, ops)]),
                 "client_cpu_us_per_op": med([r["env"]["client_cpu_s"] * 1e6 / max(o, 1) for r, o in zip(runs, ops)]),
                 # Cores busy while timed (the run's CPU over its wall time, setup included).
                 "server_cores": round(statistics.median(r["env"]["server_cpu_s"] / r["env"]["wall_s"] for r in runs), 2),
                 "client_cores": round(statistics.median(r["env"]["client_cpu_s"] / r["env"]["wall_s"] for r in runs), 2)}
            main = "search" if part == "secondary" else ("scan" if kind == "e" else "read")
            op = [r["run"]["ops"][main] for r in runs]
            k["p50_us"] = med([o["p50_us"] for o in op])
            k["p99_us"] = med([o["p99_us"] for o in op])
            returned = [o.get("records_returned") or o.get("records_scanned") for o in op]
            if all(returned):
                k["objects_per_op"] = round(sum(returned) / sum(o["count"] for o in op), 1)
                k["server_cpu_us_per_object"] = round(k["server_cpu_us_per_op"] / max(k["objects_per_op"], 1e-9), 2)
            s[kind] = k
        out[system] = s
    for peer in [s for s in ALL_SYSTEMS if s != "tessera"]:
        if "tessera" in out and peer in out:
            out[f"tessera_over_{peer}"] = {kind: ratio(out["tessera"][kind]["per_s"], out[peer][kind]["per_s"])
                                           for kind in PARTS[part]}
    summary[part] = out
summary["raw"] = os.path.join(OUT, "raw.json")
print(json.dumps(summary, indent=1))
PY
