#!/usr/bin/env bash
# Resident memory against data size (docs/benchmarks.md "Resident memory"; issue 12 item 5):
# is a server's memory bounded by its configuration (the block cache) rather than by the data?
#
# For each size in SIZES (default 1 M and 10 M objects), starts a fresh `tessera dev
# --cache-mb CACHE_MB` pinned to SERVER_CPU and loads that many ~100-byte people
# (`tessera bench -w secondary --phase load`, space `people` with subspaces `city` and
# `age, score`: three keyspaces, each holding every object), pinned to CLIENT_CPU. While it
# loads, samples the server's VmRSS, the data directory's size and its table files every
# SAMPLE_S seconds. After the load it waits SETTLE_S seconds (compactions finish), runs
# READ_S seconds of `--query eq2` searches (reads touch the tables' index and filter blocks),
# and records VmRSS and VmHWM (the peak) again. Prints JSON on stdout: per size the peak RSS
# (VmHWM), the RSS after the load and after the reads, the data directory's size (allocated),
# its table files, the load's throughput, the largest sampled RSS and the samples; and the
# ratios of the largest size to the smallest (target: peak ratio <= 1.25 for 10x the data).
#
# Knobs (environment):
#   SIZES="1000000 10000000"  objects loaded, one fresh server per size (smallest first)
#   CACHE_MB=64               tessera dev --cache-mb
#   FSYNC=always              tessera dev --fsync (never loads about 3x faster: more write pressure)
#   DEV_ARGS=                 more flags for tessera dev (e.g. "--recut-period-s 0": no adaptive
#                             re-cut of a subspace during the load)
#   THREADS=16                closed-loop clients of the load
#   SAMPLE_S=5 SETTLE_S=30 READ_S=30
#   SERVER_CPU=0 CLIENT_CPU=1 taskset CPU lists of the server and of the bench client
#   QUIET_CORES=0.3 QUIET_MAX_WAIT=300   wait for a quiet machine before each size's load
#   BIN=                      a tessera binary to use instead of building target/release's
#   OUT=$(mktemp -d)          data directories (removed after each size), logs, raw.json
# 10 M objects take about 3.5 GB on disk and 15 minutes here (2 cores).
# Needs: cargo, python3; taskset if available. Only 127.0.0.1 is used.
set -euo pipefail

cd "$(dirname "$0")/.."
for tool in python3; do
    command -v "$tool" >/dev/null || { echo "bench-memory.sh: $tool not found" >&2; exit 2; }
done
if [ -z "${BIN:-}" ]; then
    echo "bench-memory.sh: cargo build --release --locked -p tessera --features peers" >&2
    cargo build --release --locked -p tessera --features peers >&2
    BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/tessera"
fi
export BIN
export OUT="${OUT:-$(mktemp -d /tmp/tessera-memory.XXXXXX)}"
mkdir -p "$OUT"
echo "bench-memory.sh: working directory $OUT" >&2

exec python3 - <<'PY'
import json, os, subprocess, sys, threading, time

sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
import benchkit
from benchkit import Tessera, log, pin, wait_quiet

BIN = os.environ["BIN"]
OUT = os.environ["OUT"]
SIZES = [int(s) for s in os.environ.get("SIZES", "1000000 10000000").split()]
CACHE_MB = int(os.environ.get("CACHE_MB", 64))
FSYNC = os.environ.get("FSYNC", "always")
DEV_ARGS = os.environ.get("DEV_ARGS", "").split()
THREADS = int(os.environ.get("THREADS", 16))
SAMPLE_S = float(os.environ.get("SAMPLE_S", 5))
SETTLE_S = float(os.environ.get("SETTLE_S", 30))
READ_S = int(os.environ.get("READ_S", 30))
SERVER_CPU, CLIENT_CPU = benchkit.cpus("0", "1")
MIB = 2**20
benchkit.configure("bench-memory.sh", OUT, BIN, SERVER_CPU, float(os.environ.get("QUIET_CORES", 0.3)),
                   float(os.environ.get("QUIET_MAX_WAIT", 300)), CLIENT_CPU)

def status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "Threads"):
                out[k] = int(v.split()[0]) * (1024 if k != "Threads" else 1)
    return out

def disk(path):
    """(allocated bytes, table files) under path."""
    alloc = tables = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                st = os.stat(os.path.join(root, f))
            except OSError:
                continue
            alloc += st.st_blocks * 512
            tables += os.sep + "tables" in root
    return alloc, tables

