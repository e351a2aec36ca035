#!/usr/bin/env bash
# Issue 4's benchmarks (docs/benchmarks.md, "Cluster (issue 4)"): builds the release binary,
# then for each configuration starts its own `tessera dev` on a free loopback port with a fresh
# data directory, runs `tessera bench` RUNS times per measurement, stops the server, and prints
# a summary (medians of RUNS runs, ratios against the 1-server K=1 baseline, and a least-squares
# fit of put latency against chain length) on stdout. Progress goes to stderr; every run's raw
# `tessera bench` JSON is kept in $OUT/raw.json (outside the repository).
#
# Usage: scripts/bench-cluster.sh [ycsb] [subspaces] [search] [paced]
#        (default: ycsb, subspaces and search)
#
#   ycsb       YCSB A, B and E, each configuration of YCSB_CONFIGS: one load per run, then
#              A, B, E on it (order rotated across runs), each run phase DURATION_S long.
#   subspaces  workload `subspaces` for S in SUB_S on each of SUB_CONFIGS: one server per run,
#              every S in its own space on it (order ascending, descending, then interleaved
#              across runs); latency against chain length K(1+2S).
#   search     workload `search-fixed` for F = 0..3 on each of SEARCH_CONFIGS: one load per
#              run, then each F (order rotated) on the same data.
#   paced      latency at a fraction of the peak (issue 12's "put p99 <= 2 ms at half of peak
#              load, K = 2"): per run and configuration of PACED_CONFIGS, one load, YCSB A
#              closed-loop for DURATION_S (the peak), then A paced at PACED_FRACTION of that
#              peak (`tessera bench --rate`, no coordinated omission) for PACED_DURATION_S.
#              Beside it, on the idle server's disk just before the paced phase, the physical
#              limit: FSYNC_PROBES writes of 4 KiB into a preallocated file, each followed by
#              fdatasync (p50/p99/p999); the target is update p99 <= 1.5x that p99.
#
# Configurations (what `tessera dev` runs):
#   standalone   tessera dev                                             1 server, K=1 (baseline)
#   cluster4k2   tessera dev --servers 4 --replicas 2 --coordinators 1
#   cluster4k1   tessera dev --servers 4 --replicas 1 --coordinators 1
#   cluster3k2   tessera dev --servers 3 --replicas 2 --coordinators 1
# (clusters with --recut-period-s 0 --split-period-s 0: see QUIET below)
# A local cluster is ONE process (its coordinator and its servers are tasks of one tokio
# runtime), so pinning it is as simple as pinning the standalone server.
#
# Knobs (environment):
#   YCSB_CONFIGS="standalone cluster4k2"   SUB_CONFIGS="cluster4k2 cluster4k1 standalone"
#   SEARCH_CONFIGS="standalone cluster4k2"
#   RECORDS=20000 THREADS=16 DURATION_S=12      YCSB: records, clients, run-phase seconds
#   SUB_S="0 1 2 3 4 5 6 7 8 9 10" SUB_RECORDS=1000 SUB_THREADS=4 SUB_DURATION_S=6
#   SEARCH_RECORDS=10000 SEARCH_THREADS=8 SEARCH_DURATION_S=8
#   PACED_CONFIGS="cluster4k2" PACED_FRACTION=0.5 PACED_DURATION_S=20
#   RUNS=3              runs per measurement; the summary quotes medians
#   SERVER_CPU=0 CLIENT_CPU=1   taskset CPU lists of the server process and of the bench client
#                       (on a 2-core machine: the whole cluster shares one core, as the
#                       standalone server has one core, and the client has the other)
#   QUIET_CORES=0.3 QUIET_MAX_WAIT=600   before each measured phase, wait until other
#                       processes use less than this many cores (2 s sample), at most this long
#   OUT=$(mktemp -d)    where data directories, logs and raw.json go
#   TESSERA_BIN=path    measure this binary instead of building this checkout's (an A/B run
#                       against an older build)
#
# Needs: cargo, python3; taskset if available. Only 127.0.0.1 is used. Every process it starts is stopped
# on exit, failure or Ctrl-C (the Python driver's finally/signal handlers, and a bash trap that
# kills whatever PID it recorded in $OUT/pids and is still running this binary).
set -euo pipefail

