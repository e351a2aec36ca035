#!/usr/bin/env python3
"""How evenly a space's objects spread over regions and servers, before and after
`tessera recut` (which cuts subspaces' int and float axes again at their values' quantiles).

    scripts/bench-spread.py [--objects 100000] [--seed 1] [--bin target/release/tessera]
                            [--out FILE.json] [--skip-mixed]

On a fresh `tessera dev --servers 5 --replicas 2` (temporary data directory and free ports,
removed after, also on errors and Ctrl-C), the listings of scripts/listings.py (same objects
for the same seed) in the space of docs/cuts.md:

1. loads the objects with `tessera put-many` (seconds, objects/s);
2. for each serving subspace (the key subspace too, marked): regions holding objects of all,
   objects per server max and mean (an object counts on every replica of its region),
   objects led per server max and mean (the region's first replica only), the fullest
   region's share of the subspace's objects beside the target 2/R, and whether every region
   holds data (all from the console's GET /api/regions);
3. for price_cents and created_at, 20 random ranges each selecting 0.1 %, 1 % and 10 % of the
   loaded objects (exact: picked from the sorted values), each given to `tessera explain`:
   median and max of regions and servers contacted, beside the target for 1 %: 2 % of the
   subspace's regions plus one;
4. unless --skip-mixed, a mixed workload of 8 threads (half `tessera count` of a 1 % price
   range, half `tessera put` of a new log-normal price on a random object) for 20 s, during
   `tessera recut listings`, and 20 s after: medians of the operations completed per 1-second
   window in each phase. Every operation is one CLI process, so these are CLI operations per
   second (process start and connection included), not the database's throughput. Failed
   operations (exit 2, or any exit but 0 and 1) are counted as errors; exit 1 (documented:
   "not found or condition failed", which neither command should answer) is counted apart;
5. runs `tessera recut listings` (if step 4 did not), then measures 2 and 3 again.

SERVER_CPU (unset: unpinned, as today) pins `tessera dev`; before the mixed workload it waits
for a quiet machine (QUIET_CORES=0.3, QUIET_MAX_WAIT=600); the JSON's "provenance" (commit,
binary, pin, other cores, date) is scripts/benchkit.py's, as every benchmark script's is.

Prints tables to stdout, progress to stderr, and everything as JSON to --out. Exit status 1
when the re-cut, the load or any operation failed (the results are still printed and
written), 2 when the cluster could not be started.

Python 3.11+, standard library only.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchkit  # noqa: E402  scripts/benchkit.py: pinning, quiet, provenance
from benchkit import free_port, log, pin  # noqa: E402

SPACE = "listings"
DESCRIPTION = (
    "space listings key id attributes string city, int price_cents, int created_at, int age, "
    "float rating subspace price_cents subspace created_at subspace age, rating "
    "subspace city, price_cents create 64 partitions tolerate 1 failure"
)
SERVERS = 5
REPLICAS = 2
RANGE_ATTRIBUTES = ["price_cents", "created_at"]
SELECTIVITIES = [0.001, 0.01, 0.1]
RANGES_EACH = 20
EXPLAIN_THREADS = 4
MIXED_THREADS = 8
MIXED_PHASE_S = 20.0
WINDOW_S = 1.0
STOP_GRACE_S = 30.0
CLI_TIMEOUT_S = 60.0
RECUT_TIMEOUT_S = 1800.0


# ---- pure computations (scripts/test_bench_spread.py) ---------------------------------------


def serving_subspaces(answer):
    """The serving subspaces of an /api/regions answer: [(id, dimensions)], by id."""
    return [(s["subspace"], list(s["dimensions"]))
            for s in sorted(answer["subspaces"], key=lambda s: s["subspace"])
            if s["state"] == "serving"]


def server_loads(regions, servers=()):
    """(stored, led): objects each server holds (a region's objects count on every server of
    its `replicas`) and objects each leads (the first replica only), as {server: objects}.
    `servers` lists servers that hold nothing but count (with 0); a region whose `objects`
    is null (its leader did not answer) counts as 0."""
    stored = {s: 0 for s in servers}
    led = {s: 0 for s in servers}
    for r in regions:
        n = r["objects"] or 0
        for s in r["replicas"]:
            stored[s] = stored.get(s, 0) + n
            led.setdefault(s, 0)
        if r["replicas"]:
            led[r["replicas"][0]] += n
    return stored, led


def fullest_share(regions):
    """The fullest region's objects over all of the subspace's objects; None when none."""
    counts = [r["objects"] or 0 for r in regions]
    total = sum(counts)
    return max(counts) / total if total else None


def spread_summary(regions, servers=()):
    """How one subspace's objects lie over its regions and servers."""
    stored, led = server_loads(regions, servers)
    counts = [r["objects"] or 0 for r in regions]
    n = len(regions)
    return {
        "regions": n,
        "regions_with_objects": sum(1 for c in counts if c > 0),
        "regions_unknown": sum(1 for r in regions if r["objects"] is None),
        "objects": sum(counts),
        "fullest_region_objects": max(counts, default=0),
        "fullest_share": fullest_share(regions),
        "target_fullest_share": 2 / n if n else None,
        "every_region_holds_data": n > 0 and all(c > 0 for c in counts),
        "stored_per_server": {str(s): v for s, v in sorted(stored.items())},
        "stored_max": max(stored.values(), default=0),
        "stored_mean": statistics.fmean(stored.values()) if stored else 0.0,
        "led_per_server": {str(s): v for s, v in sorted(led.items())},
        "led_max": max(led.values(), default=0),
        "led_mean": statistics.fmean(led.values()) if led else 0.0,
    }


