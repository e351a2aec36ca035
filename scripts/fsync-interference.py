#!/usr/bin/env python3
"""Does a log's fdatasync wait behind another file's writes on the same disk? (issue 33 item 2)

A write-ahead log of its own only helps an acknowledgement if the stall its fsync suffers
comes from the storage engine (a lock, a shared journal) and not from the disk. This measures
the disk alone, without Tessera: a "log" thread writes 4 KiB in place into a preallocated file
and fdatasyncs it (`benchkit.fdatasync_latencies`), PROBES times and for at least SECONDS,
(a) on an idle disk, then (b) while a "flush" thread writes another file of the same directory
as a storage engine writes a table (TABLE_MB in 1 MiB
writes, then one fsync, again and again), and (c) as (b) with the table fsynced after every
CHUNK_MB (a flush that pushes its data out in small pieces); (b) and (c) once as fast as the
disk takes it, once paced at RATE_MB_S (about what a loaded server's flushes and compactions
write). Prints JSON: per case the log's fdatasync p50/p99/p999/max in µs and the table
throughput in MB/s.

Knobs (environment): DIR=. (the directory measured: put it on the disk you care about)
PROBES=2000 SECONDS=8 TABLE_MB=32 CHUNK_MB=1 RATE_MB_S=20 QUIET_CORES=0.3 QUIET_MAX_WAIT=300
(it waits for a quiet machine first; the JSON's "provenance" is scripts/benchkit.py's, as every
benchmark script's is)
"""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchkit  # noqa: E402
from benchkit import fdatasync_latencies, latency_percentiles  # noqa: E402

DIR = os.environ.get("DIR", ".")
PROBES = int(os.environ.get("PROBES", 2000))
SECONDS = float(os.environ.get("SECONDS", 8))
TABLE_MB = int(os.environ.get("TABLE_MB", 32))
CHUNK_MB = int(os.environ.get("CHUNK_MB", 1))
RATE_MB_S = float(os.environ.get("RATE_MB_S", 20))
MIB = 1 << 20


def flush_tables(path, sync_every_mb, rate, stop, written):
    """Writes tables of TABLE_MB until `stop`, fsyncing every `sync_every_mb`, at most `rate`
    MB/s (None: as fast as it goes)."""
    chunk = os.urandom(MIB)
    start = time.time()
    while not stop.is_set():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for mb in range(1, TABLE_MB + 1):
                if rate:
                    time.sleep(max(0.0, start + written[0] / MIB / rate - time.time()))
                os.write(fd, chunk)
                written[0] += MIB
                if mb % sync_every_mb == 0:
                    os.fsync(fd)
                if stop.is_set():
                    break
        finally:
            os.close(fd)
    os.unlink(path)


def case(sync_every_mb, rate=None):
    log_path = os.path.join(DIR, "interference-log")
    if sync_every_mb is None:
        t0 = time.time()
        lat = fdatasync_latencies(log_path, PROBES, SECONDS)
        return {**latency_percentiles(lat), "seconds": round(time.time() - t0, 1)}
    stop, written = threading.Event(), [0]
    flusher = threading.Thread(
        target=flush_tables,
        args=(os.path.join(DIR, "interference-table"), sync_every_mb, rate, stop, written),
    )
    flusher.start()
    t0 = time.time()
    try:
        lat = fdatasync_latencies(log_path, PROBES, SECONDS)
    finally:
        stop.set()
        flusher.join()
    seconds = time.time() - t0
    return {**latency_percentiles(lat), "seconds": round(seconds, 1),
            "table_mb_per_s": round(written[0] / MIB / seconds, 1)}


def main():
    # No server and no client to pin: only the disk is measured.
    benchkit.configure("fsync-interference", None, None, "", float(os.environ.get("QUIET_CORES", 0.3)),
                       float(os.environ.get("QUIET_MAX_WAIT", 300)), "")
    quiet = benchkit.wait_quiet()
    result = {"dir": os.path.abspath(DIR), "probes": PROBES, "table_mb": TABLE_MB}
    result["idle"] = case(None)
    for rate in (None, RATE_MB_S):
        pace = f"at {rate:g} MB/s" if rate else "at full speed"
        result[f"tables fsynced every {TABLE_MB} MiB {pace}"] = case(TABLE_MB, rate)
        result[f"tables fsynced every {CHUNK_MB} MiB {pace}"] = case(CHUNK_MB, rate)
    print(json.dumps(benchkit.stamp(result, quiet), indent=1))


if __name__ == "__main__":
    main()