cd "$(dirname "$0")/.."
for tool in python3; do
    command -v "$tool" >/dev/null || { echo "bench-cluster.sh: $tool not found" >&2; exit 2; }
done

BIN="$(python3 scripts/benchkit.py bin bench-cluster.sh)" || exit 1
export BIN
export OUT="${OUT:-$(mktemp -d /tmp/tessera-bench-cluster.XXXXXX)}"
mkdir -p "$OUT"
: > "$OUT/pids"
echo "bench-cluster.sh: working directory $OUT" >&2

cleanup() {
    # Anything the driver started and did not stop (it was killed, say): only PIDs it recorded,
    # and only while they still run this binary (a PID may have been reused).
    while read -r pid; do
        [ -n "$pid" ] || continue
        if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF "$BIN dev "; then
            echo "bench-cluster.sh: stopping leftover process $pid" >&2
            kill -TERM "$pid" 2>/dev/null || true
            sleep 2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done < "$OUT/pids"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

python3 - "$@" <<'PY'
import json, os, resource, signal, statistics, subprocess, sys, time

sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import benchkit

BIN = os.environ["BIN"]
OUT = os.environ["OUT"]
env = os.environ.get
RUNS = int(env("RUNS", 3))
YCSB_CONFIGS = env("YCSB_CONFIGS", "standalone cluster4k2").split()
SUB_CONFIGS = env("SUB_CONFIGS", "cluster4k2 cluster4k1 standalone").split()
SEARCH_CONFIGS = env("SEARCH_CONFIGS", "standalone cluster4k2").split()
RECORDS = int(env("RECORDS", 20_000))
THREADS = int(env("THREADS", 16))
DURATION_S = float(env("DURATION_S", 12))
SUB_S = [int(s) for s in env("SUB_S", "0 1 2 3 4 5 6 7 8 9 10").split()]
SUB_RECORDS = int(env("SUB_RECORDS", 1000))
SUB_THREADS = int(env("SUB_THREADS", 4))
SUB_DURATION_S = float(env("SUB_DURATION_S", 6))
SEARCH_RECORDS = int(env("SEARCH_RECORDS", 10_000))
SEARCH_THREADS = int(env("SEARCH_THREADS", 8))
SEARCH_DURATION_S = float(env("SEARCH_DURATION_S", 8))
PACED_CONFIGS = env("PACED_CONFIGS", "cluster4k2").split()
PACED_FRACTION = float(env("PACED_FRACTION", 0.5))
PACED_DURATION_S = float(env("PACED_DURATION_S", 20))
FSYNC_PROBES = int(env("FSYNC_PROBES", 2000))
SERVER_CPU, CLIENT_CPU = benchkit.cpus("0", "1")
QUIET_CORES = float(env("QUIET_CORES", 0.3))
QUIET_MAX_WAIT = float(env("QUIET_MAX_WAIT", 600))
MANY_OPS = 1_000_000_000  # run phases end by --duration-s
CLK = benchkit.CLK
BASELINE = "standalone"
# The coordinators' adaptive re-cut and key-region splits are off: a re-cut rebuilds a subspace
# (every object backfilled) whenever its period comes, in the middle of a measurement or not.
QUIET = ["--recut-period-s", "0", "--split-period-s", "0"]
CONFIGS = {
    "standalone": [],
    "cluster4k2": ["--servers", "4", "--replicas", "2", "--coordinators", "1"] + QUIET,
    "cluster4k1": ["--servers", "4", "--replicas", "1", "--coordinators", "1"] + QUIET,
    "cluster3k2": ["--servers", "3", "--replicas", "2", "--coordinators", "1"] + QUIET,
}
parts = sys.argv[1:] or ["ycsb", "subspaces", "search"]
for p in parts:
    if p not in ("ycsb", "subspaces", "search", "paced"):
        sys.exit(f"bench-cluster.sh: unknown part {p!r} (ycsb, subspaces, search, paced)")
if not 0 < PACED_FRACTION <= 1:
    sys.exit(f"bench-cluster.sh: PACED_FRACTION={PACED_FRACTION}: a fraction of the peak, in (0, 1]")
for c in set(YCSB_CONFIGS + SUB_CONFIGS + SEARCH_CONFIGS + PACED_CONFIGS):
    if c not in CONFIGS:
        sys.exit(f"bench-cluster.sh: unknown configuration {c!r} ({', '.join(CONFIGS)})")

benchkit.configure("bench-cluster.sh", OUT, BIN, SERVER_CPU, QUIET_CORES, QUIET_MAX_WAIT, CLIENT_CPU)
from benchkit import Tessera, cpu_s, log, machine_busy_jiffies, pin, stop_all, wait_quiet

# Every server started is stopped, whatever happens: benchkit stops what is left at exit, and a
# signal becomes an exit.
def on_signal(signum, _frame):
    raise SystemExit(128 + signum)
signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)

