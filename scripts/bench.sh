#!/usr/bin/env bash
# Reproduces docs/benchmarks.md end to end: builds the release binary, then for each benchmark
# starts its own servers on free loopback ports with fresh data directories, pins the server to
# one CPU and the `tessera bench` client to another, runs, stops the servers, and prints a JSON
# summary (medians of RUNS runs, ratios, targets met or missed) on stdout. Progress goes to
# stderr; every run's raw `tessera bench` JSON is kept in $OUT/raw.json (outside the repository).
#
# Usage: scripts/bench.sh [ycsb] [search] [memory]      (default: all three)
#
# Knobs (environment):
#   RECORDS=100000      records loaded for YCSB and the small search/memory runs
#   BIG_RECORDS=1000000 records of the large search/memory runs
#   OPS=500000          run-phase operations of workloads a, b, c, s
#   E_OPS=100000        run-phase operations of workload e (each scan reads ~50 records)
#   THREADS=16          closed-loop clients (--threads), the same for every system
#   RUNS=3              runs per configuration; the summary quotes medians
#   SERVER_CPU=0 CLIENT_CPU=1   taskset CPU lists of the server and of the bench client
#   CACHE_MB=64         tessera --cache-mb for the search/memory runs
#   QUIET_CORES=0.3     before each measured phase, wait until other processes use less than
#   QUIET_MAX_WAIT=600    this many cores (sampled over 2 s), at most this many seconds
#   OUT=$(mktemp -d)    where data directories, logs and raw.json go
#   TESSERA_BIN=path    use this binary instead of building one
#
# Needs: cargo, python3, redis-server (Debian: apt-get install redis-server); taskset if available.
# Only 127.0.0.1 is ever used.
set -euo pipefail

cd "$(dirname "$0")/.."
for tool in python3 redis-server; do
    command -v "$tool" >/dev/null || { echo "bench.sh: $tool not found" >&2; exit 2; }
done

BIN="$(python3 scripts/benchkit.py bin bench.sh)" || exit 1
export BIN
export OUT="${OUT:-$(mktemp -d /tmp/tessera-bench.XXXXXX)}"
mkdir -p "$OUT"
echo "bench.sh: working directory $OUT" >&2

exec python3 - "$@" <<'PY'
import json, os, resource, statistics, subprocess, sys, time

sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import benchkit
from benchkit import Redis, Tessera, cpu_s, log, machine_busy_jiffies, pin, wait_quiet

BIN = os.environ["BIN"]
OUT = os.environ["OUT"]
RECORDS = int(os.environ.get("RECORDS", 100_000))
BIG_RECORDS = int(os.environ.get("BIG_RECORDS", 1_000_000))
OPS = int(os.environ.get("OPS", 500_000))
E_OPS = int(os.environ.get("E_OPS", 100_000))
THREADS = int(os.environ.get("THREADS", 16))
RUNS = int(os.environ.get("RUNS", 3))
SERVER_CPU, CLIENT_CPU = benchkit.cpus("0", "1")
CACHE_MB = int(os.environ.get("CACHE_MB", 64))
QUIET_CORES = float(os.environ.get("QUIET_CORES", 0.3))
QUIET_MAX_WAIT = float(os.environ.get("QUIET_MAX_WAIT", 600))
CLK = benchkit.CLK
benchkit.configure("bench.sh", OUT, BIN, SERVER_CPU, QUIET_CORES, QUIET_MAX_WAIT, CLIENT_CPU)
parts = sys.argv[1:] or ["ycsb", "search", "memory"]
for p in parts:
    if p not in ("ycsb", "search", "memory"):
        sys.exit(f"bench.sh: unknown part {p!r} (ycsb, search, memory)")

def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS"):
                out[k] = int(v.split()[0]) * 1024
    return out

def start_tessera(name, cache_mb=None):
    return Tessera(name, [] if cache_mb is None else ["--cache-mb", str(cache_mb)])

def start_redis(name, appendfsync):
    return Redis(name, appendfsync)

