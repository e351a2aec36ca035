"""Tests of scripts/advisor-report.py, with expectations computed by hand.

Run: python3 -m unittest discover -s scripts -p 'test_*.py'
"""

import contextlib
import importlib.util
import io
import json
import math
import os
import tempfile
import unittest
import xml.etree.ElementTree as ET

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "advisor-report.py")
_spec = importlib.util.spec_from_file_location("advisor_report", _PATH)
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)


def config(subspaces, predicted, runs, **labels):
    full = {"advised": False, "top_rank": None, "random": False, "baselines": []}
    full.update(labels)
    s = sorted(runs)
    median = s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2
    return {
        "subspaces": subspaces,
        "labels": full,
        "predicted_ops_s": predicted,
        "runs": [{"throughput_ops_s": r} for r in runs],
        "median_ops_s": median,
        "min_ops_s": min(runs),
        "max_ops_s": max(runs),
    }


def workload(name, configs):
    return {"name": name, "configurations": configs}


class KendallTauB(unittest.TestCase):
    def test_identical_and_reversed_rankings(self):
        self.assertEqual(report.kendall_tau_b([1, 2, 3, 4], [10, 20, 30, 40]), 1.0)
        self.assertEqual(report.kendall_tau_b([1, 2, 3, 4], [40, 30, 20, 10]), -1.0)

    def test_one_swapped_pair_of_six(self):
        # Pairs: 6; (2, 3) is the only discordant one: (5 - 1) / 6.
        self.assertAlmostEqual(report.kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]), 2 / 3)

    def test_ties_on_both_sides(self):
        # x = 1 2 2 3, y = 1 2 3 3: concordant 4, discordant 0, one tie in x (items 1, 2) and
        # one in y (items 2, 3): 4 / sqrt((6 - 1) (6 - 1)) = 0.8 (scipy.stats.kendalltau agrees).
        self.assertAlmostEqual(report.kendall_tau_b([1, 2, 2, 3], [1, 2, 3, 3]), 0.8)

    def test_undefined_when_all_tied_or_too_short(self):
        self.assertIsNone(report.kendall_tau_b([5, 5, 5], [1, 2, 3]))
        self.assertIsNone(report.kendall_tau_b([1], [1]))
        with self.assertRaises(ValueError):
            report.kendall_tau_b([1, 2], [1])