def start(config, name):
    srv = Tessera(name, CONFIGS[config])
    srv.config = config
    return srv

def bench(srv, args, label):
    """One `tessera bench` invocation pinned to CLIENT_CPU; its report plus what else ran."""
    quiet = wait_quiet(srv.pid, pause_s=8)
    cmd = [*pin(CLIENT_CPU), BIN, "bench", "--target", srv.url,
           "--progress", "never"] + [str(a) for a in args]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    b0 = machine_busy_jiffies(); s0 = cpu_s(srv.pid); t0 = time.time()
    res = subprocess.run(cmd, capture_output=True, text=True)
    b1 = machine_busy_jiffies(); s1 = cpu_s(srv.pid); wall = time.time() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        sys.exit(f"bench-cluster.sh: {' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()}")
    report = json.loads(res.stdout)
    client_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    server_s = s1 - s0
    report["env"] = {
        "other_cores_before": round(quiet, 3),
        "other_cores_during": round(max(0.0, (b1 - b0) / CLK - server_s - client_s) / wall, 3),
        "server_cpu_s": round(server_s, 3),
        "client_cpu_s": round(client_s, 3),
        "wall_s": round(wall, 3),
        "loadavg_1m_before": round(os.getloadavg()[0], 2),
    }
    benchkit.stamp(report, quiet)
    for phase in ("load", "run"):
        ph = report.get(phase)
        if ph:
            log(f"  {label} {phase}: {ph['overall_throughput']:.0f} ops/s, errors {ph['errors']}, "
                f"other cores {report['env']['other_cores_during']}")
            if ph["errors"]:
                log(f"  WARNING: {ph['errors']} errors in {label} {phase}")
    return report

def fdatasync_probe(directory):
    """The disk's own durable write (`benchkit.fdatasync_latencies`), FSYNC_PROBES times on
    `directory`'s disk: p50, p99, p999 in µs."""
    lat = benchkit.fdatasync_latencies(os.path.join(directory, "fdatasync-probe"), FSYNC_PROBES)
    q = benchkit.latency_percentiles(lat)
    return {"p50_us": q["p50_us"], "p99_us": q["p99_us"], "p999_us": q["p999_us"], "probes": len(lat)}

def rotate(items, run):
    k = run % len(items)
    return items[k:] + items[:k]

def sweep_order(values, run):
    """Ascending, descending, then even positions before odd ones: drift hits no end alone."""
    if run % 3 == 0:
        return list(values)
    if run % 3 == 1:
        return list(reversed(values))
    return values[::2] + values[1::2]

def med(xs):
    return statistics.median(xs) if xs else None

