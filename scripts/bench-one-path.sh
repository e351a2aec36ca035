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
#        BASE_BIN=<an already built old binary> OUT=$(mktemp -d)
# Only 127.0.0.1 is used.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE="${BASE:-d300ab4}"
export OUT="${OUT:-$(mktemp -d /tmp/tessera-one-path.XXXXXX)}"
cargo build --release --locked -p tessera >&2
export NEW_BIN="$PWD/target/release/tessera"
if [ -z "${BASE_BIN:-}" ]; then
    git worktree add --force "$OUT/base" "$BASE" >&2
    (cd "$OUT/base" && CARGO_TARGET_DIR="$OUT/base-target" cargo build --release --locked -p tessera >&2)
    BASE_BIN="$OUT/base-target/release/tessera"
fi
export BASE_BIN
export GIT_NEW="$(git describe --always --dirty)" GIT_BASE="$BASE"

exec python3 - <<'PY'
import json, os, shutil, signal, socket, statistics, subprocess, sys, time

OUT = os.environ["OUT"]
BINS = {"old": os.environ["BASE_BIN"], "new": os.environ["NEW_BIN"]}
RECORDS = int(os.environ.get("RECORDS", 100_000))
OPS = int(os.environ.get("OPS", 200_000))
THREADS = int(os.environ.get("THREADS", 16))
RUNS = int(os.environ.get("RUNS", 3))
SERVER_CPU = os.environ.get("SERVER_CPU", "0")
CLIENT_CPU = os.environ.get("CLIENT_CPU", "1")

def log(*a):
    print("bench-one-path:", *a, file=sys.stderr, flush=True)

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def start(which):
    d = os.path.join(OUT, f"data-{which}")
    shutil.rmtree(d, ignore_errors=True)
    port = free_port()
    proc = subprocess.Popen(["taskset", "-c", SERVER_CPU, BINS[which], "dev", "--data-dir", d,
                             "--listen", f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if "ready on" not in line:
        sys.exit(f"{which} server did not start: {line!r}")
    return proc, f"127.0.0.1:{port}", d

def bench(which, addr, workload, phase):
    cmd = ["taskset", "-c", CLIENT_CPU, BINS[which], "bench", "--target", f"tessera://{addr}",
           "-w", workload, "--phase", phase, "--records", str(RECORDS), "--operations", str(OPS),
           "--threads", str(THREADS), "--progress", "never"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {res.stderr.strip()}")
    return json.loads(res.stdout)[phase]

runs = {w: {"old": [], "new": []} for w in "abc"}
for run in range(RUNS):
    for which in (["old", "new"] if run % 2 == 0 else ["new", "old"]):
        for w in "abc":
            proc, addr, d = start(which)
            try:
                bench(which, addr, w, "load")
                ph = bench(which, addr, w, "run")
            finally:
                proc.send_signal(signal.SIGTERM); proc.wait(60); shutil.rmtree(d, ignore_errors=True)
            runs[w][which].append(round(ph["overall_throughput"]))
            log(f"run {run + 1} {which} {w}: {ph['overall_throughput']:.0f} ops/s, errors {ph['errors']}")

summary = {}
for w, r in runs.items():
    old, new = statistics.median(r["old"]), statistics.median(r["new"])
    summary[w] = {"old_ops_s": r["old"], "new_ops_s": r["new"], "old_median": old, "new_median": new,
                  "ratio_new_over_old": round(new / old, 3)}
print(json.dumps({"benchmark": "one write path (tessera dev standalone)", "base": os.environ["GIT_BASE"],
                  "new": os.environ["GIT_NEW"], "records": RECORDS, "ops": OPS, "threads": THREADS,
                  "runs": RUNS, "server_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU, "ycsb": summary}))
PY