class Summary(unittest.TestCase):
    def setUp(self):
        self.w = workload("A-RH", [
            config([["city"]], 1000, [900, 950, 1000], advised=True, top_rank=1),
            config([["city"], ["address"]], 800, [960, 980, 990], top_rank=2, baselines=["greedy"]),
            config([], 100, [100, 100, 100], baselines=["no-subspace"]),
            config([["tel"]], 300, [250, 260, 270], random=True),
        ])

    def test_relative_error(self):
        self.assertAlmostEqual(report.relative_error(110, 100), 0.1)
        self.assertAlmostEqual(report.relative_error(90, 100), 0.1)

    def test_one_workload(self):
        s = report.summarize_workload(self.w)
        self.assertAlmostEqual(s["mean_error"], (50 / 950 + 180 / 980 + 0 + 40 / 260) / 4)
        self.assertAlmostEqual(s["max_error"], 180 / 980)
        # Sampled (advised, top 2, random): predicted 1000 800 300, measured 950 980 260:
        # pairs (1,2) discordant, (1,3) and (2,3) concordant: (2 - 1) / 3.
        self.assertAlmostEqual(s["tau_b"], 1 / 3)
        # With no-subspace (100, 100): three more concordant pairs: (5 - 1) / 6.
        self.assertAlmostEqual(s["tau_b_all"], 4 / 6)
        self.assertEqual(s["measured_best"], "{city} {address}")
        self.assertFalse(s["advised_is_measured_best"])
        self.assertEqual(s["advised_measured_rank"], 2)
        # The advised configuration's best run (1000) reaches the best's worst (960).
        self.assertTrue(s["advised_best_within_spread"])
        self.assertAlmostEqual(s["gain_over_baselines"]["greedy"], 950 / 980 - 1)
        self.assertAlmostEqual(s["gain_over_baselines"]["no-subspace"], 8.5)
        self.assertEqual(s["best_baseline"], "greedy")
        self.assertTrue(s["not_below_best_baseline"])

    def test_clearly_beaten(self):
        self.w["configurations"][0]["max_ops_s"] = 955
        s = report.summarize_workload(self.w)
        self.assertFalse(s["advised_best_within_spread"])
        self.assertFalse(s["not_below_best_baseline"])

    def test_overall_and_targets(self):
        good = workload("B-RH", [
            config([["city"]], 1000, [1000, 1010, 990], advised=True, top_rank=1),
            config([], 100, [101, 99, 100], baselines=["no-subspace"]),
            config([["tel"]], 500, [505, 500, 495], random=True),
        ])
        s = report.summarize({"workloads": [self.w, good]})
        self.assertEqual(s["overall"]["configurations"], 7)
        self.assertAlmostEqual(s["overall"]["min_tau_b"], 1 / 3)
        self.assertEqual(s["overall"]["advised_best_within_spread"], 2)
        self.assertEqual(s["overall"]["advised_strictly_best"], 1)
        t = s["targets"]
        self.assertFalse(t["tau_b_ge_0.9_every_workload"]["met"])
        self.assertTrue(t["advised_best_within_spread_every_workload"]["met"])
        self.assertTrue(t["never_below_best_baseline"]["met"])
        # B-RH: medians 1000, 100, 500, all predicted exactly.
        errors = [50 / 950, 180 / 980, 0, 40 / 260, 0, 0, 0]
        self.assertAlmostEqual(s["overall"]["mean_error"], sum(errors) / 7)
        self.assertFalse(t["mean_error_le_5pct"]["met"])
        s = report.summarize({"workloads": [good]})
        self.assertTrue(all(v["met"] for v in s["targets"].values()))

    def test_micro_scenarios_are_reported_apart_with_their_cpu(self):
        micro = workload("A-S", [
            config([["city"]], 1100, [1000], advised=True, top_rank=1),
            config([], 90, [100], baselines=["no-subspace"]),
        ])
        micro["mix"] = "S"
        # The model's cost: 1 µs per operation; the runs measured 1.25 µs and 0.8 µs.
        for c, cpu in zip(micro["configurations"], [1.25e-6, 0.8e-6]):
            c["predicted_classes"] = [{"probability": 1.0, "cost_s": 1e-6}]
            c["runs"][0].update({"operations": 1000, "work": {"cpu_s": cpu * 1000}})
        s = report.summarize({"workloads": [micro, self.w]})
        self.assertEqual([w["workload"] for w in s["workloads"]], ["A-RH"])
        self.assertEqual(s["overall"]["configurations"], 4)
        [m] = s["micro"]
        self.assertAlmostEqual(m["mean_error"], 0.1)
        self.assertAlmostEqual(m["bias"], 0.0)
        self.assertAlmostEqual(m["cpu_error"], (0.2 + 0.25) / 2)
        self.assertAlmostEqual(m["cpu_bias"], (-0.2 + 0.25) / 2)
        settings = {"hotels": 20, "partitions": 64, "threads": 16, "duration_s": 1, "warmup_s": 0,
                    "repetitions": 1, "seed": 1, "calibration_source": "default"}
        text = report.markdown({"workloads": [micro, self.w], **settings}, report.summarize(
            {"workloads": [micro, self.w], **settings}))
        self.assertIn("| A-S | 2 | 10.0 % | +0.0 % | 22.5 % | +2.5 % |", text)


class Disturbed(unittest.TestCase):
    def test_runs_overlapping_a_busy_sample(self):
        env = {"quiet_cores": 0.3, "other_cores_timeline": [[100.0, 0.1], [102.0, 0.9], [104.0, 0.0]]}
        # The sample at 102 covers (100, 102]: busy.
        self.assertTrue(report.disturbed({"started_unix_s": 101.0, "elapsed_s": 0.5}, env))
        self.assertTrue(report.disturbed({"started_unix_s": 99.0, "elapsed_s": 1.5}, env))
        # (102, 104] was quiet, and so was (98, 100].
        self.assertFalse(report.disturbed({"started_unix_s": 102.5, "elapsed_s": 1.0}, env))
        self.assertFalse(report.disturbed({"started_unix_s": 98.5, "elapsed_s": 1.0}, env))
        self.assertIsNone(report.disturbed({"started_unix_s": 1.0, "elapsed_s": 1.0}, {}))
        self.assertIsNone(report.disturbed({"elapsed_s": 1.0}, env))

    def test_counted_in_the_summary(self):
        w = workload("A-RH", [
            config([["city"]], 1000, [1000, 990], advised=True, top_rank=1),
            config([], 100, [100, 100], baselines=["no-subspace"]),
        ])
        for i, r in enumerate(r for c in w["configurations"] for r in c["runs"]):
            r["started_unix_s"], r["elapsed_s"] = 100.0 + 10 * i, 2.0
        env = {"quiet_cores": 0.3, "other_cores_max": 1.2,
               "other_cores_timeline": [[112.0, 1.2], [122.0, 0.0]]}
        o = report.summarize({"workloads": [w]}, env)["overall"]
        self.assertEqual((o["runs"], o["runs_disturbed"]), (4, 1))
        self.assertNotIn("runs_disturbed", report.summarize({"workloads": [w]})["overall"])


