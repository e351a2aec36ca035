#!/usr/bin/env bash
# The document benchmarks of docs/benchmarks.md "Dynamic spaces" (issue "Dynamic spaces" item
# 6), end to end: builds the release binary, starts its own PostgreSQL cluster (initdb into a
# temporary directory, pg_ctl start on a free loopback port, its unix socket in that directory;
# stopped at the end, on error and on Ctrl-C too), then for every run and system starts a fresh
# `tessera dev` on a free loopback port with a fresh data directory (PostgreSQL: a fresh table),
# pins the server to one CPU and `tessera bench` to the other, runs workloads `documents` (seed
# 004's micro-benchmark) and `dblp` (the generated bibliography and its query kinds) against
# the Tessera dynamic space, the Tessera typed space and PostgreSQL's JSONB, and prints a JSON
# summary (medians of RUNS runs, ratios) on stdout. Progress goes to stderr; every run's raw
# report is kept in $OUT/raw.json (outside the repository).
#
# Usage: scripts/bench-documents.sh [documents] [dblp]      (default: both)
#
# Knobs (environment):
#   ENTRIES=50000       bibliography entries (the seed's DBLP had 307 780; `tessera bench`'s
#                       default is 300000, but the dynamic space's searches read nearly
#                       every region, so their cost grows with the data, and a full run at
#                       300000 takes well over the ~20 minutes these defaults keep to: 23 min
#                       here including the build and waits for a busy machine)
#   MICRO_RECORDS=50000   micro-benchmark objects written
#   MICRO_READS=50000     micro-benchmark reads by key
#   QUERY_S=4           seconds each query kind is timed for (and the micro-benchmark's search)
#   THREADS=16          closed-loop clients, the same for every system (PostgreSQL: one
#                       connection each; Tessera: one pipelined client)
#   RUNS=3              runs; the summary quotes medians
#   SYSTEMS="dynamic typed postgres formula"   (formula: a dynamic space whose documents are
#                       placed by a compression formula, `--doc-space formula`; add
#                       `pointers` for the same formula with pointer overlays)
#   FORMULA_DIMS="1 3 5"  the micro-benchmark's formulas: one run each, its overlay naming
#                       that many properties (the seed measured 1 to 5)
#   SERVER_CPU=0 CLIENT_CPU=1   taskset CPU lists of the servers and of the bench client
#   QUIET_CORES=0.3 QUIET_MAX_WAIT=300   wait for a quiet machine before each measurement
#   OUT=$(mktemp -d)    where data directories, logs and raw.json go
#   TESSERA_BIN=path    use this binary instead of building one
#
# Needs: cargo, python3, PostgreSQL 15's initdb/pg_ctl/postgres (Debian: apt-get
# install postgresql; found on PATH or in /usr/lib/postgresql/*/bin). Run as root, the cluster
# runs as user postgres (initdb refuses root); taskset if available. Only 127.0.0.1 is ever used.
set -euo pipefail

cd "$(dirname "$0")/.."
for tool in python3; do
    command -v "$tool" >/dev/null || { echo "bench-documents.sh: $tool not found" >&2; exit 2; }
done

BIN="$(python3 scripts/benchkit.py bin bench-documents.sh)" || exit 1
export BIN
export OUT="${OUT:-$(mktemp -d /tmp/tessera-bench-docs.XXXXXX)}"
mkdir -p "$OUT"
echo "bench-documents.sh: working directory $OUT" >&2

exec python3 - "$@" <<'PY'
import json, os, signal, subprocess, sys, time

BIN, OUT = os.environ["BIN"], os.environ["OUT"]
ENTRIES = int(os.environ.get("ENTRIES", 50_000))
MICRO_RECORDS = int(os.environ.get("MICRO_RECORDS", 50_000))
MICRO_READS = int(os.environ.get("MICRO_READS", 50_000))
QUERY_S = float(os.environ.get("QUERY_S", 4))
THREADS = int(os.environ.get("THREADS", 16))
RUNS = int(os.environ.get("RUNS", 3))
SYSTEMS = os.environ.get("SYSTEMS", "dynamic typed postgres formula").split()
FORMULA_DIMS = [int(d) for d in os.environ.get("FORMULA_DIMS", "1 3 5").split()]
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import benchkit
SERVER_CPU, CLIENT_CPU = benchkit.cpus("0", "1")
QUIET_CORES = float(os.environ.get("QUIET_CORES", 0.3))
QUIET_MAX_WAIT = float(os.environ.get("QUIET_MAX_WAIT", 300))
CLK = os.sysconf("SC_CLK_TCK")
parts = sys.argv[1:] or ["documents", "dblp"]
for p in parts:
    if p not in ("documents", "dblp"):
        sys.exit(f"bench-documents.sh: unknown part {p!r} (documents, dblp)")