def bench(server, workload, phase, records, ops):
    """Runs one `tessera bench` phase pinned to CLIENT_CPU; returns its report plus what else ran."""
    quiet = wait_quiet(server.pid, pause_s=8)
    cmd = [*pin(CLIENT_CPU), BIN, "bench", "--target", server.url, "-w", workload,
           "--phase", phase, "--records", str(records), "--operations", str(ops),
           "--threads", str(THREADS), "--progress", "never"]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    b0 = machine_busy_jiffies(); s0 = cpu_s(server.pid); t0 = time.time()
    res = subprocess.run(cmd, capture_output=True, text=True)
    b1 = machine_busy_jiffies(); s1 = cpu_s(server.pid); wall = time.time() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        sys.exit(f"bench.sh: {' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()}")
    report = json.loads(res.stdout)
    client_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    server_s = s1 - s0
    report["env"] = {
        "other_cores_before": round(quiet, 3),
        # CPU used by anything but this server and this client while the phase ran.
        "other_cores_during": round(max(0.0, (b1 - b0) / CLK - server_s - client_s) / wall, 3),
        "server_cpu_s": round(server_s, 3),
        "client_cpu_s": round(client_s, 3),
        "loadavg_1m_before": round(os.getloadavg()[0], 2),
        "server": proc_status(server.pid),
    }
    benchkit.stamp(report, quiet)
    ph = report[phase]
    log(f"  {server.name} {workload} {phase}: {ph['overall_throughput']:.0f} ops/s, errors {ph['errors']}, "
        f"other cores {report['env']['other_cores_during']}")
    if ph["errors"]:
        log(f"  WARNING: {ph['errors']} errors in {server.name} {workload} {phase}")
    return report

def du(path):
    """(allocated, apparent) bytes under path. fjall preallocates its journal, so the allocated
    size (what `du -s` shows) is the honest one for a small store; both are reported."""
    alloc = apparent = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                st = os.stat(os.path.join(root, f))
            except OSError:
                continue
            alloc += st.st_blocks * 512
            apparent += st.st_size
    return alloc, apparent

def op_summary(reports, phase="run"):
    """Medians over runs of overall throughput and, per op, throughput/p50/p99."""
    phases = [r[phase] for r in reports]
    out = {"overall_throughput": statistics.median(p["overall_throughput"] for p in phases),
           "runs_throughput": [round(p["overall_throughput"]) for p in phases],
           "errors": sum(p["errors"] for p in phases),
           "max_other_cores_during": max(r["env"]["other_cores_during"] for r in reports),
           "ops": {}}
    for op in phases[0]["ops"]:
        out["ops"][op] = {k: statistics.median(p["ops"][op][k] for p in phases)
                          for k in ("throughput", "p50_us", "p99_us")}
    return out

