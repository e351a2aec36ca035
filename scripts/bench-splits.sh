#!/usr/bin/env bash
# Key regions that follow the data (docs/placements.md "Key regions that follow the data";
# issue "Correlation-aware placement" item 1): how an ordered space's objects spread over the
# servers with and without splits.
#
# For splits off (--split-period-s 0) and on (every second, regions of at least MIN_OBJECTS),
# starts a fresh `tessera dev --servers 5 --replicas 2` on a free loopback port, creates
#   space users key string name attributes int age create 16 partitions
#   tolerate 1 failure placement ordered
# and loads KEYS user names PREFIX + 7 random digits (skewed on the key axis: every name
# starts with PREFIX, so all lie in one of the 16 equal slices; PREFIX=tweet:00 makes every
# name share its first 8 bytes, one coordinate of the axis, which splits must tell apart). Then waits until the key
# regions stop changing (no split and no region moving for SETTLE_S seconds), and prints a
# JSON summary on stdout: regions, regions holding objects, objects led per server (a key's
# point leader serves its reads and orders its writes) and held per server (as a replica),
# their max / mean, and how many regions and servers a range read of 1 % of the names asks.
#
# Knobs (environment): KEYS=20000 MIN_OBJECTS=1000 SETTLE_S=5 PREFIX=user OUT=$(mktemp -d)
#   SERVER_CPU= (the taskset CPU list of `tessera dev`; unset: unpinned, as it counts objects,
#   not time) TESSERA_BIN=path (skips the build). The summary's "provenance" (commit, binary,
#   pin, date) comes from scripts/benchkit.py, as every benchmark script's does.
# Needs: cargo, python3. Only 127.0.0.1 is used.
set -euo pipefail

cd "$(dirname "$0")/.."
for tool in cargo python3; do
    command -v "$tool" >/dev/null || { echo "bench-splits.sh: $tool not found" >&2; exit 2; }
done
KEYS=${KEYS:-20000}
MIN_OBJECTS=${MIN_OBJECTS:-1000}
SETTLE_S=${SETTLE_S:-5}
PREFIX=${PREFIX:-user}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

TESSERA="$(python3 scripts/benchkit.py bin bench-splits.sh)" || exit 1
SERVER_CPU=${SERVER_CPU:-}
KIT=scripts/benchkit.py
read -ra PIN_SERVER <<<"$(python3 "$KIT" pin "$SERVER_CPU")"

free_port() {
    python3 "$KIT" port
}

python3 - "$KEYS" "$PREFIX" > "$OUT/users.jsonl" <<'PY'
import json, random, sys
random.seed(7)
names = random.sample(range(10_000_000), int(sys.argv[1]))
for n in names:
    print(json.dumps({"name": f"{sys.argv[2]}{n:07d}", "age": n % 90}))
PY

run() {
    local label=$1 period=$2
    local port dir pid
    port=$(free_port)
    dir="$OUT/$label"
    rm -rf "$dir"
    "${PIN_SERVER[@]}" "$TESSERA" dev --servers 5 --replicas 2 --data-dir "$dir" --listen "127.0.0.1:$port" \
        --split-period-s "$period" --split-min-objects "$MIN_OBJECTS" > "$OUT/$label.log" 2>&1 &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' RETURN
    for _ in $(seq 100); do
        grep -q ready "$OUT/$label.log" && break
        sleep 0.1
    done
    export TESSERA_ADDR="127.0.0.1:$port"
    echo "space users key string name attributes int age create 16 partitions tolerate 1 failure placement ordered" \
        | "$TESSERA" add-space
    # Failed puts (their error lines are kept beside the count).
    "$TESSERA" put-many users < "$OUT/users.jsonl" | grep -v '"ok":true' > "$OUT/$label.errors" || true
    wc -l < "$OUT/$label.errors" > "$OUT/$label.failed"
    # Settled: the key regions (loads and replicas) unchanged for SETTLE_S seconds.
    local last="" now="" same=0
    while [ "$same" -lt "$SETTLE_S" ]; do
        sleep 1
        now=$("$TESSERA" key-regions users 2>/dev/null || true)
        if [ -n "$now" ] && [ "$now" = "$last" ]; then same=$((same + 1)); else same=0; fi
        last=$now
    done
    echo "$now" > "$OUT/$label.regions"
    "$TESSERA" get-range users --from "${PREFIX}2000000" --to "${PREFIX}2100000" --explain > "$OUT/$label.explain"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    trap - RETURN
}

echo "bench-splits.sh: splits off" >&2
run off 0
echo "bench-splits.sh: splits on" >&2
run on 1

python3 - "$OUT" "$KEYS" "$MIN_OBJECTS" "$PREFIX" "$TESSERA" "$SERVER_CPU" <<'PY'
import json, statistics, sys
sys.path.insert(0, "scripts")
import benchkit
out, keys, min_objects = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
summary = {"keys": keys, "min_objects": min_objects, "servers": 5, "replicas": 2,
           "prefix": sys.argv[4]}
for label in ("off", "on"):
    led, held, regions, nonempty, splits = {}, {}, 0, 0, 0
    for line in open(f"{out}/{label}.regions"):
        f = line.split()
        if f[0] == "split:":
            splits += 1
            continue
        if f[0] == "region":
            continue
        regions += 1
        objects = int(f[1])
        nonempty += objects > 0
        servers = f[3].split(",")
        led[servers[0]] = led.get(servers[0], 0) + objects
        for s in servers:
            held[s] = held.get(s, 0) + objects
    for s in map(str, range(1, 6)):
        led.setdefault(s, 0)
        held.setdefault(s, 0)
    explain = json.load(open(f"{out}/{label}.explain"))
    summary[f"splits_{label}"] = {
        "failed_puts": int(open(f"{out}/{label}.failed").read().strip() or 0),
        "regions": regions,
        "regions_holding_objects": nonempty,
        "splits": splits,
        "objects_led_per_server": dict(sorted(led.items())),
        "led_max_over_mean": round(max(led.values()) / statistics.mean(led.values()), 2),
        "objects_held_per_server": dict(sorted(held.items())),
        "held_max_over_mean": round(max(held.values()) / statistics.mean(held.values()), 2),
        "range_1pct_regions": explain["regions_contacted"],
        "range_1pct_servers": explain["servers_contacted"],
    }
benchkit.stamp(summary, bin_=sys.argv[5], server_cpu=sys.argv[6], client_cpu="")
print(json.dumps(summary, indent=2))
PY
