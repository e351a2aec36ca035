#!/usr/bin/env python3
"""The Python client's three ways of waiting, against one `tessera dev` (issue 14, item 6):
plain sync `get`/`put` one at a time, the native handles (`async_get(...)` then `.wait()`, N in
flight), asyncio (`tesseradb.aio` with `asyncio.gather` of the methods' Answers, N in flight:
completions handed to the loop in batches), the same with each operation wrapped in a coroutine
of its own (`aio-coro`: what gather costs when it must make a task of each) and, as the
baseline, asyncio with one loop wake-up per operation (the native `call_async` the aio client
used before), RUNS runs each, interleaved. Prints JSON: every run's operations per second, each
way's median, asyncio's ratio to the handles and to the baseline at the same N.

Usage: TESSERA_BIN=target/release/tessera .venv/bin/python scripts/bench-python-aio.py
Knobs (environment): OPS=20000 RUNS=3 KEYS=1000 INFLIGHT=1,16,256,1024, SERVER_CPU= CLIENT_CPU=
(unset: unpinned; the client is this process), QUIET_CORES=0.3 QUIET_MAX_WAIT=600 (wait for a
quiet machine before each round). The server, pinning, the wait and the JSON's "provenance" are
scripts/benchkit.py's, as every benchmark script's are.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List

import tesseradb
import tesseradb.aio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchkit  # noqa: E402

OPS = int(os.environ.get("OPS", "20000"))
RUNS = int(os.environ.get("RUNS", "3"))
KEYS = int(os.environ.get("KEYS", "1000"))
INFLIGHT = [int(n) for n in os.environ.get("INFLIGHT", "1,16,256,1024").split(",")]


def cpu_list(spec: str) -> "set[int]":
    """taskset's CPU list syntax ("0", "0,2", "1-3") as a set."""
    cpus: "set[int]" = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def timed(run: Callable[[], None]) -> float:
    started = time.perf_counter()
    run()
    return OPS / (time.perf_counter() - started)


def sync_way(client: tesseradb.Client, op: str) -> Callable[[], None]:
    def run() -> None:
        for i in range(OPS):
            key = f"k{i % KEYS}"
            if op == "get":
                client.get("b", key)
            else:
                client.put("b", key, {"n": i})

    return run


def handle_way(client: tesseradb.Client, op: str, inflight: int) -> Callable[[], None]:
    def run() -> None:
        for start in range(0, OPS, inflight):
            handles = []
            for i in range(start, min(start + inflight, OPS)):
                key = f"k{i % KEYS}"
                if op == "get":
                    handles.append(client.async_get("b", key))
                else:
                    handles.append(client.async_put("b", key, {"n": i}))
            for h in handles:
                h.wait()

    return run


def aio_way(port: int, op: str, inflight: int) -> Callable[[], None]:
    async def main() -> None:
        client = await tesseradb.aio.connect("127.0.0.1", port)
        for start in range(0, OPS, inflight):
            batch = []
            for i in range(start, min(start + inflight, OPS)):
                key = f"k{i % KEYS}"
                if op == "get":
                    batch.append(client.get("b", key))
                else:
                    batch.append(client.put("b", key, {"n": i}))
            await asyncio.gather(*batch)

    return lambda: asyncio.run(main())


def aio_coroutine_way(port: int, op: str, inflight: int) -> Callable[[], None]:
    async def one(client: tesseradb.aio.Client, i: int) -> None:
        key = f"k{i % KEYS}"
        if op == "get":
            await client.get("b", key)
        else:
            await client.put("b", key, {"n": i})

    async def main() -> None:
        client = await tesseradb.aio.connect("127.0.0.1", port)
        for start in range(0, OPS, inflight):
            await asyncio.gather(*(one(client, i) for i in range(start, min(start + inflight, OPS))))

    return lambda: asyncio.run(main())


def aio_per_operation_way(port: int, op: str, inflight: int) -> Callable[[], None]:
    """The baseline: asyncio as it was, one event-loop wake-up per operation (the native
    module's call_async, through pyo3-async-runtimes)."""
    from tesseradb import _requests as R

    async def one(client: tesseradb.aio.Client, i: int) -> None:
        key = f"k{i % KEYS}"
        request = R.get("b", key) if op == "get" else R.put("b", key, {"n": i}, None)
        request.done(await client._native.call_async(request.op, request.args))  # type: ignore[union-attr]

    async def main() -> None:
        client = await tesseradb.aio.connect("127.0.0.1", port)
        for start in range(0, OPS, inflight):
            await asyncio.gather(*(one(client, i) for i in range(start, min(start + inflight, OPS))))

    return lambda: asyncio.run(main())


def main() -> None:
    binary = os.environ.get("TESSERA_BIN") or shutil.which("tessera") or "target/release/tessera"
    data = tempfile.mkdtemp(prefix="tessera-bench-aio-")
    server_cpu, client_cpu = benchkit.cpus("", "")
    benchkit.configure("bench-python-aio", data, binary, server_cpu,
                       float(os.environ.get("QUIET_CORES", 0.3)),
                       float(os.environ.get("QUIET_MAX_WAIT", 600)), client_cpu)
    if benchkit.pin(client_cpu):
        # The client is this process: pin it as taskset would.
        os.sched_setaffinity(0, cpu_list(client_cpu))
    server = benchkit.Tessera("dev", ["--log", "error", "--http", "off", "--fsync", "never"])
    port = int(server.addr.rsplit(":", 1)[1])
    try:
        admin = tesseradb.Admin("127.0.0.1", port)
        admin.add_space("space b key k attributes int n")
        client = tesseradb.Client("127.0.0.1", port)
        for i in range(KEYS):
            client.put("b", f"k{i}", {"n": i})
        ways: Dict[str, Callable[[], None]] = {}
        for op in ["get", "put"]:
            ways[f"{op} sync"] = sync_way(client, op)
            for n in INFLIGHT:
                ways[f"{op} handles x{n}"] = handle_way(client, op, n)
                ways[f"{op} aio x{n}"] = aio_way(port, op, n)
                ways[f"{op} aio-coro x{n}"] = aio_coroutine_way(port, op, n)
                ways[f"{op} aio-per-op x{n}"] = aio_per_operation_way(port, op, n)
        runs: Dict[str, List[float]] = {name: [] for name in ways}
        quiet: List[float] = []
        for r in range(RUNS):
            quiet.append(benchkit.wait_quiet(server.pid))
            for name, run in ways.items():
                runs[name].append(round(timed(run)))
                print(f"bench-python-aio: run {r + 1}: {name}: {runs[name][-1]}/s", file=sys.stderr)
        medians = {name: statistics.median(v) for name, v in runs.items()}
        ratios = {
            f"{op} x{n}": round(medians[f"{op} aio x{n}"] / medians[f"{op} handles x{n}"], 3)
            for op in ["get", "put"]
            for n in INFLIGHT
        }
        coroutine_ratios = {
            f"{op} x{n}": round(medians[f"{op} aio-coro x{n}"] / medians[f"{op} handles x{n}"], 3)
            for op in ["get", "put"]
            for n in INFLIGHT
        }
        gains = {
            f"{op} x{n}": round(medians[f"{op} aio x{n}"] / medians[f"{op} aio-per-op x{n}"], 3)
            for op in ["get", "put"]
            for n in INFLIGHT
        }
        print(json.dumps(benchkit.stamp({"ops": OPS, "runs": runs, "median_ops_per_s": medians,
                                         "aio_to_handles": ratios,
                                         "aio_coro_to_handles": coroutine_ratios, "aio_to_aio_per_op": gains},
                                        max(quiet)), indent=1))
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
