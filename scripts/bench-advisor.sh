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
#   WORKLOADS=        comma-separated subset of A-S, A-M, B-S, B-M (step by step) and A-RH … C-WH
#                     (default: all thirteen; the step-by-step scenarios calibrate the model)
#   CALIBRATE=1       measure the constants first (0: the advisor's defaults)
#   OUT_DIR=docs/advisor   where raw.json, calibration.json, summary.json, results.md and the SVGs go
#   EVAL=1            run the evaluation (0: skip it, e.g. to run the shift alone)
#   SHIFT=1           then the workload shift (tessera bench -w advisor-shift): an adaptive space
#   SHIFT_FROM=A-RH SHIFT_TO=D-RH   run one workload, then the other
#   SHIFT_BEFORE=60 SHIFT_AFTER=240 SHIFT_REFERENCE=30   seconds of each part
#   ADAPT_PERIOD=10   the server's --adapt-period-s (three periods decide an adaptation)
#   RECUT_PERIOD=0    the server's --recut-period-s (0: no automatic re-cut; see below)
#   SERVER_CPU=0 CLIENT_CPU=1   taskset CPU lists (ignored without taskset)
#   TESSERA_BIN=path  use this binary instead of building one
#   QUIET_CORES=0.3   before calibrating and before the evaluation, wait until other processes
#   QUIET_MAX_WAIT=600  use less than this many cores (at most this many seconds); during the
#                     evaluation their use is sampled every 2 s into raw.json's "env"
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
EVAL="${EVAL:-1}"
SHIFT="${SHIFT:-1}"
SHIFT_FROM="${SHIFT_FROM:-A-RH}"
SHIFT_TO="${SHIFT_TO:-D-RH}"
SHIFT_BEFORE="${SHIFT_BEFORE:-60}"
SHIFT_AFTER="${SHIFT_AFTER:-240}"
SHIFT_REFERENCE="${SHIFT_REFERENCE:-30}"
ADAPT_PERIOD="${ADAPT_PERIOD:-10}"
OUT_DIR="${OUT_DIR:-docs/advisor}"
SERVER_CPU="${SERVER_CPU:-0}"
CLIENT_CPU="${CLIENT_CPU:-1}"
CARGO="${CARGO:-cargo}"
PYTHON="${PYTHON:-python3}"

log() { echo "bench-advisor: $*" >&2; }

BIN="$(python3 scripts/benchkit.py bin bench-advisor.sh)" || exit 1
[ -x "$BIN" ] || { log "no binary at $BIN"; exit 2; }

# Pinning, waiting for a quiet machine and provenance: scripts/benchkit.py's command line.
KIT=scripts/benchkit.py
read -ra pin_server <<<"$("$PYTHON" "$KIT" pin "$SERVER_CPU")"
read -ra pin_client <<<"$("$PYTHON" "$KIT" pin "$CLIENT_CPU")"

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

# `monitor wait PID` returns (printing the other cores' last sample) once processes other than
# PID use less than QUIET_CORES over 2 s (at most QUIET_MAX_WAIT s); `monitor watch OUT PID…`
# samples every 2 s while the last PID lives and writes the timeline (Unix time, cores used by
# anything but PIDs).
QUIET_CORES="${QUIET_CORES:-0.3}"
QUIET_MAX_WAIT="${QUIET_MAX_WAIT:-600}"
monitor() {
    case $1 in
        wait) shift; "$PYTHON" "$KIT" quiet --cores "$QUIET_CORES" --max-wait "$QUIET_MAX_WAIT" "$@" ;;
        watch) shift; "$PYTHON" "$KIT" watch "$@" ;;
    esac
}

free_port() {
    "$PYTHON" "$KIT" port
}

# Start the server; its stdout says when it is ready ("tessera dev: ready on ADDR, …").
# RECUT_PERIOD (default 0: off): the re-cut driver looks at every subspace every 10 s by
# default and re-cuts freshly loaded ones (calibrate's scratch spaces mid-calibration, a
# configuration's hashed subspaces after its load), a build under the timed run or not as the
# 10-s period falls: measurements then differ by the build. One standalone server gains nothing
# from balanced regions.
ADDR=""
for attempt in 1 2 3 4 5; do
    port="$(free_port)"
    rm -rf "$WORK/data"
    "${pin_server[@]}" "$BIN" dev --data-dir "$WORK/data" --listen "127.0.0.1:$port" \
        --adapt-period-s "$ADAPT_PERIOD" --recut-period-s "${RECUT_PERIOD:-0}" \
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
monitor wait "$SERVER_PID" >/dev/null
calibration_args=()
if [ "$CALIBRATE" = 1 ]; then
    log "tessera calibrate"
    "${pin_client[@]}" "$BIN" --addr "$ADDR" calibrate --save "$OUT_DIR/calibration.json" >"$WORK/calibrate.json"
    cp "$WORK/calibrate.json" "$OUT_DIR/calibrate-measurements.json"
    calibration_args=(--calibration "$OUT_DIR/calibration.json")