def bench(url, phase, records, extra=()):
    cmd = [*pin(CLIENT_CPU), BIN, "bench", "--target", url, "-w", "secondary",
           "--phase", phase, "--records", str(records), "--threads", str(THREADS),
           "--progress", "never", "--recut-wait-s", "0", *extra]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"bench-memory.sh: {' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()}")
    return json.loads(res.stdout)[phase]

def measure(size):
    srv = Tessera(f"memory-{size}", ["--cache-mb", str(CACHE_MB), "--fsync", FSYNC] + DEV_ARGS)
    proc, data = srv.proc, os.path.join(srv.dir, "data")
    samples, stop, t0 = [], threading.Event(), time.time()

    def sample():
        while not stop.is_set():
            st = status(proc.pid)
            alloc, tables = disk(data)
            samples.append({"t_s": round(time.time() - t0, 1), "rss_mib": round(st["VmRSS"] / MIB, 1),
                            "anon_mib": round(st["RssAnon"] / MIB, 1),
                            "data_mib": round(alloc / MIB), "tables": tables})
            stop.wait(SAMPLE_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        quiet = wait_quiet(srv.pid)
        log(f"{size}: loading")
        load = bench(srv.url, "load", size)
        after_load = status(proc.pid)
        log(f"{size}: loaded at {load['overall_throughput']:.0f} objects/s, "
            f"RSS {after_load['VmRSS'] / MIB:.0f} MiB, peak {after_load['VmHWM'] / MIB:.0f} MiB")
        time.sleep(SETTLE_S)
        settled = status(proc.pid)
        read = None
        if READ_S > 0:
            read = bench(srv.url, "run", size,
                         ["--query", "eq2", "--duration-s", str(READ_S), "--operations", str(10**9)])
        end = status(proc.pid)
        alloc, tables = disk(data)
    finally:
        stop.set()
        sampler.join()
        srv.stop()  # and its data directory
    r = {"objects": size,
         "peak_rss_mib": round(end["VmHWM"] / MIB, 1),
         "peak_rss_after_load_mib": round(after_load["VmHWM"] / MIB, 1),
         "rss_after_load_mib": round(after_load["VmRSS"] / MIB, 1),
         "rss_settled_mib": round(settled["VmRSS"] / MIB, 1),
         "rss_after_reads_mib": round(end["VmRSS"] / MIB, 1),
         "anon_after_reads_mib": round(end["RssAnon"] / MIB, 1),
         "max_sampled_rss_mib": max(s["rss_mib"] for s in samples),
         "data_dir_mib": round(alloc / MIB),
         "table_files": tables,
         "load_objects_per_s": round(load["overall_throughput"]),
         "load_errors": load["errors"],
         "eq2_searches_per_s": round(read["overall_throughput"]) if read else None,
         "threads": end["Threads"],
         "samples": samples}
    benchkit.stamp(r, quiet)
    log(f"{size}: peak {r['peak_rss_mib']} MiB, after reads {r['rss_after_reads_mib']} MiB, "
        f"data {r['data_dir_mib']} MiB in {tables} tables")
    return r

results = []
for size in SIZES:
    results.append(measure(size))
    with open(os.path.join(OUT, "raw.json"), "w") as f:
        json.dump(results, f, indent=1)
summary = {"config": {"sizes": SIZES, "cache_mb": CACHE_MB, "fsync": FSYNC, "threads": THREADS,
                      "server_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU, "read_s": READ_S,
                      "git": benchkit.git("describe", "--always", "--dirty"), "bin": BIN,
                      "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
           "sizes": {str(r["objects"]): {k: v for k, v in r.items() if k != "samples"} for r in results}}
if len(results) > 1:
    lo, hi = results[0], results[-1]
    ratio = hi["peak_rss_mib"] / lo["peak_rss_mib"]
    summary["ratios"] = {"objects": hi["objects"] / lo["objects"],
                         "peak_rss": round(ratio, 3),
                         "rss_after_load": round(hi["rss_after_load_mib"] / lo["rss_after_load_mib"], 3),
                         "data_dir": round(hi["data_dir_mib"] / lo["data_dir_mib"], 2)}
    summary["target_peak_ratio_le_1.25"] = {"ratio": round(ratio, 3), "met": ratio <= 1.25}
summary["samples"] = {str(r["objects"]): r["samples"] for r in results}
json.dump(summary, sys.stdout, indent=1)
print()
PY