def fit(xs, ys):
    """Least squares y = a + b x: (slope, intercept, R^2)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    syy = sum((y - my) ** 2 for y in ys)
    b = sxy / sxx if sxx else 0.0
    a = my - b * mx
    r2 = (sxy * sxy) / (sxx * syy) if sxx and syy else 1.0
    return b, a, r2

git = benchkit.git

raw = {"config": {"runs": RUNS, "records": RECORDS, "threads": THREADS, "duration_s": DURATION_S,
                  "sub_s": SUB_S, "sub_records": SUB_RECORDS, "sub_threads": SUB_THREADS,
                  "sub_duration_s": SUB_DURATION_S, "search_records": SEARCH_RECORDS,
                  "search_threads": SEARCH_THREADS, "search_duration_s": SEARCH_DURATION_S,
                  "paced_fraction": PACED_FRACTION, "paced_duration_s": PACED_DURATION_S,
                  "server_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU, "nproc": os.cpu_count(),
                  "configs": {c: ["tessera", "dev"] + CONFIGS[c] for c in CONFIGS},
                  "git": git("describe", "--always", "--dirty"), "commit": git("rev-parse", "HEAD"), "bin": BIN,
                  "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
                  "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
       "ycsb": {}, "subspaces": {}, "search": {}, "paced": {}}
summary = {"config": raw["config"]}

def save_raw():
    with open(os.path.join(OUT, "raw.json"), "w") as f:
        json.dump(raw, f, indent=1)

def op_stats(reports, op):
    ops = [r["run"]["ops"][op] for r in reports if op in r["run"]["ops"]]
    return {k: med([o[k] for o in ops]) for k in ("throughput", "mean_us", "p50_us", "p95_us", "p99_us")}

try:
    # --- YCSB A, B, E: 4 servers K=2 against 1 server K=1 -------------------------------------
    if "ycsb" in parts:
        for run in range(RUNS):
            for config in rotate(YCSB_CONFIGS, run):
                srv = start(config, f"ycsb-{config}-{run}")
                try:
                    load = bench(srv, ["-w", "a", "--phase", "load", "--records", RECORDS, "--threads", THREADS],
                                 f"{config} ycsb load")
                    raw["ycsb"].setdefault(config, {}).setdefault("load", []).append(load)
                    for w in rotate(["a", "b", "e"], run):
                        rep = bench(srv, ["-w", w, "--phase", "run", "--records", RECORDS, "--operations", MANY_OPS,
                                          "--duration-s", DURATION_S, "--threads", THREADS], f"{config} {w}")
                        raw["ycsb"][config].setdefault(w, []).append(rep)
                finally:
                    srv.stop()
                save_raw()
        y = {}
        for config, by in raw["ycsb"].items():
            for w, reps in by.items():
                if w == "load":
                    y.setdefault("load", {})[config] = {
                        "throughput": med([r["load"]["overall_throughput"] for r in reps]),
                        "runs": [round(r["load"]["overall_throughput"]) for r in reps],
                        "insert": {k: med([r["load"]["ops"]["insert"][k] for r in reps]) for k in ("p50_us", "p99_us")},
                        # Everything the server process did during the load, over the inserts.
                        "server_cpu_us_per_insert": med([1e6 * r["env"]["server_cpu_s"] / max(1, r["load"]["operations"])
                                                         for r in reps])}
                    continue
                y.setdefault(w, {})[config] = {
                    "throughput": med([r["run"]["overall_throughput"] for r in reps]),
                    "runs": [round(r["run"]["overall_throughput"]) for r in reps],
                    "errors": sum(r["run"]["errors"] for r in reps),
                    "max_other_cores_during": max(r["env"]["other_cores_during"] for r in reps),
                    "server_cpu_us_per_op": med([1e6 * r["env"]["server_cpu_s"] / max(1, r["run"]["operations"]) for r in reps]),
                    "ops": {op: op_stats(reps, op) for op in reps[0]["run"]["ops"]}}
        for w, by in y.items():
            if BASELINE in by:
                for config, s in by.items():
                    s["ratio_vs_standalone"] = round(s["throughput"] / by[BASELINE]["throughput"], 3)
                    if w == "load":
                        s["cpu_per_insert_vs_standalone"] = round(
                            s["server_cpu_us_per_insert"] / by[BASELINE]["server_cpu_us_per_insert"], 2)
        summary["ycsb"] = y

    # --- subspaces: put latency against chain length ----------------------------------------
    if "subspaces" in parts:
        for run in range(RUNS):
            for config in rotate(SUB_CONFIGS, run):
                srv = start(config, f"subspaces-{config}-{run}")
                try:
                    for s in sweep_order(SUB_S, run):
                        rep = bench(srv, ["-w", "subspaces", "--subspaces", s, "--records", SUB_RECORDS,
                                          "--operations", MANY_OPS, "--duration-s", SUB_DURATION_S,
                                          "--threads", SUB_THREADS], f"{config} S={s}")
                        raw["subspaces"].setdefault(config, {}).setdefault(str(s), []).append(rep)
                finally:
                    srv.stop()
                save_raw()
        sub = {}
        for config, by_s in raw["subspaces"].items():
            rows = []
            for s in sorted(by_s, key=int):
                reps = by_s[s]
                info = reps[0]["subspaces"]
                rows.append({"S": int(s), "K": info["replicas"], "servers": info["servers"],
                             "chain_length": info["chain_length"],
                             "put_throughput": med([r["run"]["overall_throughput"] for r in reps]),
                             "runs_throughput": [round(r["run"]["overall_throughput"]) for r in reps],
                             "errors": sum(r["run"]["errors"] + r["load"]["errors"] for r in reps),
                             "load_throughput": med([r["load"]["overall_throughput"] for r in reps]),
                             "max_other_cores_during": max(r["env"]["other_cores_during"] for r in reps),
                             **{k: med([r["run"]["ops"]["update"][k] for r in reps])
                                for k in ("mean_us", "p50_us", "p95_us", "p99_us")},
                             "runs_p50_us": [r["run"]["ops"]["update"]["p50_us"] for r in reps]})
            xs = [r["chain_length"] for r in rows]
            fits = {}
            for key in ("p50_us", "mean_us"):
                if len(set(xs)) > 1:
                    b, a, r2 = fit(xs, [r[key] for r in rows])
                    fits[key] = {"slope_us_per_hop": round(b, 1), "intercept_us": round(a, 1), "r2": round(r2, 4)}
            sub[config] = {"rows": rows, "fit_vs_chain_length": fits}
        if BASELINE in sub:
            base = {r["S"]: r for r in sub[BASELINE]["rows"]}
            for config, d in sub.items():
                for r in d["rows"]:
                    if r["S"] in base:
                        r["throughput_ratio_vs_standalone"] = round(r["put_throughput"] / base[r["S"]]["put_throughput"], 3)
                        r["p50_ratio_vs_standalone"] = round(r["p50_us"] / base[r["S"]]["p50_us"], 3)
        summary["subspaces"] = sub

    # --- search-fixed: searches/s and servers contacted against attributes fixed -------------
    if "search" in parts:
        for run in range(RUNS):
            for config in rotate(SEARCH_CONFIGS, run):
                srv = start(config, f"search-{config}-{run}")
                try:
                    load = bench(srv, ["-w", "search-fixed", "--phase", "load", "--records", SEARCH_RECORDS,
                                       "--threads", SEARCH_THREADS], f"{config} search-fixed load")
                    raw["search"].setdefault(config, {}).setdefault("load", []).append(load)
                    for f in rotate([0, 1, 2, 3], run):
                        rep = bench(srv, ["-w", "search-fixed", "--phase", "run", "--fixed", f,
                                          "--records", SEARCH_RECORDS, "--operations", MANY_OPS,
                                          "--duration-s", SEARCH_DURATION_S, "--threads", SEARCH_THREADS],
                                    f"{config} F={f}")
                        raw["search"][config].setdefault(str(f), []).append(rep)
                finally:
                    srv.stop()
                save_raw()
        se = {}
        for config, by_f in raw["search"].items():
            rows = []
            for f in sorted(k for k in by_f if k != "load"):
                reps = by_f[f]
                x = [r["search_fixed"] for r in reps]
                rows.append({"F": int(f), "servers": x[0]["servers"], "K": x[0]["replicas"],
                             "searches_per_s": med([r["run"]["overall_throughput"] for r in reps]),
                             "runs": [round(r["run"]["overall_throughput"]) for r in reps],
                             "errors": sum(r["run"]["errors"] for r in reps),
                             "max_other_cores_during": max(r["env"]["other_cores_during"] for r in reps),
                             **{k: med([r["run"]["ops"]["search"][k] for r in reps]) for k in ("p50_us", "p99_us")},
                             "mean_objects_returned": med([e["mean_objects_returned"] for e in x]),
                             "expected_objects": x[0]["expected_objects_per_search"],
                             "servers_contacted_mean": med([e["explain"]["servers_contacted_mean"] for e in x]),
                             "servers_contacted_range": [min(e["explain"]["servers_contacted_min"] for e in x),
                                                         max(e["explain"]["servers_contacted_max"] for e in x)],
                             "regions_contacted_mean": med([e["explain"]["regions_contacted_mean"] for e in x]),
                             "subspace": x[0]["explain"]["subspace_dimensions"]})
            se[config] = {"rows": rows}
        if BASELINE in se:
            base = {r["F"]: r for r in se[BASELINE]["rows"]}
            for config, d in se.items():
                for r in d["rows"]:
                    if r["F"] in base:
                        r["ratio_vs_standalone"] = round(r["searches_per_s"] / base[r["F"]]["searches_per_s"], 3)
        summary["search"] = se

    # --- paced: YCSB A's latency at a fraction of its peak -----------------------------------
    if "paced" in parts:
        for run in range(RUNS):
            for config in rotate(PACED_CONFIGS, run):
                srv = start(config, f"paced-{config}-{run}")
                try:
                    bench(srv, ["-w", "a", "--phase", "load", "--records", RECORDS, "--threads", THREADS],
                          f"{config} paced load")
                    peak = bench(srv, ["-w", "a", "--phase", "run", "--records", RECORDS, "--operations", MANY_OPS,
                                       "--duration-s", DURATION_S, "--threads", THREADS, "--seed", run + 1],
                                 f"{config} A closed loop")
                    rate = max(1, round(PACED_FRACTION * peak["run"]["overall_throughput"]))
                    wait_quiet(srv.pid, pause_s=8)
                    disk = fdatasync_probe(srv.dir)
                    log(f"  disk fdatasync p50 {disk['p50_us']} µs, p99 {disk['p99_us']} µs")
                    paced = bench(srv, ["-w", "a", "--phase", "run", "--records", RECORDS, "--operations", MANY_OPS,
                                        "--duration-s", PACED_DURATION_S, "--threads", THREADS, "--rate", rate,
                                        "--seed", run + 101], f"{config} A at {rate}/s")
                    raw["paced"].setdefault(config, []).append({"peak": peak, "rate": rate, "paced": paced,
                                                                "fdatasync": disk})
                finally:
                    srv.stop()
                save_raw()
        pa = {}
        for config, runs in raw["paced"].items():
            paced = [r["paced"] for r in runs]
            pa[config] = {"peak_ops_per_s": med([r["peak"]["run"]["overall_throughput"] for r in runs]),
                          "peak_runs": [round(r["peak"]["run"]["overall_throughput"]) for r in runs],
                          "rates": [r["rate"] for r in runs],
                          "achieved_runs": [round(p["run"]["overall_throughput"]) for p in paced],
                          "errors": sum(p["run"]["errors"] for p in paced),
                          "max_other_cores_during": max(p["env"]["other_cores_during"] for p in paced),
                          "update": op_stats(paced, "update"), "read": op_stats(paced, "read"),
                          "update_p99_runs": [p["run"]["ops"]["update"]["p99_us"] for p in paced],
                          "update_p999_us": med([p["run"]["ops"]["update"]["p999_us"] for p in paced]),
                          "fdatasync": {k: med([r["fdatasync"][k] for r in runs])
                                        for k in ("p50_us", "p99_us", "p999_us")},
                          # Per run, against the disk measured in that run.
                          "update_p99_over_fdatasync_p99_runs": [
                              round(r["paced"]["run"]["ops"]["update"]["p99_us"] / max(1, r["fdatasync"]["p99_us"]), 2)
                              for r in runs]}
            pa[config]["update_p99_over_fdatasync_p99"] = med(pa[config]["update_p99_over_fdatasync_p99_runs"])
            pa[config]["target_update_p99_le_1_5x_fdatasync"] = pa[config]["update_p99_over_fdatasync_p99"] <= 1.5
        summary["paced"] = pa
finally:
    stop_all()
    raw["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    save_raw()

# --- the tables ----------------------------------------------------------------------------
def table(title, header, rows):
    print(f"\n{title}")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")

def n0(x):
    return "—" if x is None else f"{x:,.0f}"

print(f"# bench-cluster.sh at {raw['config']['git']}, {raw['config']['started']} .. {raw['finished']}; "
      f"medians of {RUNS} runs; raw: {os.path.join(OUT, 'raw.json')}")
if "ycsb" in summary:
    rows = []
    for w in ("load", "a", "b", "e"):
        for config, s in summary["ycsb"].get(w, {}).items():
            if w == "load":
                rows.append(["load", config, n0(s["throughput"]), ", ".join(map(str, s["runs"])),
                             f"insert {s['insert']['p50_us']} / {s['insert']['p99_us']}",
                             f"{s.get('ratio_vs_standalone', '')}",
                             f"{s['server_cpu_us_per_insert']:.0f} ({s.get('cpu_per_insert_vs_standalone', '')}x)"])
                continue
            lat = "; ".join(f"{op} {n0(o['p50_us'])} / {n0(o['p99_us'])}" for op, o in s["ops"].items())
            rows.append([w.upper(), config, n0(s["throughput"]), ", ".join(map(str, s["runs"])), lat,
                         f"{s.get('ratio_vs_standalone', '')}", f"{s['server_cpu_us_per_op']:.0f}"])
    table("YCSB (ops/s; latency p50 / p99 µs)",
          ["workload", "config", "ops/s", "runs", "p50 / p99 (µs)", "× standalone", "server CPU µs/op"], rows)
if "subspaces" in summary:
    for config, d in summary["subspaces"].items():
        rows = [[r["S"], r["K"], r["chain_length"], n0(r["put_throughput"]), ", ".join(map(str, r["runs_throughput"])),
                 n0(r["mean_us"]), n0(r["p50_us"]), n0(r["p99_us"]), r.get("p50_ratio_vs_standalone", "")]
                for r in d["rows"]]
        table(f"subspaces on {config} (puts moving the object in every subspace)",
              ["S", "K", "chain K(1+2S)", "puts/s", "runs", "mean µs", "p50 µs", "p99 µs", "p50 × standalone"], rows)
        for key, f in d["fit_vs_chain_length"].items():
            print(f"  {key} = {f['intercept_us']} + {f['slope_us_per_hop']} × chain length  (R² = {f['r2']})")
if "search" in summary:
    rows = []
    for config, d in summary["search"].items():
        for r in d["rows"]:
            rows.append([r["F"], config, n0(r["searches_per_s"]), ", ".join(map(str, r["runs"])),
                         f"{n0(r['p50_us'])} / {n0(r['p99_us'])}", f"{r['mean_objects_returned']:.1f}",
                         f"{r['servers_contacted_mean']:.2f} ({r['servers_contacted_range'][0]}–{r['servers_contacted_range'][1]})",
                         f"{r['regions_contacted_mean']:.0f}", r.get("ratio_vs_standalone", "")])
    table("search-fixed (F attributes of x, y, z fixed)",
          ["F", "config", "searches/s", "runs", "p50 / p99 (µs)", "objects/search", "servers contacted", "regions", "× standalone"], rows)
if "paced" in summary:
    rows = []
    for config, d in summary["paced"].items():
        rows.append([config, f"{n0(d['peak_ops_per_s'])} ({', '.join(map(str, d['peak_runs']))})",
                     ", ".join(map(str, d["rates"])), ", ".join(map(str, d["achieved_runs"])),
                     f"{n0(d['update']['p50_us'])} / {n0(d['update']['p99_us'])}",
                     ", ".join(map(str, d["update_p99_runs"])),
                     n0(d["update_p999_us"]),
                     f"{n0(d['read']['p50_us'])} / {n0(d['read']['p99_us'])}",
                     f"{n0(d['fdatasync']['p50_us'])} / {n0(d['fdatasync']['p99_us'])}",
                     f"{d['update_p99_over_fdatasync_p99']} ({', '.join(map(str, d['update_p99_over_fdatasync_p99_runs']))})",
                     "yes" if d["target_update_p99_le_1_5x_fdatasync"] else "no"])
    table(f"YCSB A paced at {PACED_FRACTION:g} of its closed-loop peak, beside the disk's fdatasync",
          ["config", "peak ops/s (runs)", "rate", "achieved", "update p50 / p99 µs", "update p99 runs",
           "update p999 µs", "read p50 / p99 µs", "fdatasync p50 / p99 µs", "update p99 / fdatasync p99",
           "<= 1.5x"], rows)
print("\n" + json.dumps(summary, indent=1))
PY
