#!/usr/bin/env bash
# The Twitter workload of seed 003 §3.1 (docs/benchmarks.md "Placements: the Twitter
# workload"; issue "Correlation-aware placement" item 4), end to end: builds the release
# binary, then
#
#  * live: for K = 1 and K = 3 replicas, each placement of the tweets (random, ordered,
#    tagged) and, with K = 3, both fan-outs (the fewest servers, one replica per region), starts
#    a fresh `tessera dev --servers 5 --replicas K` (one process, 5 servers and a coordinator)
#    on a free loopback port with a fresh data directory, loads users and tweets, and runs
#    Table 1's operation mix with `tessera bench -w twitter`;
#  * routed: the same operations routed over computed clusters of 100 and 200 servers (the
#    sizes seed 003 simulated), K = 1 and 3, each placement, without running any server
#    (`--twitter-route-servers`);
#
# and prints a JSON summary on stdout: per configuration and operation the medians over RUNS
# runs of throughput, p50 and p99 latency, servers contacted and requests sent (fewest-servers
# and one-replica-per-region). Progress goes to stderr; raw reports go to $OUT/raw.json.
#
# Usage: scripts/bench-twitter.sh [live] [routed]      (default: both)
#
# Knobs (environment):
#   USERS=2000 TWEETS=10000     the follow graph's users and the tweets loaded first
#   OPS=20000                   operations per live run
#   DURATION_S=20               a live run stops after this many seconds if OPS are not done
#   THREADS=16                  closed-loop tasks sharing one client
#   PARTITIONS=32               regions per subspace of a live run's spaces
#   ROUTED_OPS=20000            operations routed per computed cluster
#   RUNS=3                      live runs per configuration; the summary quotes medians
#   SERVER_CPU= CLIENT_CPU=     taskset CPU lists of `tessera dev` and the bench client (unset:
#                               unpinned; five servers in one process would share one core)
#   QUIET_CORES=0.3 QUIET_MAX_WAIT=600   wait for a quiet machine before each live run
#   OUT=$(mktemp -d)            data directories, logs and raw.json
#   TESSERA_BIN=path            use this binary instead of building one
#
# Needs: cargo, python3; taskset if pinning. Only 127.0.0.1 is used.
set -euo pipefail

cd "$(dirname "$0")/.."
for tool in python3; do
    command -v "$tool" >/dev/null || { echo "bench-twitter.sh: $tool not found" >&2; exit 2; }
done

BIN="$(python3 scripts/benchkit.py bin bench-twitter.sh)" || exit 1
export BIN
export OUT="${OUT:-$(mktemp -d /tmp/tessera-bench-twitter.XXXXXX)}"
mkdir -p "$OUT"
echo "bench-twitter.sh: working directory $OUT" >&2

exec python3 - "$@" <<'PY'
import json, os, signal, statistics, subprocess, sys

sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import benchkit
from benchkit import Tessera, log, pin, wait_quiet

BIN, OUT = os.environ["BIN"], os.environ["OUT"]
USERS = int(os.environ.get("USERS", 2000))
TWEETS = int(os.environ.get("TWEETS", 10000))
OPS = int(os.environ.get("OPS", 20000))
DURATION_S = float(os.environ.get("DURATION_S", 20))
THREADS = int(os.environ.get("THREADS", 16))
PARTITIONS = int(os.environ.get("PARTITIONS", 32))
ROUTED_OPS = int(os.environ.get("ROUTED_OPS", 20000))
RUNS = int(os.environ.get("RUNS", 3))
SERVER_CPU, CLIENT_CPU = benchkit.cpus("", "")
benchkit.configure("bench-twitter.sh", OUT, BIN, SERVER_CPU, float(os.environ.get("QUIET_CORES", 0.3)),
                   float(os.environ.get("QUIET_MAX_WAIT", 600)), CLIENT_CPU)
parts = sys.argv[1:] or ["live", "routed"]
for p in parts:
    if p not in ("live", "routed"):
        sys.exit(f"bench-twitter.sh: unknown part {p!r} (live, routed)")
PLACEMENTS = ["random", "ordered", "tagged"]
FIELDS = ["throughput", "p50_us", "p99_us", "servers_fewest", "servers_each_region",
          "requests_fewest", "requests_each_region", "returned"]

def _raise(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")
signal.signal(signal.SIGTERM, _raise)
signal.signal(signal.SIGHUP, _raise)

def bench(args):
    out = subprocess.run([*pin(CLIENT_CPU), BIN, "bench", "-w", "twitter", "--progress", "never",
                          "--twitter-users", str(USERS)] + args,
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["twitter"]

def medians(reports):
    ops = {}
    for name in reports[0]["ops"]:
        rows = [r["ops"][name] for r in reports if name in r["ops"]]
        ops[name] = {f: statistics.median(row[f] for row in rows) for f in FIELDS}
    return ops

raw, summary = {"live": [], "routed": []}, {"live": {}, "routed": {}}
try:
    if "live" in parts:
        for k in (1, 3):
            for placement in PLACEMENTS:
                for fanout in (["fewest", "each-region"] if k > 1 else ["fewest"]):
                    name = f"k{k}-{placement}-{fanout}"
                    reports = []
                    for run in range(RUNS):
                        log(f"live {name} run {run + 1}/{RUNS}")
                        dev = Tessera(name, ["--servers", "5", "--replicas", str(k)])
                        try:
                            quiet = wait_quiet(dev.pid)
                            r = bench(["--target", dev.url,
                                       "--twitter-placement", placement,
                                       "--twitter-tolerate", str(k - 1),
                                       "--twitter-fanout", fanout,
                                       "--twitter-partitions", str(PARTITIONS),
                                       "--records", str(TWEETS), "--operations", str(OPS),
                                       "--duration-s", str(DURATION_S),
                                       "--threads", str(THREADS), "--seed", str(run + 1)])
                        finally:
                            dev.stop(signal.SIGINT)
                        raw["live"].append(benchkit.stamp({"config": name, "run": run, "report": r}, quiet))
                        reports.append(r)
                    summary["live"][name] = {
                        "servers": reports[0]["servers"],
                        "ops_per_s": statistics.median(
                            sum(o["count"] for o in r["ops"].values()) / r["elapsed_s"]
                            for r in reports),
                        "ops": medians(reports)}
    if "routed" in parts:
        for n in (100, 200):
            for k in (1, 3):
                for placement in PLACEMENTS:
                    name = f"n{n}-k{k}-{placement}"
                    log(f"routed {name}")
                    r = bench(["--twitter-route-servers", str(n),
                               "--twitter-partitions", str(2 * n),
                               "--twitter-placement", placement,
                               "--twitter-tolerate", str(k - 1),
                               "--records", str(TWEETS), "--operations", str(ROUTED_OPS)])
                    raw["routed"].append(benchkit.stamp({"config": name, "report": r}))
                    summary["routed"][name] = {
                        op: {f: round(v[f], 2) for f in FIELDS if "servers" in f or "requests" in f}
                        for op, v in r["ops"].items()}
finally:
    with open(os.path.join(OUT, "raw.json"), "w") as f:
        json.dump(raw, f, indent=1)

summary["parameters"] = {"users": USERS, "tweets": TWEETS, "ops": OPS, "threads": THREADS,
                         "partitions": PARTITIONS, "runs": RUNS, "routed_ops": ROUTED_OPS}
json.dump(summary, sys.stdout, indent=1)
print()
PY
