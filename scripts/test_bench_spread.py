"""Tests of scripts/bench-spread.py's computations (no cluster), with expectations computed by
hand from the inputs.

Run: python3 -m unittest discover -s scripts -p 'test_*.py'
"""

import importlib.util
import os
import random
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("bench_spread", os.path.join(_HERE, "bench-spread.py"))
spread = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(spread)

# What GET /api/regions answers, cut down: 4 regions of a subspace over servers 1-3 (server 4
# holds nothing of it), replicas leader first; region 3's leader did not answer.
REGIONS = {
    "space": "listings",
    "subspace": 1,
    "subspaces": [
        {"subspace": 2, "dimensions": ["created_at"], "state": "serving"},
        {"subspace": 0, "dimensions": ["id"], "state": "serving"},
        {"subspace": 1, "dimensions": ["price_cents"], "state": "dropped"},
        {"subspace": 5, "dimensions": ["price_cents"], "state": "building"},
        {"subspace": 4, "dimensions": ["city", "price_cents"], "state": "serving"},
    ],
    "dimensions": ["price_cents"],
    "intervals": [4],
    "regions": [
        {"region": 0, "cells": [0], "replicas": [1, 2], "objects": 10},
        {"region": 1, "cells": [1], "replicas": [2, 3], "objects": 30},
        {"region": 2, "cells": [2], "replicas": [3, 1], "objects": 0},
        {"region": 3, "cells": [3], "replicas": [1, 3], "objects": None},
    ],
}


class ServingSubspaces(unittest.TestCase):
    def test_only_serving_by_id(self):
        self.assertEqual(spread.serving_subspaces(REGIONS),
                         [(0, ["id"]), (2, ["created_at"]), (4, ["city", "price_cents"])])


class ServerLoads(unittest.TestCase):
    def test_stored_on_every_replica_led_on_the_first(self):
        stored, led = spread.server_loads(REGIONS["regions"], servers=[1, 2, 3, 4])
        # 1: regions 0 (10), 2 (0), 3 (unknown: 0) -> 10; 2: regions 0, 1 -> 40; 3: 1, 2, 3 -> 30.
        self.assertEqual(stored, {1: 10, 2: 40, 3: 30, 4: 0})
        # leaders: 1 of regions 0 and 3 -> 10; 2 of region 1 -> 30; 3 of region 2 -> 0.
        self.assertEqual(led, {1: 10, 2: 30, 3: 0, 4: 0})

    def test_servers_not_given_appear_from_replicas(self):
        stored, led = spread.server_loads(REGIONS["regions"][:2])
        self.assertEqual(stored, {1: 10, 2: 40, 3: 30})
        self.assertEqual(led, {1: 10, 2: 30, 3: 0})


class FullestShare(unittest.TestCase):
    def test_share(self):
        self.assertEqual(spread.fullest_share(REGIONS["regions"]), 0.75)  # 30 of 40

    def test_one_region_holds_all(self):
        regions = [{"replicas": [1], "objects": n} for n in (0, 0, 20000, 0)]
        self.assertEqual(spread.fullest_share(regions), 1.0)

    def test_empty_subspace(self):
        self.assertIsNone(spread.fullest_share([{"replicas": [1], "objects": 0}]))


class SpreadSummary(unittest.TestCase):
    def test_summary(self):
        s = spread.spread_summary(REGIONS["regions"], servers=[1, 2, 3, 4])
        self.assertEqual(s["regions"], 4)
        self.assertEqual(s["regions_with_objects"], 2)
        self.assertEqual(s["regions_unknown"], 1)
        self.assertEqual(s["objects"], 40)
        self.assertEqual(s["fullest_region_objects"], 30)
        self.assertEqual(s["fullest_share"], 0.75)
        self.assertEqual(s["target_fullest_share"], 0.5)  # 2 / 4
        self.assertFalse(s["every_region_holds_data"])
        self.assertEqual(s["stored_max"], 40)
        self.assertEqual(s["stored_mean"], 20.0)  # 80 / 4 servers
        self.assertEqual(s["led_max"], 30)
        self.assertEqual(s["led_mean"], 10.0)  # 40 / 4 servers
        self.assertEqual(s["stored_per_server"], {"1": 10, "2": 40, "3": 30, "4": 0})

    def test_every_region_holds_data(self):
        regions = [{"replicas": [1, 2], "objects": 5}, {"replicas": [2, 1], "objects": 7}]
        s = spread.spread_summary(regions, servers=[1, 2])
        self.assertTrue(s["every_region_holds_data"])
        self.assertEqual((s["stored_max"], s["stored_mean"]), (12, 12.0))
        self.assertEqual((s["led_max"], s["led_mean"]), (7, 6.0))
        self.assertEqual(s["fullest_share"], 7 / 12)