class Outputs(unittest.TestCase):
    def raw(self):
        raw = self.raw_without_env()
        for i, r in enumerate(r for w in raw["advisor_eval"]["workloads"]
                              for c in w["configurations"] for r in c["runs"]):
            r["started_unix_s"], r["elapsed_s"] = 100.0 + 10 * i, 2.0
        raw["env"] = {"quiet_cores": 0.3, "other_cores_max": 0.8,
                      "other_cores_timeline": [[101.0, 0.8], [111.0, 0.0]]}
        return raw

    def raw_without_env(self):
        return {"advisor_eval": {
            "hotels": 2000, "partitions": 64, "threads": 16, "duration_s": 2.0, "warmup_s": 1.0,
            "repetitions": 1, "seed": 1, "sample_top": 5, "sample_random": 5,
            "calibration_source": "default", "calibration": {},
            "workloads": [
                workload("A-RH", [
                    config([["city"]], 1000, [950], advised=True, top_rank=1),
                    config([], 80, [90], baselines=["no-subspace"]),
                ]),
                workload("B-WH", [
                    config([["city"]], 500, [480], advised=True, top_rank=1, baselines=["dominant"]),
                    config([["city", "address", "postcode", "tel"]], 300, [310], baselines=["hyperspace"]),
                ]),
            ]}}

    def test_files_are_written_and_svgs_are_xml(self):
        with tempfile.TemporaryDirectory() as d:
            raw = os.path.join(d, "raw.json")
            with open(raw, "w") as f:
                json.dump(self.raw(), f)
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                report.main(["advisor-report.py", raw, os.path.join(d, "out")])
            self.assertIn("mean_error_le_5pct", printed.getvalue())
            out = os.path.join(d, "out")
            with open(os.path.join(out, "summary.json")) as f:
                summary = json.load(f)
            self.assertEqual([w["workload"] for w in summary["workloads"]], ["A-RH", "B-WH"])
            with open(os.path.join(out, "results.md")) as f:
                md = f.read()
            self.assertIn("| A-RH |", md)
            self.assertIn("### B-WH", md)
            self.assertIn("{city,address,postcode,tel}", md)
            self.assertIn("during 1 of 4 timed runs", md)
            self.assertIn("| 950* |", md)
            self.assertEqual(summary["env"]["other_cores_max"], 0.8)
            scatter = ET.parse(os.path.join(out, "scatter.svg")).getroot()
            ns = "{http://www.w3.org/2000/svg}"
            # Two advised diamonds in the plot, plus one in the legend.
            diamonds = [p for p in scatter.iter(ns + "polygon") if p.get("stroke") == "black"]
            self.assertEqual(len(diamonds), 3)
            bars = ET.parse(os.path.join(out, "baselines.svg")).getroot()
            texts = [t.text for t in bars.iter(ns + "text")]
            self.assertIn("A-RH", texts)
            self.assertIn("hyperspace", texts)

    def test_nice_axis_tops(self):
        self.assertEqual(report._nice(19549), 20000)
        self.assertEqual(report._nice(20000), 20000)
        self.assertEqual(report._nice(2100), 2500)
        self.assertEqual(report._nice(0.7), 1)

    def test_log_ticks(self):
        self.assertEqual(report._log_ticks(10, 1000), [10, 20, 50, 100, 200, 500, 1000])
        self.assertTrue(math.isclose(report._log_ticks(1, 3)[-1], 2))


if __name__ == "__main__":
    unittest.main()
