#!/usr/bin/env bash
# Reproduces docs/advisor.md end to end (`make bench-advisor`): builds the release binary, starts
# a `tessera dev` on a free loopback port with a fresh data directory (pinned to one CPU, the
# client to the other), measures the model's constants on it (`tessera calibrate`), runs
# `tessera bench -w advisor-eval` (the nine hotel workloads of seed 000 §5.2: for each, the
# advisor's top configurations, random others and every baseline, each measured on a freshly
# loaded space), stops the server, and turns the raw JSON into the figures with
# scripts/advisor-report.py. Progress goes to stderr.
#
# Usage: scripts/bench-advisor.sh
#
# Knobs (environment):
#   HOTELS=20000      hotels loaded into each configuration's space
#   SECONDS_RUN=10    seconds of each timed run (closed loop)
#   WARMUP=2          seconds of the workload's mix before each timed run
#   RUNS=3            timed runs per configuration (each on a freshly loaded space)
#   THREADS=16        closed-loop clients (tessera calibrate uses 16 too)
#   WORKLOADS=        comma-separated subset of A-RH … C-WH (default: all nine)
#   CALIBRATE=1       measure the constants first (0: the advisor's defaults)
#   OUT_DIR=docs/advisor   where raw.json, calibration.json, summary.json, results.md and the SVGs go
#   SERVER_CPU=0 CLIENT_CPU=1   taskset CPU lists (ignored without taskset)
#
# Needs: cargo, python3; taskset if available. Only 127.0.0.1 is used.
set -euo pipefail

cd "$(dirname "$0")/.."
HOTELS="${HOTELS:-20000}"
SECONDS_RUN="${SECONDS_RUN:-10}"
WARMUP="${WARMUP:-2}"
RUNS="${RUNS:-3}"
THREADS="${THREADS:-16}"
WORKLOADS="${WORKLOADS:-}"
CALIBRATE="${CALIBRATE:-1}"
OUT_DIR="${OUT_DIR:-docs/advisor}"
SERVER_CPU="${SERVER_CPU:-0}"
CLIENT_CPU="${CLIENT_CPU:-1}"
CARGO="${CARGO:-cargo}"
PYTHON="${PYTHON:-python3}"

log() { echo "bench-advisor: $*" >&2; }

log "$CARGO build --release --locked -p tessera"
"$CARGO" build --release --locked -p tessera >&2
BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/tessera"
[ -x "$BIN" ] || { log "no binary at $BIN"; exit 2; }

pin_server=() pin_client=()
if command -v taskset >/dev/null; then
    pin_server=(taskset -c "$SERVER_CPU")
    pin_client=(taskset -c "$CLIENT_CPU")
fi

WORK="$(mktemp -d /tmp/tessera-bench-advisor.XXXXXX)"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Start the server; its stdout says when it is ready ("tessera dev: ready on ADDR, …").
ADDR=""
for attempt in 1 2 3 4 5; do
    port="$(free_port)"
    rm -rf "$WORK/data"
    "${pin_server[@]}" "$BIN" dev --data-dir "$WORK/data" --listen "127.0.0.1:$port" \
        >"$WORK/server.out" 2>"$WORK/server.log" &
    SERVER_PID=$!
    for _ in $(seq 300); do
        grep -q "ready on 127.0.0.1:$port" "$WORK/server.out" 2>/dev/null && break
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    if grep -q "ready on 127.0.0.1:$port" "$WORK/server.out" && kill -0 "$SERVER_PID" 2>/dev/null; then
        ADDR="127.0.0.1:$port"
        break
    fi
    log "tessera dev did not start on port $port (attempt $attempt): $(tail -3 "$WORK/server.log")"
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
done
[ -n "$ADDR" ] || { log "cannot start tessera dev"; exit 2; }
log "tessera dev on $ADDR (pid $SERVER_PID), data in $WORK/data"

mkdir -p "$OUT_DIR"
load_before="$(cut -d' ' -f1 /proc/loadavg)"
started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
calibration_args=()
if [ "$CALIBRATE" = 1 ]; then
    log "tessera calibrate"
    "${pin_client[@]}" "$BIN" --addr "$ADDR" calibrate --save "$OUT_DIR/calibration.json" >"$WORK/calibrate.json"
    cp "$WORK/calibrate.json" "$OUT_DIR/calibrate-measurements.json"
    calibration_args=(--calibration "$OUT_DIR/calibration.json")
fi
workload_args=()
[ -n "$WORKLOADS" ] && workload_args=(--eval-workloads "$WORKLOADS")

log "tessera bench -w advisor-eval: $HOTELS hotels, $RUNS x ${SECONDS_RUN}s after ${WARMUP}s, $THREADS clients"
"${pin_client[@]}" "$BIN" bench --target "tessera://$ADDR" -w advisor-eval \
    --records "$HOTELS" --threads "$THREADS" --duration-s "$SECONDS_RUN" --warmup-s "$WARMUP" \
    --repetitions "$RUNS" "${calibration_args[@]}" "${workload_args[@]}" \
    >"$WORK/raw.json"

# Where and when it ran, beside the measurements.
"$PYTHON" - "$WORK/raw.json" "$OUT_DIR/raw.json" "$load_before" "$started" <<'PY'
import json, os, subprocess, sys, time
raw = json.load(open(sys.argv[1]))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
git = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
raw["env"] = {"git": git, "cpu": cpu, "nproc": os.cpu_count(), "started": sys.argv[4],
              "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "loadavg_1m_before": float(sys.argv[3]), "loadavg_1m_after": os.getloadavg()[0]}
with open(sys.argv[2], "w") as f:
    json.dump(raw, f, indent=1)
    f.write("\n")
PY
kill -TERM "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""

"$PYTHON" scripts/advisor-report.py "$OUT_DIR/raw.json" "$OUT_DIR"
log "done: $OUT_DIR/raw.json, summary.json, results.md, scatter.svg, baselines.svg"