def count_between(sorted_values, lo, hi):
    """How many of `sorted_values` lie in [lo, hi]."""
    return bisect.bisect_right(sorted_values, hi) - bisect.bisect_left(sorted_values, lo)


def pick_ranges(sorted_values, fraction, count, rng, tries=200):
    """`count` random ranges [lo, hi] each holding round(fraction * n) of `sorted_values`
    (at least 1): a random run of that many consecutive values, bounded by its first and last.
    Where equal values make that run's bounds take in more, up to `tries` other runs are tried
    and the closest kept; `selected` says how many each range holds."""
    n = len(sorted_values)
    if n == 0:
        return []
    want = max(1, min(n, round(fraction * n)))
    ranges = []
    for _ in range(count):
        best = None
        for _ in range(tries):
            i = rng.randrange(n - want + 1)
            lo, hi = sorted_values[i], sorted_values[i + want - 1]
            got = count_between(sorted_values, lo, hi)
            if best is None or abs(got - want) < abs(best["selected"] - want):
                best = {"lo": lo, "hi": hi, "selected": got}
            if got == want:
                break
        ranges.append(best)
    return ranges


def summary(values):
    """Median, max, min and how many; None for each of an empty list."""
    values = list(values)
    if not values:
        return {"n": 0, "median": None, "max": None, "min": None}
    return {"n": len(values), "median": statistics.median(values), "max": max(values),
            "min": min(values)}


def regions_target(regions):
    """The target for a 1 % range: 2 % of the subspace's regions plus one."""
    return 0.02 * regions + 1