for s in SYSTEMS:
    if s not in ("dynamic", "typed", "postgres", "formula", "pointers"):
        sys.exit(f"bench-documents.sh: unknown system {s!r} (dynamic, typed, postgres, formula, pointers)")

# SIGTERM (and SIGHUP) unwind like Ctrl-C, so the finally below stops what was started.
def _raise(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")
signal.signal(signal.SIGTERM, _raise)
signal.signal(signal.SIGHUP, _raise)

from benchkit import Postgres, Tessera, cpu_s, dir_bytes, log, machine_busy_jiffies, med, pin, ratio, wait_quiet
benchkit.configure("bench-documents.sh", OUT, BIN, SERVER_CPU, QUIET_CORES, QUIET_MAX_WAIT, CLIENT_CPU)

def bench(url, pid, system, workload, dims=None):
    quiet = wait_quiet(pid)
    cmd = [*pin(CLIENT_CPU), BIN, "bench", "--target", url, "-w", workload,
           "--threads", str(THREADS), "--progress", "never", "--query-duration-s", str(QUERY_S)]
    if system != "postgres":
        cmd += ["--doc-space", system]
    if dims is not None:
        cmd += ["--formula-dims", str(dims)]
    if workload == "dblp":
        cmd += ["--entries", str(ENTRIES)]
    else:
        cmd += ["--records", str(MICRO_RECORDS), "--operations", str(MICRO_READS)]
    b0 = machine_busy_jiffies(); s0 = cpu_s(pid); t0 = time.time()
    res = subprocess.run(cmd, capture_output=True, text=True)
    b1 = machine_busy_jiffies(); s1 = cpu_s(pid); wall = time.time() - t0
    if res.returncode != 0:
        # A system that disagrees with the model (or any failure) stops everything, loudly.
        raise SystemExit(f"bench-documents.sh: {' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()}")
    report = json.loads(res.stdout)
    report["env"] = {"other_cores_before": round(quiet, 3), "wall_s": round(wall, 1),
                     "server_cpu_s": round(s1 - s0, 1),
                     "machine_busy_cores": round((b1 - b0) / CLK / wall, 2)}
    benchkit.stamp(report, quiet)
    d = report["documents"]
    errors = report["load"]["errors"] + sum(q["errors"] for q in d["queries"].values())
    log(f"  {system} {workload}: load {report['load']['overall_throughput']:.0f}/s, "
        + ", ".join(f"{k} {q['throughput']:.0f}/s" for k, q in d["queries"].items())
        + f", errors {errors}, {wall:.0f} s")
    if errors:
        log(f"  WARNING: {errors} errors in {system} {workload}; the first: "
            + "; ".join(report["load"].get("error_samples", [])))
    return report

raw = {"config": {"entries": ENTRIES, "micro_records": MICRO_RECORDS, "micro_reads": MICRO_READS,
                  "query_s": QUERY_S, "threads": THREADS, "runs": RUNS, "systems": SYSTEMS,
                  "server_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU, "nproc": os.cpu_count(),
                  "git": benchkit.git("describe", "--always", "--dirty"), "bin": BIN,
                  "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
       "runs": {}}

def save_raw():
    with open(os.path.join(OUT, "raw.json"), "w") as f:
        json.dump(raw, f, indent=1)

LABEL = {"dynamic": "tessera-dynamic", "typed": "tessera-typed", "postgres": "postgres-jsonb",
         "formula": "tessera-formula", "pointers": "tessera-pointers"}
pg = None
try:
    if "postgres" in SYSTEMS:
        pg = Postgres()
        pg.start()
        raw["config"]["postgres"] = pg.version()
        log(f"PostgreSQL on 127.0.0.1:{pg.port}, data in {pg.data}")
    for run in range(RUNS):
        # Rotate the order of the systems from run to run, so drift favours none.
        order = SYSTEMS[run % len(SYSTEMS):] + SYSTEMS[:run % len(SYSTEMS)]
        for workload in parts:
            # The micro-benchmark's formula system runs once per formula size.
            specs = [(s, d) for s in order
                     for d in (FORMULA_DIMS if s in ("formula", "pointers") and workload == "documents" else [None])]
            for system, dims in specs:
                label = LABEL[system] + (f"-d{dims}" if dims is not None else "")
                if system == "postgres":
                    pg.checkpoint()
                    rep = bench(pg.url, pg.pid, system, workload)
                else:
                    srv = Tessera(f"{system}{dims or ''}-{workload}-{run}")
                    try:
                        rep = bench(srv.url, srv.pid, system, workload, dims)
                        # What the loaded space takes on disk (the engine's files, unflushed
                        # journal included), for copies against pointers.
                        rep["env"]["data_bytes"] = dir_bytes(os.path.join(srv.dir, "data"))
                    finally:
                        srv.stop()
                raw["runs"].setdefault(workload, {}).setdefault(label, []).append(rep)
                save_raw()
finally:
    if pg is not None:
        pg.stop()
raw["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
save_raw()

# --- summary: medians over runs, ratios ----------------------------------------------------------
summary = {"config": raw["config"]}
for workload, by_system in raw["runs"].items():
    # Every system answered the sampled queries with the model's counts (each run checks and
    # fails otherwise); check once more that they answered the same queries alike.
    answers = {s: [(a["query"], a["got"]) for a in reps[0]["documents"]["agreement"]] for s, reps in by_system.items()}
    if len({json.dumps(v) for v in answers.values()}) > 1:
        raise SystemExit(f"bench-documents.sh: systems disagree on {workload}: {json.dumps(answers)}")
    out = {"agreement": {"queries_checked": len(next(iter(answers.values()))), "all_equal": True}}
    for system, reps in by_system.items():
        s = {"load_writes_per_s": med([r["load"]["overall_throughput"] for r in reps]),
             "load_runs": [round(r["load"]["overall_throughput"]) for r in reps],
             "load_p50_us": med([r["load"]["ops"]["insert"]["p50_us"] for r in reps]),
             "load_p99_us": med([r["load"]["ops"]["insert"]["p99_us"] for r in reps]),
             "data_mb": (med([r["env"]["data_bytes"] / 1e6 for r in reps])
                         if all("data_bytes" in r["env"] for r in reps) else None),
             "errors": sum(r["load"]["errors"] + sum(q["errors"] for q in r["documents"]["queries"].values()) for r in reps),
             "queries": {}}
        for kind, q0 in reps[0]["documents"]["queries"].items():
            qs = [r["documents"]["queries"][kind] for r in reps]
            k = {"per_s": med([q["throughput"] for q in qs]),
                 "runs": [round(q["throughput"], 1) for q in qs],
                 "p50_us": med([q["p50_us"] for q in qs]), "p99_us": med([q["p99_us"] for q in qs]),
                 "matches_mean": round(q0["matches_mean"], 2), "support": q0["support"]["how"]}
            if q0["support"].get("note"):
                k["how"] = q0["support"]["note"]
            if q0.get("regions"):
                g = q0["regions"]
                k["regions"] = {"explained_mean": g["explained_mean"], "predicted_mean": g["predicted_mean"],
                                "prediction_mismatches": g["prediction_mismatches"],
                                "of": g["subspace_regions"], "shapes_read_mean": g["shapes_read_mean"],
                                "shapes_known": g["shapes_known"]}
                if g.get("holding_matches_mean") is not None:
                    k["regions"]["holding_matches_mean"] = g["holding_matches_mean"]
            s["queries"][kind] = k
        if reps[0]["documents"].get("census"):
            c = reps[0]["documents"]["census"]
            out["census"] = {"properties": len(c["share"]), "mean_properties": round(c["mean_properties"], 2),
                             "universal_share": round(c["universal_share"], 3),
                             "common_share": round(c["common_share"], 3), "rare_share": round(c["rare_share"], 3)}
        out[system] = s
    # Ratios (> 1: the first system faster): the dynamic space against the typed space and
    # PostgreSQL, the typed space against PostgreSQL, and each formula's space against the
    # unispace and PostgreSQL.
    def ratios_between(a, o):
        r = {"load": ratio(a["load_writes_per_s"], o["load_writes_per_s"])}
        for kind, q in a["queries"].items():
            oq = o["queries"].get(kind)
            r[kind] = ratio(q["per_s"], oq["per_s"]) if oq else None
        return r
    pairs = [("tessera-dynamic", "tessera-typed", "dynamic_over_typed"),
             ("tessera-dynamic", "postgres-jsonb", "dynamic_over_jsonb"),
             ("tessera-typed", "postgres-jsonb", "typed_over_jsonb")]
    for name in out:
        if name.startswith(("tessera-formula", "tessera-pointers")):
            short = name.removeprefix("tessera-")
            pairs += [(name, "tessera-dynamic", f"{short}_over_dynamic"),
                      (name, "postgres-jsonb", f"{short}_over_jsonb")]
        if name.startswith("tessera-pointers"):
            copies = name.replace("pointers", "formula")
            pairs += [(name, copies, f"{name.removeprefix('tessera-')}_over_copies")]
    ratios = {key: ratios_between(out[a], out[o]) for a, o, key in pairs if a in out and o in out}
    out["ratios"] = ratios
    summary[workload] = out
summary["raw"] = os.path.join(OUT, "raw.json")
print(json.dumps(summary, indent=1))
PY
