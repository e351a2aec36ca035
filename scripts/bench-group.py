#!/usr/bin/env python3
"""Searches that answer in bulk, against one `tessera dev` (issue 35, item 2): a count, a sorted
search (limit 10) and a search that each match half of OBJECTS objects, then a group atomic add on
that half and a group delete of the other half, RUNS runs, each on a fresh server. Prints JSON:
every run's times in ms, their medians, and the server's CPU seconds over each run.

The objects are `a` (0..OBJECTS, the subspace) and `b` (a log-normal price, what the sorted
search orders by). Compare two builds by running it with each one's binary and Python client
(`pip install ./python` into a virtualenv of its own).

Usage: TESSERA_BIN=target/release/tessera .venv/bin/python scripts/bench-group.py
Knobs (environment): OBJECTS=50000 ROUNDS=20 (counts and sorted searches timed per run; a
quarter as many searches) RUNS=3, SERVER_CPU=1 CLIENT_CPU=0 (the client is this process),
QUIET_CORES=0.3 QUIET_MAX_WAIT=600 (wait for a quiet machine before each run). The server,
pinning, the wait and the JSON's "provenance" are scripts/benchkit.py's, as every benchmark
script's are.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Tuple

import tesseradb
from tesseradb.predicates import GreaterEqual, LessThan

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchkit  # noqa: E402

OBJECTS = int(os.environ.get("OBJECTS", "50000"))
ROUNDS = int(os.environ.get("ROUNDS", "20"))
RUNS = int(os.environ.get("RUNS", "3"))


def timed(f: Callable[[], Any]) -> Tuple[float, Any]:
    started = time.perf_counter()
    answer = f()
    return (time.perf_counter() - started) * 1000, answer


def one_run(port: int) -> Dict[str, float]:
    """Loads the objects, times every kind once or ROUNDS times, and checks each answer against
    what was loaded."""
    admin = tesseradb.Admin("127.0.0.1", port)
    admin.add_space("space g key k attributes int a, int b subspace a create 16 partitions")
    client = tesseradb.Client("127.0.0.1", port, timeout=600)
    rng = random.Random(1)
    items = {f"k{i}": {"a": i, "b": int(rng.lognormvariate(4, 1))} for i in range(OBJECTS)}
    keys = list(items)
    for start in range(0, OBJECTS, 2000):
        failed = client.multi_put("g", {k: items[k] for k in keys[start:start + 2000]})
        assert not any(failed.values()), failed
    half, other = {"a": LessThan(OBJECTS // 2)}, {"a": GreaterEqual(OBJECTS // 2)}
    top = sorted((items[k]["b"] for k in keys[: OBJECTS // 2]), reverse=True)[:10]
    counts = [timed(lambda: client.count("g", half)) for _ in range(ROUNDS)]
    assert all(n == OBJECTS // 2 for _, n in counts), counts[0]
    sorts = [timed(lambda: client.sorted_search("g", half, "b", 10, "max")) for _ in range(ROUNDS)]
    assert all([o["b"] for o in found] == top for _, found in sorts), sorts[0]
    searches = [timed(lambda: list(client.search("g", half))) for _ in range(max(1, ROUNDS // 4))]
    assert all(len(found) == OBJECTS // 2 for _, found in searches)
    added = timed(lambda: client.group_atomic_add("g", half, {"b": 1}))
    assert added[1] == OBJECTS // 2, added
    deleted = timed(lambda: client.group_del("g", other))
    assert deleted[1] == OBJECTS - OBJECTS // 2, deleted
    assert client.count("g", {}) == OBJECTS // 2
    return {
        "count_ms": statistics.median(t for t, _ in counts),
        "sorted_ms": statistics.median(t for t, _ in sorts),
        "search_half_ms": statistics.median(t for t, _ in searches),
        "group_add_half_ms": added[0],
        "group_del_half_ms": deleted[0],
    }


def main() -> None:
    binary = os.environ.get("TESSERA_BIN") or shutil.which("tessera") or "target/release/tessera"
    data = tempfile.mkdtemp(prefix="tessera-bench-group-")
    server_cpu, client_cpu = benchkit.cpus("1", "0")
    benchkit.configure("bench-group", data, binary, server_cpu,
                       float(os.environ.get("QUIET_CORES", 0.3)),
                       float(os.environ.get("QUIET_MAX_WAIT", 600)), client_cpu)
    if benchkit.pin(client_cpu):
        # The client is this process: pin it as taskset would.
        os.sched_setaffinity(0, {int(c) for c in client_cpu.split(",")})
    runs: List[Dict[str, float]] = []
    quiet: List[float] = []
    try:
        for r in range(RUNS):
            server = benchkit.Tessera(f"dev{r}", ["--log", "error", "--http", "off"])
            try:
                quiet.append(benchkit.wait_quiet(server.pid))
                before = benchkit.cpu_s(server.pid)
                run = one_run(int(server.addr.rsplit(":", 1)[1]))
                run["server_cpu_s"] = benchkit.cpu_s(server.pid) - before
            finally:
                server.stop()
            runs.append({k: round(v, 2) for k, v in run.items()})
            print(f"bench-group: run {r + 1}: {runs[-1]}", file=sys.stderr)
        medians = {k: statistics.median(run[k] for run in runs) for k in runs[0]}
        print(json.dumps(benchkit.stamp({"objects": OBJECTS, "rounds": ROUNDS, "runs": runs,
                                         "medians": medians}, max(quiet)), indent=1))
    finally:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