fi
workload_args=()
[ -n "$WORKLOADS" ] && workload_args=(--eval-workloads "$WORKLOADS")

evaluate() {
log "tessera bench -w advisor-eval: $HOTELS hotels, $RUNS x ${SECONDS_RUN}s after ${WARMUP}s, $THREADS clients"
quiet="$(monitor wait "$SERVER_PID")"
"${pin_client[@]}" "$BIN" bench --target "tessera://$ADDR" -w advisor-eval \
    --records "$HOTELS" --threads "$THREADS" --duration-s "$SECONDS_RUN" --warmup-s "$WARMUP" \
    --repetitions "$RUNS" "${calibration_args[@]}" "${workload_args[@]}" \
    >"$WORK/raw.json" &
CLIENT_PID=$!
monitor watch "$WORK/other.json" "$SERVER_PID" "$CLIENT_PID" &
MONITOR_PID=$!
wait "$CLIENT_PID" || { log "tessera bench failed"; exit 2; }
wait "$MONITOR_PID" || true

# Where and when it ran, beside the measurements.
"$PYTHON" - "$WORK/raw.json" "$OUT_DIR/raw.json" "$load_before" "$started" "$WORK/other.json" "$QUIET_CORES" \
    "$quiet" "$BIN" "$SERVER_CPU" "$CLIENT_CPU" <<'PY'
import json, os, sys, time
sys.path.insert(0, "scripts")
import benchkit
raw = json.load(open(sys.argv[1]))
try:
    other = json.load(open(sys.argv[5]))
except (OSError, ValueError):
    other = []
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
git = benchkit.git("describe", "--always", "--dirty")
benchkit.stamp(raw, float(sys.argv[7]), bin_=sys.argv[8], server_cpu=sys.argv[9], client_cpu=sys.argv[10])
raw["env"] = {"git": git, "cpu": cpu, "nproc": os.cpu_count(), "started": sys.argv[4],
              "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "loadavg_1m_before": float(sys.argv[3]), "loadavg_1m_after": os.getloadavg()[0],
              # CPU used by anything but the server and the client, every 2 s of the evaluation.
              "quiet_cores": float(sys.argv[6]),
              "other_cores_max": max((o for _, o in other), default=None),
              "other_cores_mean": sum(o for _, o in other) / len(other) if other else None,
              "other_cores_timeline": other}
with open(sys.argv[2], "w") as f:
    json.dump(raw, f, indent=1)
    f.write("\n")
PY
}
[ "$EVAL" = 1 ] && evaluate

if [ "$SHIFT" = 1 ]; then
    log "tessera bench -w advisor-shift: $SHIFT_FROM for ${SHIFT_BEFORE}s, then $SHIFT_TO for ${SHIFT_AFTER}s, adapt period ${ADAPT_PERIOD}s"
    monitor wait "$SERVER_PID" >/dev/null
    "${pin_client[@]}" "$BIN" bench --target "tessera://$ADDR" -w advisor-shift \
        --records "$HOTELS" --threads "$THREADS" --warmup-s "$WARMUP" "${calibration_args[@]}" \
        --shift-from "$SHIFT_FROM" --shift-to "$SHIFT_TO" --shift-before-s "$SHIFT_BEFORE" \
        --shift-after-s "$SHIFT_AFTER" --shift-reference-s "$SHIFT_REFERENCE" --progress always \
        >"$OUT_DIR/shift.json" || { log "tessera bench -w advisor-shift failed"; exit 2; }
    grep "tessera adapt" "$WORK/server.log" >"$OUT_DIR/shift-server.log" || true
fi
kill -TERM "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""

if [ "$EVAL" = 1 ]; then
    "$PYTHON" scripts/advisor-report.py "$OUT_DIR/raw.json" "$OUT_DIR"
    log "done: $OUT_DIR/raw.json, summary.json, results.md, scatter.svg, baselines.svg"
fi
if [ "$SHIFT" = 1 ]; then
    "$PYTHON" scripts/advisor-shift-report.py "$OUT_DIR/shift.json" "$OUT_DIR"
    log "done: $OUT_DIR/shift.json, shift.md, shift.svg, shift-server.log"
fi
