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
Knobs (environment): OPS=20000 RUNS=3 KEYS=1000 INFLIGHT=1,16,256,1024
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List

import tesseradb
import tesseradb.aio

OPS = int(os.environ.get("OPS", "20000"))
RUNS = int(os.environ.get("RUNS", "3"))
KEYS = int(os.environ.get("KEYS", "1000"))
INFLIGHT = [int(n) for n in os.environ.get("INFLIGHT", "1,16,256,1024").split(",")]


def start_dev(binary: str, data: str) -> "tuple[subprocess.Popen[bytes], int]":
    process = subprocess.Popen(
        [binary, "--log", "error", "dev", "--listen", "127.0.0.1:0", "--http", "off",
         "--fsync", "never", "--data-dir", data],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    port = int(re.search(r"ready on [0-9.]+:(\d+)", line).group(1))  # type: ignore[union-attr]
    return process, port


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
    process, port = start_dev(binary, data)
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
        for r in range(RUNS):
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
        print(json.dumps({"ops": OPS, "runs": runs, "median_ops_per_s": medians,
                          "aio_to_handles": ratios,
                          "aio_coro_to_handles": coroutine_ratios, "aio_to_aio_per_op": gains}, indent=1))
    finally:
        process.terminate()
        process.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