class PickRanges(unittest.TestCase):
    def test_exact_selectivities_of_distinct_values(self):
        values = list(range(0, 20000, 2))  # 10 000 distinct values
        rng = random.Random(7)
        for fraction, want in ((0.001, 10), (0.01, 100), (0.1, 1000)):
            ranges = spread.pick_ranges(values, fraction, 20, rng)
            self.assertEqual(len(ranges), 20)
            for r in ranges:
                self.assertEqual(r["selected"], want)
                self.assertEqual(sum(1 for v in values if r["lo"] <= v <= r["hi"]), want)
                # a run of `want` consecutive even numbers spans 2 * (want - 1)
                self.assertEqual(r["hi"] - r["lo"], 2 * (want - 1))

    def test_duplicates_avoided_where_possible(self):
        # 10 values; a range of 2 (20 %) must not start or end inside the run of 5s.
        values = [1, 2, 3, 5, 5, 5, 5, 8, 9, 10]
        ranges = spread.pick_ranges(values, 0.2, 50, random.Random(1))
        for r in ranges:
            self.assertEqual(r["selected"], 2)
            self.assertIn((r["lo"], r["hi"]), [(1, 2), (2, 3), (8, 9), (9, 10)])

    def test_all_equal_keeps_the_closest(self):
        ranges = spread.pick_ranges([4] * 10, 0.1, 3, random.Random(1))
        self.assertEqual(ranges, [{"lo": 4, "hi": 4, "selected": 10}] * 3)

    def test_at_least_one_and_none_of_nothing(self):
        ranges = spread.pick_ranges([1, 2, 3], 0.001, 5, random.Random(3))
        self.assertTrue(all(r["selected"] == 1 and r["lo"] == r["hi"] for r in ranges))
        self.assertEqual(spread.pick_ranges([], 0.1, 5, random.Random(3)), [])

    def test_count_between(self):
        values = [1, 2, 2, 2, 3, 7]
        self.assertEqual(spread.count_between(values, 2, 2), 3)
        self.assertEqual(spread.count_between(values, 2, 6), 4)
        self.assertEqual(spread.count_between(values, 4, 6), 0)


class Summaries(unittest.TestCase):
    def test_median_max(self):
        self.assertEqual(spread.summary([3, 1, 4, 1, 5]),
                         {"n": 5, "median": 3, "max": 5, "min": 1})
        self.assertEqual(spread.summary([2, 8, 4, 6]),
                         {"n": 4, "median": 5.0, "max": 8, "min": 2})
        self.assertEqual(spread.summary([]), {"n": 0, "median": None, "max": None, "min": None})

    def test_regions_target(self):
        self.assertAlmostEqual(spread.regions_target(64), 2.28)
        self.assertAlmostEqual(spread.regions_target(100), 3.0)

    def test_explain_summary(self):
        answers = [
            {"subspace": 1, "dimensions": ["price_cents"], "subspace_regions": 64,
             "regions_contacted": 1, "servers_contacted": 1},
            {"subspace": 5, "dimensions": ["price_cents"], "subspace_regions": 64,
             "regions_contacted": 3, "servers_contacted": 2},
            {"subspace": 5, "dimensions": ["price_cents"], "subspace_regions": 64,
             "regions_contacted": 2, "servers_contacted": 2},
        ]
        e = spread.explain_summary(answers, 2.28)
        self.assertEqual(e["regions_contacted"], {"n": 3, "median": 2, "max": 3, "min": 1})
        self.assertEqual(e["servers_contacted"], {"n": 3, "median": 2, "max": 2, "min": 1})
        self.assertEqual(e["chosen"], {"1 price_cents": 1, "5 price_cents": 2})
        self.assertEqual(e["target_regions"], 2.28)


class Windows(unittest.TestCase):
    def test_full_windows(self):
        # windows [10, 11), [11, 12), [12, 13); 13.5 is past the last full window
        times = [9.9, 10.0, 10.2, 10.9, 11.5, 12.0, 12.1, 12.2, 12.99, 13.5]
        self.assertEqual(spread.window_rates(times, 10.0, 13.7), [3.0, 1.0, 4.0])
        # one full window of 2 s, [10, 12): 4 operations
        self.assertEqual(spread.window_rates(times, 10.0, 13.7, width=2.0), [2.0])
        self.assertEqual(spread.window_rates(times, 10.0, 14.0, width=2.0), [2.0, 2.5])

    def test_short_and_empty_phases(self):
        self.assertEqual(spread.window_rates([1.1, 1.2, 1.3], 1.0, 1.5), [6.0])
        self.assertEqual(spread.window_rates([1.1], 2.0, 2.0), [])

    def test_outcome(self):
        self.assertEqual([spread.outcome(c) for c in (0, 1, 2, 101, None)],
                         ["ok", "negative", "error", "error", "error"])

    def test_phase_summary(self):
        ops = [(0.5, "count", "ok"), (0.7, "put", "ok"), (1.2, "put", "error"),
               (1.4, "count", "negative"), (1.6, "count", "ok"), (2.5, "put", "ok")]
        p = spread.phase_summary(ops, 0.0, 2.0)
        self.assertEqual(p["ops_per_s_windows"], [2.0, 3.0])
        self.assertEqual(p["ops_per_s_median"], 2.5)
        self.assertEqual((p["ops"], p["count_ops"], p["put_ops"]), (5, 3, 2))
        self.assertEqual((p["errors"], p["negative"]), (1, 1))
        self.assertEqual((p["seconds"], p["windows"]), (2.0, 2))


if __name__ == "__main__":
    unittest.main()