def window_rates(times, start, end, width=WINDOW_S):
    """Operations per second in each full window of `width` seconds from `start` up to `end`,
    counting the operations completed (`times`) in it; a phase shorter than one window gives
    one rate over its whole length; an empty phase, none."""
    span = end - start
    if span <= 0:
        return []
    windows = int(span // width)
    if windows == 0:
        return [sum(1 for t in times if start <= t < end) / span]
    counts = [0] * windows
    for t in times:
        if start <= t < start + windows * width:
            counts[int((t - start) // width)] += 1
    return [c / width for c in counts]


def phase_summary(ops, start, end, width=WINDOW_S):
    """One phase of the mixed workload: its seconds, windows, median ops/s, and what was
    completed in it. `ops` are (completion time, kind, outcome), outcome "ok", "negative"
    (exit 1) or "error"."""
    inside = [o for o in ops if start <= o[0] < end]
    rates = window_rates([o[0] for o in inside], start, end, width)
    return {
        "seconds": round(end - start, 3),
        "windows": len(rates),
        "ops_per_s_median": statistics.median(rates) if rates else None,
        "ops_per_s_windows": rates,
        "ops": len(inside),
        "count_ops": sum(1 for o in inside if o[1] == "count"),
        "put_ops": sum(1 for o in inside if o[1] == "put"),
        "errors": sum(1 for o in inside if o[2] == "error"),
        "negative": sum(1 for o in inside if o[2] == "negative"),
    }


def outcome(returncode):
    """A CLI operation's exit status as "ok" (0), "negative" (1: not found or condition
    failed, as the README documents) or "error" (2, any other, or None: timed out)."""
    if returncode == 0:
        return "ok"
    if returncode == 1:
        return "negative"
    return "error"


def explain_summary(answers, target):
    """The explain answers of one attribute and selectivity: regions and servers contacted
    (median, max), the subspaces chosen (by dimensions, how often) and the target."""
    return {
        "ranges": len(answers),
        "regions_contacted": summary(a["regions_contacted"] for a in answers),
        "servers_contacted": summary(a["servers_contacted"] for a in answers),
        "subspace_regions": summary(a["subspace_regions"] for a in answers),
        "chosen": dict(sorted(_tally(f"{a['subspace']} {','.join(a['dimensions'])}"
                                     for a in answers).items())),
        "target_regions": target,
    }


def _tally(items):
    out = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


# ---- formatting -----------------------------------------------------------------------------


def _pct(x, digits=1):
    return "–" if x is None else f"{100 * x:.{digits}f} %"


def _num(x):
    if x is None:
        return "–"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:.1f}"
    return str(int(x))


def spread_table(phases):
    """The spread of each phase's subspaces as text lines."""
    head = (f"{'phase':<7} {'subspace':<22} {'regions w/ data':>15} {'stored/server max':>17} "
            f"{'mean':>8} {'led/server max':>14} {'mean':>8} {'fullest':>8} {'2/R':>6} "
            f"{'all hold':>8}")
    lines = [head, "-" * len(head)]
    for phase, subspaces in phases:
        for s in subspaces:
            name = f"{s['subspace']} {','.join(s['dimensions'])}" + (" (key)" if s["subspace"] == 0 else "")
            sp = s["spread"]
            held = f"{sp['regions_with_objects']}/{sp['regions']}"
            if sp["regions_unknown"]:
                held += f" ({sp['regions_unknown']}?)"
            lines.append(
                f"{phase:<7} {name:<22} {held:>15} {sp['stored_max']:>17} "
                f"{sp['stored_mean']:>8.0f} {sp['led_max']:>14} {sp['led_mean']:>8.0f} "
                f"{_pct(sp['fullest_share']):>8} {_pct(sp['target_fullest_share']):>6} "
                f"{'yes' if sp['every_region_holds_data'] else 'no':>8}")
    return lines


def ranges_table(phases):
    """The explain summaries of each phase as text lines."""
    head = (f"{'phase':<7} {'attribute':<12} {'select':>6} {'regions med':>11} {'max':>5} "
            f"{'servers med':>11} {'max':>5} {'target':>6}  subspace chosen")
    lines = [head, "-" * len(head)]
    for phase, by_attribute in phases:
        for attribute, by_fraction in by_attribute.items():
            for fraction, e in by_fraction.items():
                target = f"{e['target_regions']:.2f}" if e["target_regions"] is not None else ""
                chosen = ", ".join(f"{k} x{v}" for k, v in e["chosen"].items())
                lines.append(
                    f"{phase:<7} {attribute:<12} {_pct(float(fraction), 1):>6} "
                    f"{_num(e['regions_contacted']['median']):>11} {_num(e['regions_contacted']['max']):>5} "
                    f"{_num(e['servers_contacted']['median']):>11} {_num(e['servers_contacted']['max']):>5} "
                    f"{target:>6}  {chosen}")
    return lines


def mixed_table(mixed):
    head = (f"{'phase':<7} {'seconds':>8} {'windows':>7} {'CLI ops/s median':>16} {'ops':>6} "
            f"{'count':>6} {'put':>6} {'errors':>6} {'exit 1':>6}")
    lines = [head, "-" * len(head)]
    for name in ("before", "during", "after"):
        p = mixed["phases"][name]
        lines.append(
            f"{name:<7} {p['seconds']:>8.1f} {p['windows']:>7} {_num(p['ops_per_s_median']):>16} "
            f"{p['ops']:>6} {p['count_ops']:>6} {p['put_ops']:>6} {p['errors']:>6} {p['negative']:>6}")
    return lines


def recut_lines(recut):
    lines = [f"tessera recut {SPACE}: exit {recut['exit']}, {recut['seconds']:.1f} s"
             + (" (TIMED OUT)" if recut.get("timed_out") else "")]
    for r in recut["subspaces"]:
        if r.get("action") == "recut":
            b, a = r.get("before", {}), r.get("after", {})
            lines.append(
                f"  subspace {r['subspace']} {','.join(r.get('attributes', []))} -> {r['replaced_by']}: "
                f"regions holding objects {b.get('regions_holding_objects')}/{b.get('regions')} -> "
                f"{a.get('regions_holding_objects')}/{a.get('regions')}")
        else:
            lines.append(f"  subspace {r.get('subspace')}: {r.get('action')}")
    if recut["exit"] != 0:
        lines.append("  RE-CUT FAILED; its stderr (progress lines left out: "
                     f"{recut['progress_lines']}):")
        lines += ["    " + l for l in recut["stderr"].splitlines()] or ["    (empty)"]
        if recut.get("status_subspaces") is not None:
            lines.append("  subspaces after it (tessera status --json):")
            for s in recut["status_subspaces"]:
                lines.append(f"    {json.dumps(s)}")
    return lines


# ---- the cluster and the CLI ----------------------------------------------------------------


class Cluster:
    """A `tessera dev` of its own: started by start(), stopped by stop()."""

    def __init__(self, binary, root):
        self.binary, self.root = binary, root
        self.port, self.http = free_port(), free_port()
        while self.http == self.port:
            self.http = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.process = None
        self.out_path = os.path.join(root, "dev.out")
        self.err_path = os.path.join(root, "dev.err")

    def start(self, timeout=120.0):
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.process = subprocess.Popen(
                [*pin(benchkit.SERVER_CPU), self.binary, "dev", "--servers", str(SERVERS), "--replicas", str(REPLICAS),
                 "--data-dir", os.path.join(self.root, "data"), "--listen", self.addr,
                 "--http", f"127.0.0.1:{self.http}", "--recut-period-s", "0"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True)  # Ctrl-C reaches the script, which stops it
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.out_path) as f:
                if "tessera dev: ready on" in f.read():
                    return
            if self.process.poll() is not None:
                raise RuntimeError(f"tessera dev exited {self.process.returncode}:\n{self.tail()}")
            time.sleep(0.1)
        raise RuntimeError(f"tessera dev not ready after {timeout:.0f} s:\n{self.tail()}")

    def tail(self, lines=20):
        try:
            with open(self.err_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self):
        p = self.process
        if p is None or p.poll() is not None:
            return
        started = time.monotonic()
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(STOP_GRACE_S)
            log(f"tessera dev stopped in {time.monotonic() - started:.1f} s")
        except subprocess.TimeoutExpired:
            log(f"tessera dev still running {STOP_GRACE_S:.0f} s after SIGTERM: kill -9")
            p.kill()
            p.wait()

    def cli(self, *args, stdin=None, timeout=CLI_TIMEOUT_S):
        """(exit status or None when it timed out, stdout, stderr, seconds) of one command."""
        started = time.monotonic()
        try:
            r = subprocess.run([self.binary, "--addr", self.addr, *args], input=stdin,
                               capture_output=True, text=True, timeout=timeout)
            return r.returncode, r.stdout, r.stderr, time.monotonic() - started
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            return None, out, err, time.monotonic() - started

    def must(self, *args, stdin=None, timeout=CLI_TIMEOUT_S):
        code, out, err, _ = self.cli(*args, stdin=stdin, timeout=timeout)
        if code != 0:
            raise RuntimeError(f"tessera {' '.join(args)}: exit {code}: {err.strip()}")
        return out

    def regions(self, subspace=None, attempts=40):
        """GET /api/regions of a subspace; retried while the console answers an error or some
        region's leader did not answer (right after a configuration change)."""
        url = f"http://127.0.0.1:{self.http}/api/regions?space={SPACE}"
        if subspace is not None:
            url += f"&subspace={subspace}"
        last = None
        for _ in range(attempts):
            try:
                with urllib.request.urlopen(url, timeout=30) as r:
                    answer = json.load(r)
                if all(x["objects"] is not None for x in answer["regions"]):
                    return answer
                last = f"{sum(x['objects'] is None for x in answer['regions'])} regions unanswered"
            except urllib.error.HTTPError as e:
                last = f"HTTP {e.code}: {e.read().decode(errors='replace').strip()}"
                answer = None
            except (urllib.error.URLError, OSError) as e:
                last, answer = str(e), None
            time.sleep(0.5)
        log(f"GET {url}: still {last} after {attempts} attempts")
        if answer is None:
            raise RuntimeError(f"GET {url}: {last}")
        return answer

    def status(self):
        return json.loads(self.must("status", "--json"))


# ---- the steps ------------------------------------------------------------------------------


def load(cluster, objects):
    lines = "".join(json.dumps(o) + "\n" for o in objects)
    started = time.monotonic()
    code, out, err, _ = cluster.cli("put-many", SPACE, stdin=lines, timeout=3600)
    seconds = time.monotonic() - started
    failed = sum(1 for l in out.splitlines() if l.strip() and not json.loads(l).get("ok"))
    return {"objects": len(objects), "seconds": round(seconds, 3),
            "objects_per_s": round(len(objects) / seconds, 1), "exit": code,
            "failed": failed, "stderr": err.strip()[-2000:]}


def measure_spread(cluster):
    """Every serving subspace's spread, and the cluster's subspaces as status shows them."""
    status = cluster.status()
    servers = [s["id"] for s in status["servers"]]
    space = next(s for s in status["spaces"] if s["name"] == SPACE)
    cut_by_data = {s["id"]: s.get("cut_by_data") for s in space["subspace_list"]}
    listing = cluster.regions()
    out = []
    for subspace, dimensions in serving_subspaces(listing):
        answer = cluster.regions(subspace)
        out.append({"subspace": subspace, "dimensions": dimensions,
                    "cut_by_data": cut_by_data.get(subspace),
                    "intervals": answer["intervals"],
                    "spread": spread_summary(answer["regions"], servers),
                    "region_objects": [r["objects"] for r in answer["regions"]]})
    dropped = [s["subspace"] for s in listing["subspaces"] if s["state"] == "dropped"]
    return out, {"servers": servers, "dropped": dropped,
                 "subspace_list": space["subspace_list"]}


def measure_ranges(cluster, ranges):
    """`tessera explain` of every range; summaries per attribute and selectivity."""
    jobs = [(a, f, r) for a, by_f in ranges.items() for f, rs in by_f.items() for r in rs]

    def explain(job):
        attribute, _, r = job
        return json.loads(cluster.must("explain", SPACE, f"{attribute}>={r['lo']}",
                                       f"{attribute}<={r['hi']}"))

    with ThreadPoolExecutor(EXPLAIN_THREADS) as pool:
        answers = list(pool.map(explain, jobs))
    out = {}
    for attribute, by_f in ranges.items():
        out[attribute] = {}
        for fraction in by_f:
            got = [ans for (a, f, _), ans in zip(jobs, answers) if a == attribute and f == fraction]
            regions = statistics.median(a["subspace_regions"] for a in got) if got else None
            target = regions_target(regions) if fraction == 0.01 and regions else None
            out[attribute][str(fraction)] = explain_summary(
                got, round(target, 4) if target is not None else None)
    return out


def run_recut(cluster):
    started = time.monotonic()
    code, out, err, _ = cluster.cli("recut", SPACE, timeout=RECUT_TIMEOUT_S)
    ended = time.monotonic()
    subspaces = []
    for line in out.splitlines():
        try:
            subspaces.append(json.loads(line))
        except json.JSONDecodeError:
            subspaces.append({"action": f"unparsed: {line}"})
    progress = [l for l in err.splitlines() if "key regions backfilled" in l]
    rest = [l for l in err.splitlines() if "key regions backfilled" not in l]
    result = {"exit": code, "timed_out": code is None, "started": started, "ended": ended,
              "seconds": round(ended - started, 3), "subspaces": subspaces,
              "progress_lines": len(progress), "stderr": "\n".join(rest)[-4000:],
              "stdout": out[-4000:]}
    if code != 0:
        try:
            space = next(s for s in cluster.status()["spaces"] if s["name"] == SPACE)
            result["status_subspaces"] = space["subspace_list"]
            result["status_build"] = space.get("build")
        except Exception as e:  # report what was seen, whatever it is
            result["status_error"] = str(e)
    return result


def mixed_workload(cluster, keys, count_ranges, seed):
    """8 threads of count and put, 20 s before the re-cut, during it and 20 s after."""
    stop = threading.Event()
    ops, lock = [], threading.Lock()
    errors = []

    def worker(i):
        rng = random.Random(f"{seed}-mixed-{i}")
        while not stop.is_set():
            if rng.random() < 0.5:
                kind, r = "count", rng.choice(count_ranges)
                args = ("count", SPACE, f"price_cents>={r['lo']}", f"price_cents<={r['hi']}")
            else:
                kind = "put"
                price = int(math.exp(rng.gauss(math.log(5000), 0.9)))
                args = ("put", SPACE, rng.choice(keys), json.dumps({"price_cents": price}))
            code, _, err, _ = cluster.cli(*args)
            result = outcome(code)
            with lock:
                ops.append((time.monotonic(), kind, result))
                if result != "ok" and len(errors) < 20:
                    errors.append({"op": kind, "exit": code, "stderr": err.strip()[-500:]})

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(MIXED_THREADS)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    try:
        log(f"mixed workload: {MIXED_THREADS} threads, {MIXED_PHASE_S:.0f} s before the re-cut")
        time.sleep(MIXED_PHASE_S)
        box = {}
        recut_thread = threading.Thread(target=lambda: box.setdefault("recut", run_recut(cluster)),
                                        daemon=True)
        log("mixed workload: tessera recut listings")
        recut_thread.start()
        while recut_thread.is_alive():
            recut_thread.join(0.5)
        recut = box["recut"]
        log(f"mixed workload: re-cut exit {recut['exit']} after {recut['seconds']:.1f} s; "
            f"{MIXED_PHASE_S:.0f} s after it")
        time.sleep(max(0.0, recut["ended"] + MIXED_PHASE_S - time.monotonic()))
    finally:
        stop.set()
        for t in threads:
            t.join(CLI_TIMEOUT_S + 5)
    with lock:
        done = list(ops)
    phases = {
        "before": phase_summary(done, t0, recut["started"]),
        "during": phase_summary(done, recut["started"], recut["ended"]),
        "after": phase_summary(done, recut["ended"], recut["ended"] + MIXED_PHASE_S),
    }
    result = {
        "threads": MIXED_THREADS, "window_s": WINDOW_S,
        "note": "one tessera CLI process per operation: CLI operations per second",
        "phases": phases,
        "errors": sum(1 for o in done if o[2] == "error"),
        "negative": sum(1 for o in done if o[2] == "negative"),
        "ops": len(done),
        "failures_sample": errors,
        "recut_started_s": round(recut["started"] - t0, 3),
        "recut_ended_s": round(recut["ended"] - t0, 3),
    }
    return result, recut


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--objects", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bin", default="target/release/tessera")
    p.add_argument("--out", help="write the results as JSON to this file")
    p.add_argument("--skip-mixed", action="store_true",
                   help="no count/put workload during the re-cut")
    args = p.parse_args(argv)
    binary = os.path.abspath(args.bin)
    if not os.access(binary, os.X_OK):
        sys.exit(f"bench-spread: no tessera binary at {binary} (make bench-build)")
    server_cpu, _ = benchkit.cpus("", "")
    benchkit.configure("bench-spread", None, binary, server_cpu,
                       float(os.environ.get("QUIET_CORES", 0.3)),
                       float(os.environ.get("QUIET_MAX_WAIT", 600)), client_cpu="")
    quiet = None

    import listings  # scripts/listings.py: the same objects as `scripts/listings.py N SEED`

    def interrupted(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)
    begun = time.monotonic()
    objects = list(listings.listings(args.objects, args.seed))
    rng = random.Random(args.seed)
    ranges = {a: {f: pick_ranges(sorted(o[a] for o in objects), f, RANGES_EACH, rng)
                  for f in SELECTIVITIES}
              for a in RANGE_ATTRIBUTES}
    count_ranges = pick_ranges(sorted(o["price_cents"] for o in objects), 0.01, 200, rng)
    keys = [o["id"] for o in objects]

    root = tempfile.mkdtemp(prefix="bench-spread-")
    cluster = Cluster(binary, root)
    results = {"config": {"objects": args.objects, "seed": args.seed, "servers": SERVERS,
                          "replicas": REPLICAS, "partitions": 64, "space": DESCRIPTION,
                          "binary": binary, "ranges_each": RANGES_EACH,
                          "selectivities": SELECTIVITIES, "mixed": not args.skip_mixed}}
    problems = []
    try:
        try:
            cluster.start()
        except RuntimeError as e:
            log(str(e))
            return 2
        log(f"tessera dev ready on {cluster.addr} (console on {cluster.http}), data in {root}")
        cluster.must("add-space", stdin=DESCRIPTION + "\n")
        log(f"loading {args.objects} objects")
        results["load"] = load(cluster, objects)
        if results["load"]["exit"] != 0 or results["load"]["failed"]:
            problems.append(f"load: exit {results['load']['exit']}, {results['load']['failed']} failed")
        log(f"loaded in {results['load']['seconds']:.1f} s; measuring before the re-cut")
        results["ranges"] = {a: {str(f): rs for f, rs in by_f.items()} for a, by_f in ranges.items()}
        before, before_cluster = measure_spread(cluster)
        results["before"] = {"spread": before, "cluster": before_cluster,
                             "ranges": measure_ranges(cluster, ranges)}
        if args.skip_mixed:
            log("tessera recut listings")
            recut = run_recut(cluster)
        else:
            quiet = benchkit.wait_quiet(cluster.process.pid)
            results["mixed"], recut = mixed_workload(cluster, keys, count_ranges, args.seed)
            if results["mixed"]["errors"]:
                problems.append(f"mixed workload: {results['mixed']['errors']} failed operations")
        recut = {k: v for k, v in recut.items() if k not in ("started", "ended")}
        results["recut"] = recut
        if recut["exit"] != 0:
            problems.append(f"tessera recut: exit {recut['exit']}: {recut['stderr'].strip()}")
        log("measuring after the re-cut")
        after, after_cluster = measure_spread(cluster)
        results["after"] = {"spread": after, "cluster": after_cluster,
                            "ranges": measure_ranges(cluster, ranges)}
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    results["seconds"] = round(time.monotonic() - begun, 1)
    results["problems"] = problems
    benchkit.stamp(results, quiet)

    out = sys.stdout
    ld = results["load"]
    print(f"bench-spread: {args.objects} objects (seed {args.seed}) on tessera dev, {SERVERS} "
          f"servers, {REPLICAS} replicas, 64 partitions", file=out)
    print(f"load: {ld['seconds']:.1f} s ({ld['objects_per_s']:.0f} objects/s), "
          f"{ld['failed']} failed", file=out)
    print(file=out)
    print("Spread (stored: an object counts on each replica of its region; led: on its leader "
          "only; fullest: the fullest region's share of the subspace's objects)", file=out)
    for line in spread_table([("before", before), ("after", after)]):
        print(line, file=out)
    print(file=out)
    print(f"Ranges ({RANGES_EACH} per row, exact selectivity of the loaded objects; tessera explain's "
          "regions and servers contacted; target for 1 %: 2 % of the regions plus one)", file=out)
    for line in ranges_table([("before", results["before"]["ranges"]),
                              ("after", results["after"]["ranges"])]):
        print(line, file=out)
    print(file=out)
    if "mixed" in results:
        m = results["mixed"]
        print(f"Mixed workload ({MIXED_THREADS} threads: 50 % count of a 1 % price range, 50 % put "
              "of a price; one CLI process per operation, so CLI operations per second; medians "
              f"of {WINDOW_S:.0f}-second windows; re-cut from +{m['recut_started_s']:.1f} s to "
              f"+{m['recut_ended_s']:.1f} s)", file=out)
        for line in mixed_table(m):
            print(line, file=out)
        print(f"errors: {m['errors']} of {m['ops']} operations; exit 1: {m['negative']}", file=out)
        for e in m["failures_sample"][:5]:
            print(f"  {e['op']}: exit {e['exit']}: {e['stderr']}", file=out)
        print(file=out)
    for line in recut_lines(recut):
        print(line, file=out)
    print(file=out)
    print(f"total: {results['seconds']:.0f} s", file=out)
    if problems:
        print("PROBLEMS:", file=out)
        for pr in problems:
            print(f"  {pr}", file=out)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
        log(f"results in {args.out}")
    return 1 if problems else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("bench-spread: interrupted; the cluster was stopped and its directory removed",
              file=sys.stderr)
        sys.exit(130)
