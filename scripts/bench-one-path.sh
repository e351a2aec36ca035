#!/usr/bin/env bash
# Issue 8, item 1: `tessera dev` (standalone) now runs the replication state machine on the
# chain loop instead of its own write loop. This measures YCSB A, B and C on both: the binary
# built from this checkout against one built from BASE (the last commit with the standalone
# write loop), each with its own bench client (the wire protocol changed between them), same
# machine, runs alternating. Prints one
# JSON object on stdout: every run, medians and new/old ratios. Progress goes to stderr.
#
# Usage: scripts/bench-one-path.sh
# Knobs: BASE=d300ab4 RECORDS=100000 OPS=200000 THREADS=16 RUNS=3 SERVER_CPU=0 CLIENT_CPU=1
#        QUIET_CORES=0.3 QUIET_MAX_WAIT=600 (wait for a quiet machine before each run phase)
#        BASE_BIN=<an already built old binary> TESSERA_BIN=<the new one, skips its build>
#        OUT=$(mktemp -d)
# Only 127.0.0.1 is used.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE="${BASE:-d300ab4}"
export OUT="${OUT:-$(mktemp -d /tmp/tessera-one-path.XXXXXX)}"
NEW_BIN="$(python3 scripts/benchkit.py bin bench-one-path.sh)" || exit 1
export NEW_BIN
if [ -z "${BASE_BIN:-}" ]; then
    git worktree add --force "$OUT/base" "$BASE" >&2
    (cd "$OUT/base" && CARGO_TARGET_DIR="$OUT/base-target" cargo build --release --locked -p tessera >&2)
    BASE_BIN="$OUT/base-target/release/tessera"
fi
export BASE_BIN
export GIT_NEW="$(git describe --always --dirty)" GIT_BASE="$BASE"

exec python3 - <<'PY'
import json, os, statistics, subprocess, sys

sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import benchkit
from benchkit import Tessera, log, pin, wait_quiet

OUT = os.environ["OUT"]
BINS = {"old": os.environ["BASE_BIN"], "new": os.environ["NEW_BIN"]}
RECORDS = int(os.environ.get("RECORDS", 100_000))
OPS = int(os.environ.get("OPS", 200_000))
THREADS = int(os.environ.get("THREADS", 16))
RUNS = int(os.environ.get("RUNS", 3))
SERVER_CPU, CLIENT_CPU = benchkit.cpus("0", "1")
benchkit.configure("bench-one-path", OUT, BINS["new"], SERVER_CPU,
                   float(os.environ.get("QUIET_CORES", 0.3)), float(os.environ.get("QUIET_MAX_WAIT", 600)),
                   CLIENT_CPU)

def bench(which, srv, workload, phase):
    cmd = [*pin(CLIENT_CPU), BINS[which], "bench", "--target", srv.url,
           "-w", workload, "--phase", phase, "--records", str(RECORDS), "--operations", str(OPS),
           "--threads", str(THREADS), "--progress", "never"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {res.stderr.strip()}")
    return json.loads(res.stdout)[phase]

runs = {w: {"old": [], "new": []} for w in "abc"}
rows = []
for run in range(RUNS):
    for which in (["old", "new"] if run % 2 == 0 else ["new", "old"]):
        for w in "abc":
            srv = Tessera(f"data-{which}", bin_=BINS[which])
            try:
                bench(which, srv, w, "load")
                quiet = wait_quiet(srv.pid)
                ph = bench(which, srv, w, "run")
            finally:
                srv.stop()
            runs[w][which].append(round(ph["overall_throughput"]))
            rows.append(benchkit.stamp({"binary": which, "workload": w, "run": run,
                                        "ops_s": round(ph["overall_throughput"]), "errors": ph["errors"]},
                                       quiet, bin_=BINS[which]))
            log(f"run {run + 1} {which} {w}: {ph['overall_throughput']:.0f} ops/s, errors {ph['errors']}")

summary = {}
for w, r in runs.items():
    old, new = statistics.median(r["old"]), statistics.median(r["new"])
    summary[w] = {"old_ops_s": r["old"], "new_ops_s": r["new"], "old_median": old, "new_median": new,
                  "ratio_new_over_old": round(new / old, 3)}
print(json.dumps({"benchmark": "one write path (tessera dev standalone)", "base": os.environ["GIT_BASE"],
                  "new": os.environ["GIT_NEW"], "records": RECORDS, "ops": OPS, "threads": THREADS,
                  "runs": RUNS, "server_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU, "ycsb": summary,
                  "rows": rows}))
PY
