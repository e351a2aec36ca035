#!/usr/bin/env bash
# What security and metrics cost: YCSB c (reads) and a (50/50 reads and updates) against one
# `tessera dev` run five ways — open (metrics served, as by default), without metrics
# (--http off), with client tokens (--auth: one admission per request), over TLS, and with
# tokens and TLS — each run RUNS times, the configurations interleaved so drift in the machine hits
# them alike. Prints JSON on stdout: every run's throughput and p50, each configuration's median,
# and its ratio to the open daemon's median. Progress goes to stderr.
#
# Usage: scripts/bench-security.sh
# Knobs (environment): RECORDS=20000 OPS=200000 THREADS=16 RUNS=3 SERVER_CPU=0 CLIENT_CPU=1
#   QUIET_CORES=0.3 QUIET_MAX_WAIT=600 (wait for a quiet machine before each run), TESSERA_BIN=path
#   (skips the build). Pinning, the wait and each run's provenance come from scripts/benchkit.py.
# Only 127.0.0.1 is used; data, certificates and logs go to $OUT (default: a fresh temp dir).
set -euo pipefail

cd "$(dirname "$0")/.."
BIN="$(python3 scripts/benchkit.py bin bench-security.sh)" || exit 1
OUT="${OUT:-$(mktemp -d /tmp/tessera-bench-security.XXXXXX)}"
RECORDS="${RECORDS:-20000}" OPS="${OPS:-200000}" THREADS="${THREADS:-16}" RUNS="${RUNS:-3}"
SERVER_CPU="${SERVER_CPU:-0}" CLIENT_CPU="${CLIENT_CPU:-1}"
QUIET_CORES="${QUIET_CORES:-0.3}" QUIET_MAX_WAIT="${QUIET_MAX_WAIT:-600}"
KIT=scripts/benchkit.py
read -ra PIN_SERVER <<<"$(python3 "$KIT" pin "$SERVER_CPU")"
read -ra PIN_CLIENT <<<"$(python3 "$KIT" pin "$CLIENT_CPU")"
echo "bench-security.sh: working directory $OUT" >&2

"$BIN" certs "$OUT/tls" --host 127.0.0.1 >/dev/null 2>&1
TOKEN="bench-0123456789abcdef0123"
echo "$TOKEN admin" >"$OUT/tokens"
TLS_FLAGS=(--tls-cert "$OUT/tls/127.0.0.1.pem" --tls-key "$OUT/tls/127.0.0.1.key" --tls-ca "$OUT/tls/ca.pem")

# One run: start a fresh daemon with the configuration's flags, load, wait for a quiet machine,
# run, stop; one result row (the run phase's throughput and p50s, and provenance) on stdout.
run_once() {
    local config=$1 workload=$2 n=$3
    local dir="$OUT/$config-$workload-$n" daemon=() client=()
    case $config in
        open) daemon=(--http 127.0.0.1:0) ;;
        no-metrics) daemon=(--http off) ;;
        tokens) daemon=(--http 127.0.0.1:0 --auth "$OUT/tokens"); client=(--token "$TOKEN") ;;
        tls) daemon=(--http 127.0.0.1:0 "${TLS_FLAGS[@]}"); client=(--tls-ca "$OUT/tls/ca.pem") ;;
        tls+tokens)
            daemon=(--http 127.0.0.1:0 --auth "$OUT/tokens" "${TLS_FLAGS[@]}")
            client=(--token "$TOKEN" --tls-ca "$OUT/tls/ca.pem") ;;
    esac
    mkdir -p "$dir"
    "${PIN_SERVER[@]}" "$BIN" --log warn dev --listen 127.0.0.1:0 --data-dir "$dir/data" --fsync never \
        "${daemon[@]}" >"$dir/ready" 2>"$dir/log" &
    local pid=$!
    for _ in $(seq 100); do grep -q "ready on" "$dir/ready" 2>/dev/null && break; sleep 0.1; done
    local addr
    addr=$(sed -n 's/.*ready on \([0-9.:]*\).*/\1/p' "$dir/ready")
    local target="tessera://$addr"
    "${PIN_CLIENT[@]}" "$BIN" "${client[@]}" bench --target "$target" -w "$workload" --phase load \
        --records "$RECORDS" --operations "$OPS" --threads "$THREADS" >/dev/null
    local quiet
    quiet=$(python3 "$KIT" quiet --cores "$QUIET_CORES" --max-wait "$QUIET_MAX_WAIT" "$pid")
    "${PIN_CLIENT[@]}" "$BIN" "${client[@]}" bench --target "$target" -w "$workload" --phase run \
        --records "$RECORDS" --operations "$OPS" --threads "$THREADS" >"$dir/bench.json"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    python3 -c 'import json,sys; r=json.load(sys.stdin)["run"]; print(json.dumps({"config": sys.argv[1], "workload": sys.argv[2], "throughput": r["overall_throughput"], "errors": r["errors"], "p50_us": {k: v["p50_us"] for k, v in r["ops"].items()}}))' \
        "$config" "$workload" <"$dir/bench.json" |
        python3 "$KIT" stamp --bin "$BIN" --server-cpu "$SERVER_CPU" --client-cpu "$CLIENT_CPU" --quiet "$quiet"
}

exec 3>"$OUT/runs.jsonl"
for workload in c a; do
    for n in $(seq "$RUNS"); do
        for config in open no-metrics tokens tls tls+tokens; do
            echo "bench-security.sh: $workload run $n: $config" >&2
            run_once "$config" "$workload" "$n" >&3
        done
    done
done
exec 3>&-

python3 - "$OUT/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
summary = {}
for workload in sorted({r["workload"] for r in runs}):
    of = [r for r in runs if r["workload"] == workload]
    medians = {c: statistics.median(r["throughput"] for r in of if r["config"] == c)
               for c in ["open", "no-metrics", "tokens", "tls", "tls+tokens"]}
    summary[workload] = {
        "median_ops_per_s": {c: round(m) for c, m in medians.items()},
        "ratio_to_open": {c: round(m / medians["open"], 3) for c, m in medians.items()},
        "errors": sum(r["errors"] for r in of),
    }
print(json.dumps({"runs": runs, "summary": summary}, indent=1))
PY
