"""Tests of scripts/plot-bench.py, with expectations computed here from the input numbers.

Run: python3 -m unittest discover -s scripts -p 'test_*.py'
"""

import contextlib
import copy
import io
import importlib.util
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

_HERE = os.path.dirname(os.path.abspath(__file__))
_PATH = os.path.join(_HERE, "plot-bench.py")
_spec = importlib.util.spec_from_file_location("plot_bench", _PATH)
plot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plot)

EXAMPLE = os.path.join(_HERE, "..", "docs", "results", "peers-9a32bfd.json")
NS = "{http://www.w3.org/2000/svg}"


def example():
    with open(EXAMPLE) as f:
        return json.load(f)


def query(per_s, p50, p99, cpu=10.0, runs=None):
    return {"per_s": per_s, "runs": runs or [per_s], "server_cpu_us_per_op": cpu,
            "p50_us": p50, "p99_us": p99}


def tessera_and_redis():
    """What SYSTEMS="tessera redis" YCSB="a c" prints: Redis sits the searches out."""
    return {
        "config": {"records": 5000, "runs": 1, "threads": 16, "git": "abc1234",
                   "systems": ["tessera", "redis"], "redis": "Redis server v=7.0.15 sha=0"},
        "secondary": {"tessera": {"load_per_s": 30000, "eq1": query(2000.0, 600, 900),
                                  "eq2": query(3000.0, 400, 700), "range": query(1500.0, 1000, 1400)}},
        "ycsb": {"tessera": {"load_per_s": 20000, "a": query(3000.0, 70, 2700), "c": query(14000.0, 110, 150)},
                 "redis": {"load_per_s": 27000, "a": query(4000.0, 380, 600), "c": query(11000.0, 140, 240)},
                 "tessera_over_redis": {"a": 0.75, "c": 1.27}},
        "raw": "/tmp/x/raw.json",
    }


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def run(argv):
    """(exit status, stdout, stderr) of main."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = plot.main(["plot-bench.py", *argv])
        except SystemExit as e:  # argparse's usage errors
            status = e.code
    return status, out.getvalue(), err.getvalue()


def write_json(d, value, name="summary.json"):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(value if isinstance(value, str) else json.dumps(value))
    return path


def bars(svg_path):
    """[(system, value, height)] of every bar, in document order."""
    root = ET.parse(svg_path).getroot()
    return [(r.get("data-system"), float(r.get("data-value")), float(r.get("height")))
            for r in root.iter(NS + "rect") if r.get("data-system")]


def legend(svg_path):
    root = ET.parse(svg_path).getroot()
    g = next(g for g in root.iter(NS + "g") if g.get("class") == "legend")
    return [t.text for t in g.iter(NS + "text")]


def tables(md):
    """{heading: {system name: [cells]}} of the Markdown tables."""
    out, heading = {}, None
    for line in md.splitlines():
        if line.startswith("#### "):
            heading = line[5:]
            out[heading] = {}
        elif line.startswith("| ") and not line.startswith("| system") and heading:
            cells = [c.strip() for c in line.strip("|").split("|")]
            out[heading][cells[0]] = cells[1:]
    return out


class Charts(unittest.TestCase):
    def test_linear_bars_are_proportional_to_the_values(self):
        # Within 10× of each other: a linear axis from 0.
        with tempfile.TemporaryDirectory() as d:
            status, _, _ = run([write_json(d, tessera_and_redis()), "--out", d])
            self.assertEqual(status, 0)
            got = bars(os.path.join(d, "peers-ycsb-throughput.svg"))
            self.assertEqual([(s, v) for s, v, _ in got],
                             [("tessera", 3000), ("redis", 4000), ("tessera", 14000), ("redis", 11000)])
            per_unit = [h / v for _, v, h in got]
            for x in per_unit:
                self.assertAlmostEqual(x, per_unit[0], delta=0.1 / 3000)  # heights rounded to 0.1 px
            self.assertNotIn("log scale", read(os.path.join(d, "peers-ycsb-throughput.svg")))

    def test_log_bars_are_proportional_to_the_logarithms(self):
        # Cassandra's 619 q/s beside Tessera's 24 419: a log axis; height = k (log v - log lo).
        with tempfile.TemporaryDirectory() as d:
            run([EXAMPLE, "--out", d])
            path = os.path.join(d, "peers-secondary-throughput.svg")
            self.assertIn("(log scale)", read(path))
            got = bars(path)
            s = example()["secondary"]
            expected = [(sys_, s[sys_][k]["per_s"]) for k in ("eq1", "eq2", "range")
                        for sys_ in ("tessera", "postgres", "cassandra")]
            self.assertEqual([(x, v) for x, v, _ in got], expected)
            (_, v0, h0), (_, v1, h1) = got[0], got[2]
            k = (h0 - h1) / (math.log10(v0) - math.log10(v1))
            lo = math.log10(v0) - h0 / k
            self.assertAlmostEqual(lo, 2.0, places=2)  # a decade below the smallest value (619)
            for _, v, h in got:
                self.assertAlmostEqual(h, k * (math.log10(v) - lo), delta=0.15)

    def test_every_system_is_in_the_legend_and_the_title_names_commit_and_records(self):
        with tempfile.TemporaryDirectory() as d:
            run([EXAMPLE, "--out", d])
            data = example()
            for part in ("secondary", "ycsb"):
                systems = [s for s in data[part] if not s.startswith("tessera_over_")]
                for what in ("throughput", "latency"):
                    path = os.path.join(d, f"peers-{part}-{what}.svg")
                    names = legend(path)
                    for s in systems:
                        self.assertTrue(any(n.startswith(plot.NAMES[s]) for n in names), (s, names))
                    self.assertIn("PostgreSQL 15.18", names)
                    root = ET.parse(path).getroot()
                    title = next(root.iter(NS + "text")).text
                    self.assertIn("git 9a32bfd", title)
                    self.assertIn("100 000 records", title)
                    self.assertIn("s/s" if what == "throughput" else "latency", read(path))

    def test_latency_bars_are_p99_behind_p50(self):
        with tempfile.TemporaryDirectory() as d:
            run([EXAMPLE, "--out", d])
            got = bars(os.path.join(d, "peers-ycsb-latency.svg"))
            y = example()["ycsb"]
            expected = [(s, y[s][k][f]) for k in "abcef" for s in ("tessera", "postgres", "redis", "etcd", "cassandra")
                        for f in ("p99_us", "p50_us")]
            self.assertEqual([(s, v) for s, v, _ in got], expected)
            for (_, p99, h99), (_, p50, h50) in zip(got[::2], got[1::2]):
                self.assertGreater(h99, h50)

    def test_output_is_deterministic(self):
        # The same JSON, even with its objects' keys in another order, gives the same bytes.
        shuffled = example()
        rng = random.Random(7)

        def shuffle(x):
            if isinstance(x, dict):
                items = list(x.items())
                rng.shuffle(items)
                return {k: shuffle(v) for k, v in items}
            return x

        with tempfile.TemporaryDirectory() as d:
            outs = []
            for i, src in enumerate([EXAMPLE, EXAMPLE, write_json(d, shuffle(shuffled))]):
                out = os.path.join(d, f"out{i}")
                status, md, _ = run([src, "--out", out, "--markdown"])
                self.assertEqual(status, 0)
                files = {f: read(os.path.join(out, f), "rb") for f in sorted(os.listdir(out))}
                outs.append((files, md))
            self.assertEqual(len(outs[0][0]), 4)
            self.assertEqual(outs[0], outs[1])
            self.assertEqual(outs[0], outs[2])


class Markdown(unittest.TestCase):
    def test_one_table_per_query_with_every_system_and_the_ratios(self):
        status, md, _ = run([EXAMPLE, "--markdown"])
        self.assertEqual(status, 0)
        t = tables(md)
        data = example()
        self.assertEqual(len(t), 3 + 5)
        for part, kinds in (("secondary", ["eq1", "eq2", "range"]), ("ycsb", list("abcef"))):
            systems = [s for s in data[part] if not s.startswith("tessera_over_")]
            for kind in kinds:
                heading = next(h for h in t if h.split(" (")[0] == plot.QUERIES[kind][0])
                rows = t[heading]
                self.assertEqual(len(rows), len(systems))
                for s in systems:
                    q = data[part][s][kind]
                    row = next(v for n, v in rows.items() if n.startswith(plot.NAMES[s]))
                    self.assertEqual(row[0].split(" (")[0].replace(" ", ""), str(round(q["per_s"])))
                    self.assertEqual(row[1].replace(" ", ""), str(q["p50_us"]))
                    self.assertEqual(row[2].replace(" ", ""), str(q["p99_us"]))
                    if s == "tessera":
                        self.assertEqual(row[-1], "–")
                    else:
                        expected = data[part]["tessera"][kind]["per_s"] / q["per_s"]
                        self.assertEqual(float(row[-1]), float(f"{expected:.3g}"), (part, kind, s))

    def test_ratios_computed_when_the_summary_has_none(self):
        data = example()
        for part in ("secondary", "ycsb"):
            for k in [k for k in data[part] if k.startswith("tessera_over_")]:
                del data[part][k]
        with tempfile.TemporaryDirectory() as d:
            _, without, _ = run([write_json(d, data), "--markdown"])
        _, given, _ = run([EXAMPLE, "--markdown"])
        self.assertEqual(without, given)

    def test_loads(self):
        _, md, _ = run([EXAMPLE, "--markdown"])
        self.assertIn("Loads: Tessera 35 656 puts/s, PostgreSQL 21 927, Cassandra 5 189.", md)
        self.assertIn("Loads: Tessera 20 993 records/s, PostgreSQL 21 616, Redis 27 847, etcd 3 539, "
                      "Cassandra 2 808.", md)


class Missing(unittest.TestCase):
    def test_a_run_of_tessera_and_redis(self):
        with tempfile.TemporaryDirectory() as d:
            status, md, _ = run([write_json(d, tessera_and_redis()), "--out", d, "--markdown"])
            self.assertEqual(status, 0)
            t = tables(md)
            self.assertEqual(list(t["eq1 (city = C, ~100 matches; latency of the searches)"]), ["Tessera"])
            self.assertEqual(t["YCSB A (50 % reads, 50 % updates; latency of the reads)"]["Redis 7.0.15"][-1], "0.750")
            self.assertNotIn("YCSB B", md)
            self.assertEqual(legend(os.path.join(d, "peers-secondary-throughput.svg")), ["Tessera"])
            self.assertEqual(legend(os.path.join(d, "peers-ycsb-throughput.svg")), ["Tessera", "Redis 7.0.15"])

    def test_missing_parts_and_fields_are_skipped(self):
        data = tessera_and_redis()
        del data["secondary"]
        del data["ycsb"]["redis"]["c"]["p99_us"]
        del data["ycsb"]["redis"]["a"]
        del data["config"]["git"]
        with tempfile.TemporaryDirectory() as d:
            # A chart of an earlier summary's searches would pass for this one's: removed.
            write_json(d, "<svg/>", "peers-secondary-throughput.svg")
            status, md, err = run([write_json(d, data), "--out", d, "--markdown"])
            self.assertEqual(status, 0)
            self.assertEqual(sorted(f for f in os.listdir(d) if f.endswith(".svg")),
                             ["peers-ycsb-latency.svg", "peers-ycsb-throughput.svg"])
            self.assertIn("removed", err)
            self.assertNotIn("eq1", md)
            t = tables(md)
            a = t["YCSB A (50 % reads, 50 % updates; latency of the reads)"]
            self.assertEqual(list(a), ["Tessera"])
            c = t["YCSB C (reads only; latency of the reads)"]["Redis 7.0.15"]
            self.assertEqual(c[2], "–")  # p99
            self.assertEqual(c[-1], f"{14000 / 11000:#.3g}")  # computed: no tessera_over_redis.c given
            lat = bars(os.path.join(d, "peers-ycsb-latency.svg"))
            self.assertEqual([(s, v) for s, v, _ in lat],
                             [("tessera", 2700), ("tessera", 70), ("tessera", 150), ("tessera", 110), ("redis", 140)])
            title = next(ET.parse(os.path.join(d, "peers-ycsb-latency.svg")).getroot().iter(NS + "text")).text
            self.assertNotIn("git", title)

    def test_no_tessera(self):
        data = tessera_and_redis()
        del data["ycsb"]["tessera"], data["ycsb"]["tessera_over_redis"], data["secondary"]
        with tempfile.TemporaryDirectory() as d:
            status, md, _ = run([write_json(d, data), "--out", d, "--markdown"])
            self.assertEqual(status, 0)
            self.assertEqual(tables(md)["YCSB C (reads only; latency of the reads)"]["Redis 7.0.15"][-1], "–")


class Malformed(unittest.TestCase):
    def assertRefused(self, content, message):
        with tempfile.TemporaryDirectory() as d:
            path = write_json(d, content)
            status, out, err = run([path, "--out", os.path.join(d, "out"), "--markdown"])
            self.assertEqual(status, 2)
            self.assertEqual(out, "")
            self.assertIn(path, err)
            self.assertIn(message, err)
            self.assertFalse(os.path.exists(os.path.join(d, "out")))

    def test_refused(self):
        self.assertRefused("{not json", "not JSON")
        self.assertRefused([1, 2], "the file: expected an object")
        self.assertRefused({"config": {}}, "no part with results")
        self.assertRefused({"ycsb": []}, "ycsb: expected an object")
        self.assertRefused({"ycsb": {"tessera": {"a": {"per_s": "fast"}}}}, 'ycsb.tessera.a.per_s: expected a number >= 0, found "fast"')
        self.assertRefused({"ycsb": {"tessera": {"a": {"per_s": -1}}}}, "ycsb.tessera.a.per_s")
        self.assertRefused({"ycsb": {"tessera": {"a": 5}}}, "ycsb.tessera.a: expected an object")
        self.assertRefused({"ycsb": {"tessera": {"a": {"runs": [1, None]}}}}, "ycsb.tessera.a.runs[1]")
        self.assertRefused({"ycsb": {"tessera_over_redis": {"a": "x"}}}, "ycsb.tessera_over_redis.a")
        self.assertRefused({"config": {"records": "many"}, "ycsb": {}}, "config.records")

    def test_missing_file_and_exit_status(self):
        with tempfile.TemporaryDirectory() as d:
            res = subprocess.run([sys.executable, _PATH, os.path.join(d, "none.json"), "--markdown"],
                                 capture_output=True, text=True)
            self.assertEqual(res.returncode, 2)
            self.assertIn("cannot read", res.stderr)
            res = subprocess.run([sys.executable, _PATH, write_json(d, "[]"), "--markdown"],
                                 capture_output=True, text=True)
            self.assertEqual(res.returncode, 2)
            self.assertNotIn("Traceback", res.stderr)
            self.assertEqual(run([EXAMPLE])[0], 2)  # neither --out nor --markdown


if __name__ == "__main__":
    unittest.main()