raw = {"config": {"records": RECORDS, "big_records": BIG_RECORDS, "ops": OPS, "e_ops": E_OPS,
                  "threads": THREADS, "runs": RUNS, "server_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU,
                  "cache_mb": CACHE_MB, "nproc": os.cpu_count(),
                  "redis": subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip(),
                  "git": benchkit.git("describe", "--always", "--dirty"), "bin": BIN,
                  "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
                  "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
       "ycsb": {}, "search": {}, "memory": {}}
summary = {"config": raw["config"]}

def save_raw():
    with open(os.path.join(OUT, "raw.json"), "w") as f:
        json.dump(raw, f, indent=1)

# --- YCSB A, B, C, E: Tessera vs Redis (everysec; always for A and B) -----------------------------
if "ycsb" in parts:
    systems = [("tessera", None, "abce"), ("redis-everysec", "everysec", "abce"), ("redis-always", "always", "ab")]
    for run in range(RUNS):
        for w in "abce":
            # Interleave systems within a round so slow drift on the machine hits all alike.
            for name, fsync, workloads in systems:
                if w not in workloads:
                    continue
                label = f"{name}-{w}-{run}"
                srv = start_tessera(label) if fsync is None else start_redis(label, fsync)
                try:
                    ops = E_OPS if w == "e" else OPS
                    load = bench(srv, w, "load", RECORDS, ops)
                    rep = bench(srv, w, "run", RECORDS, ops)
                    rep["load"] = load["load"]
                    rep["load_env"] = load["env"]
                    raw["ycsb"].setdefault(name, {}).setdefault(w, []).append(rep)
                finally:
                    srv.stop()
                save_raw()
    y = {}
    for name in raw["ycsb"]:
        for w, reps in raw["ycsb"][name].items():
            y.setdefault(w, {})[name] = op_summary(reps)
    for w, by in y.items():
        t = by["tessera"]["overall_throughput"]
        by["ratio_tessera_over_redis_everysec"] = round(t / by["redis-everysec"]["overall_throughput"], 3)
        if "redis-always" in by:
            by["ratio_tessera_over_redis_always"] = round(t / by["redis-always"]["overall_throughput"], 3)
    summary["ycsb"] = y
    targets = summary.setdefault("targets", {})
    if "c" in y:
        targets["ycsb_c_ge_1x_redis_everysec"] = {"ratio": y["c"]["ratio_tessera_over_redis_everysec"],
                                                  "met": y["c"]["ratio_tessera_over_redis_everysec"] >= 1.0}
    for w in "ab":
        if w in y:
            r = y[w]["ratio_tessera_over_redis_always"]
            targets[f"ycsb_{w}_ge_1x_redis_always"] = {"ratio": r, "met": r >= 1.0}

# --- Search fixing (prefix, suffix) vs get, and resident memory, at RECORDS and BIG_RECORDS -----
if "search" in parts or "memory" in parts:
    for size in (RECORDS, BIG_RECORDS):
        for run in range(RUNS):
            label = f"tessera-search-{size}-{run}"
            srv = start_tessera(label, cache_mb=CACHE_MB)
            try:
                load = bench(srv, "c", "load", size, OPS)
                time.sleep(2)
                after = proc_status(srv.pid)
                entry = {"load": load["load"], "load_env": load["env"],
                         "memory": {"vmhwm_after_load": after["VmHWM"], "vmrss_after_load": after["VmRSS"],
                                    "data_dir_bytes": du(srv.dir)[0],
                                    "data_dir_apparent_bytes": du(srv.dir)[1]}}
                if "search" in parts:
                    # Alternate the order so warm-up and drift do not favour one side.
                    order = ["c", "s"] if run % 2 == 0 else ["s", "c"]
                    for w in order:
                        entry[w] = bench(srv, w, "run", size, OPS)
                end = proc_status(srv.pid)
                entry["memory"].update({"vmhwm_end": end["VmHWM"], "vmrss_end": end["VmRSS"]})
                raw["search"].setdefault(str(size), []).append(entry)
            finally:
                srv.stop()
            save_raw()
    s, m = {}, {}
    for size, entries in raw["search"].items():
        mem = {k: statistics.median(e["memory"][k] for e in entries) for k in entries[0]["memory"]}
        m[size] = {k + "_mib": round(v / 2**20, 1) for k, v in mem.items()}
        if "search" in parts:
            get = op_summary([e["c"] for e in entries])
            srch = op_summary([e["s"] for e in entries])
            ratios = [e["s"]["run"]["overall_throughput"] / e["c"]["run"]["overall_throughput"] for e in entries]
            s[size] = {"get": get, "search": srch,
                       "ratio_search_over_get": round(srch["overall_throughput"] / get["overall_throughput"], 3),
                       "runs_ratio": [round(r, 3) for r in ratios]}
    targets = summary.setdefault("targets", {})
    if s:
        small, big = s[str(RECORDS)], s[str(BIG_RECORDS)]
        summary["search"] = s
        worst = min(small["ratio_search_over_get"], big["ratio_search_over_get"])
        targets["search_ge_0.5x_get"] = {"ratio_small": small["ratio_search_over_get"],
                                         "ratio_big": big["ratio_search_over_get"], "met": worst >= 0.5}
        p50 = (small["search"]["ops"]["search"]["p50_us"], big["search"]["ops"]["search"]["p50_us"])
        targets["search_latency_flat_in_region_size"] = {
            "p50_us_small": p50[0], "p50_us_big": p50[1], "growth": round(p50[1] / p50[0], 3),
            # 10x the records: "does not grow" allowing 25% for noise and a deeper tree.
            "met": p50[1] <= 1.25 * p50[0]}
    summary["memory"] = m
    big_m, small_m = m[str(BIG_RECORDS)], m[str(RECORDS)]
    targets["rss_bounded_by_cache"] = {
        "cache_mib": CACHE_MB, "peak_rss_mib_small": small_m["vmhwm_end_mib"],
        "peak_rss_mib_big": big_m["vmhwm_end_mib"], "data_dir_mib_big": big_m["data_dir_bytes_mib"],
        "growth_big_over_small": round(big_m["vmhwm_end_mib"] / small_m["vmhwm_end_mib"], 3),
        # "cache + fixed overhead": the peak may not grow by more than a quarter when the data
        # grows tenfold, and must stay well below the data size.
        "met": big_m["vmhwm_end_mib"] <= 1.25 * small_m["vmhwm_end_mib"]
               and big_m["vmhwm_end_mib"] < big_m["data_dir_bytes_mib"] / 2}

raw["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
save_raw()
summary["raw"] = os.path.join(OUT, "raw.json")
print(json.dumps(summary, indent=1))
PY
