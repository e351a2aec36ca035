#!/usr/bin/env python3
"""Who answers the gets of a cluster (issue 34, docs/benchmarks.md "Reads from every replica").

Starts `tessera dev --servers 4 --replicas 2` (one process: four servers, K = 2, one
coordinator; re-cuts and splits off) pinned to SERVER_CPU, loads RECORDS objects with YCSB's
load phase, then for each of RUNS rounds and each read mode (`--read-from leader`, `any`, the
order alternating) runs two read-only phases with `tessera bench` (16 tasks, one client,
pinned to CLIENT_CPU):
  zipf  YCSB C over the RECORDS keys (zipfian, the hottest keys read most), DURATION_S;
  hot   YCSB C with --records 1: every get reads the hottest key, HOT_DURATION_S;
and one phase with writes:
  mixed YCSB A over the RECORDS keys (half gets, half updates, zipfian), DURATION_S: the hot
        keys' gets meet updates still under way, which a replica answers only once they have
        come back from the chain's tail, or sends to the key region's last replica.
Around each phase it reads every server's count of gets answered (`tessera_requests_total
{op="get"}` on the `--http` port) and reports each server's share of the phase's gets, and the
gets per second the client saw. The issue's target: with any-replica reads, the server leading
the hottest key answers at most 1/K + 10 % of the gets of it (the `hot` phase's largest share).

Prints a summary (medians of RUNS) on stdout and the raw figures as JSON after it.
Knobs (environment): RECORDS=20000 RUNS=3 DURATION_S=10 HOT_DURATION_S=5 THREADS=16
SERVER_CPU=0 CLIENT_CPU=1 QUIET_CORES=0.3 QUIET_MAX_WAIT=300 OUT=$(mktemp -d)
TESSERA_BIN=path (else this checkout's release build);
CLIENT_BIN=path runs the benchmark client from another build than the cluster (to measure a
server from before reads went to every replica: MODES=leader with this checkout's client);
MODES="leader any" (the read modes measured).
"""
import json, os, re, subprocess, sys, tempfile, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchkit as kit  # noqa: E402

RECORDS = int(os.environ.get("RECORDS", "20000"))
RUNS = int(os.environ.get("RUNS", "3"))
DURATION_S = float(os.environ.get("DURATION_S", "10"))
HOT_DURATION_S = float(os.environ.get("HOT_DURATION_S", "5"))
THREADS = int(os.environ.get("THREADS", "16"))
SERVER_CPU, CLIENT_CPU = kit.cpus("0", "1")
MODES = os.environ.get("MODES", "leader any").split()
K = 2

GETS = re.compile(r'^tessera_requests_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$')


def gets_by_server(http):
    """Gets each server answered so far (any status), from the Prometheus text."""
    text = urllib.request.urlopen(f"http://{http}/metrics", timeout=10).read().decode()
    counts = {}
    for line in text.splitlines():
        m = GETS.match(line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m["labels"]))
        if labels.get("op") == "get":
            counts[labels["server"]] = counts.get(labels["server"], 0) + float(m["value"])
    return counts


def bench(url, *args, workload="c"):
    client = os.environ.get("CLIENT_BIN") or kit.BIN
    cmd = [*kit.pin(CLIENT_CPU), client, "bench", "--target", url, "-w", workload,
           "--threads", str(THREADS), "--progress", "never", *args]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"bench-replica-reads: {' '.join(cmd)} failed:\n{out.stderr}")
    return json.loads(out.stdout[out.stdout.index("{"):])


def phase(url, http, mode, records, seconds, workload="c"):
    before = gets_by_server(http)
    report = bench(url, "--records", str(records), "--phase", "run", "--read-from", mode,
                   "--operations", "100000000", "--duration-s", str(seconds), workload=workload)
    after = gets_by_server(http)
    delta = {s: after.get(s, 0) - before.get(s, 0) for s in after}
    total = sum(delta.values()) or 1
    return {
        "gets_per_s": report["run"]["overall_throughput"],
        "errors": report["run"]["errors"],
        "share": {s: round(n / total, 3) for s, n in sorted(delta.items())},
        "largest_share": round(max(delta.values()) / total, 3),
        "p99_us": {op: r["p99_us"] for op, r in report["run"]["ops"].items()},
    }


def main():
    out = os.environ.get("OUT") or tempfile.mkdtemp(prefix="tessera-replica-reads.")
    binary = os.environ.get("TESSERA_BIN")
    if not binary:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "tessera"], check=True)
        binary = os.path.abspath("target/release/tessera")
    kit.configure("bench-replica-reads", out, binary, SERVER_CPU, float(os.environ.get("QUIET_CORES", 0.3)),
                  float(os.environ.get("QUIET_MAX_WAIT", 300)), CLIENT_CPU)
    http = f"127.0.0.1:{kit.free_port()}"
    cluster = kit.Tessera("cluster4k2", ["--servers", "4", "--replicas", str(K), "--coordinators",
                                         "1", "--recut-period-s", "0", "--split-period-s", "0",
                                         "--http", http])
    results = {mode: [] for mode in MODES}
    try:
        kit.log(f"loading {RECORDS} records")
        bench(cluster.url, "--records", str(RECORDS), "--phase", "load")
        for run in range(RUNS):
            for mode in MODES if run % 2 == 0 else MODES[::-1]:
                quiet = kit.wait_quiet(cluster.pid)
                zipf = kit.stamp(phase(cluster.url, http, mode, RECORDS, DURATION_S), quiet)
                hot = kit.stamp(phase(cluster.url, http, mode, 1, HOT_DURATION_S), quiet)
                quiet = kit.wait_quiet(cluster.pid)
                mixed = kit.stamp(phase(cluster.url, http, mode, RECORDS, DURATION_S, workload="a"), quiet)
                kit.log(f"run {run + 1} {mode}: zipf {zipf}, hot {hot}, mixed {mixed}")
                results[mode].append({"zipf": zipf, "hot": hot, "mixed": mixed})
    finally:
        cluster.stop()
    print(f"4 servers, K={K}, {RECORDS} records, {THREADS} tasks of one client; medians of {RUNS}")
    print(f"{'read from':<10} {'zipf gets/s':>12} {'zipf largest share':>19} "
          f"{'hot gets/s':>11} {'hot largest share':>18} {'YCSB A ops/s':>13} "
          f"{'A get p99 us':>13} {'A update p99 us':>16}")
    for mode, runs in results.items():
        m = lambda f: kit.med([f(r) for r in runs])
        print(f"{mode:<10} {m(lambda r: r['zipf']['gets_per_s']):>12} "
              f"{kit.statistics.median([r['zipf']['largest_share'] for r in runs]):>19.3f} "
              f"{m(lambda r: r['hot']['gets_per_s']):>11} "
              f"{kit.statistics.median([r['hot']['largest_share'] for r in runs]):>18.3f} "
              f"{m(lambda r: r['mixed']['gets_per_s']):>13} "
              f"{m(lambda r: r['mixed']['p99_us'].get('read', 0)):>13} "
              f"{m(lambda r: r['mixed']['p99_us'].get('update', 0)):>16}")
    target = 1 / K + 0.10
    if "any" not in results:
        print(json.dumps(results))
        return
    hot_any = kit.statistics.median([r["hot"]["largest_share"] for r in results["any"]])
    print(f"target: the hottest key's leader answers at most {target:.2f} of its gets with any-replica "
          f"reads: {'met' if hot_any <= target else 'missed'} ({hot_any:.3f})")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
