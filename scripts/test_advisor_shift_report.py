"""Tests of scripts/advisor-shift-report.py on a hand-made report."""

import importlib.util
import os
import unittest

_spec = importlib.util.spec_from_file_location(
    "advisor_shift_report", os.path.join(os.path.dirname(__file__), "advisor-shift-report.py"))
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)


def sample(t, workload, ops, subspaces, building=False):
    return {"t_s": t, "workload": workload, "ops_s": ops, "subspaces": subspaces, "building": building}


ADAPTATION = {
    "from": [["city", "address"]], "to": [["postcode"], ["tel"]],
    "predicted_from_ops_s": 500, "predicted_to_ops_s": 16000, "observations": 3, "period_s": 1}

SHIFT = {
    "hotels": 100, "partitions": 8, "threads": 2, "from": "A-RH", "to": "D-RH",
    "before_s": 3.0, "after_s": 5.0,
    "start": [["city", "address"]], "advised_for_to": [["postcode"], ["tel"]],
    "end": [["postcode"], ["tel"]],
    "adaptations": [
        {"epoch": 4, "step": {"term": 2, "event": "Started", "adaptation": ADAPTATION}},
        {"epoch": 7, "step": {"term": 2, "event": "Finished", "adaptation": ADAPTATION}},
    ],
    "adapted_after_s": 3.0, "before_ops_s": 1000.0, "during_ops_s": 100.0, "after_ops_s": 950.0,
    "reference_best": {"throughput_ops_s": 1000.0}, "reference_start": {"throughput_ops_s": 90.0},
    "after_vs_best": 0.95, "hotels_checked": 100, "writes_lost": 0,
    "timeline": [
        sample(1, "from", 1000, [["city", "address"]]),
        sample(2, "from", 1000, [["city", "address"]]),
        sample(3, "from", 1000, [["city", "address"]]),
        sample(4, "to", 100, [["city", "address"]]),
        sample(5, "to", 100, [["city", "address"], ["postcode"]], building=True),
        sample(6, "to", 300, [["city", "address"], ["postcode"], ["tel"]], building=True),
        sample(7, "to", 950, [["postcode"], ["tel"]]),
        sample(8, "to", 950, [["postcode"], ["tel"]]),
    ],
}


class ShiftReportTest(unittest.TestCase):
    def test_the_switch_and_the_builds_are_found_in_the_timeline(self):
        self.assertEqual(report.switch_time(SHIFT), 3.0)
        self.assertEqual(report.building_spans(SHIFT["timeline"]), [(4.0, 6.0)])
        still_building = [sample(1, "to", 1, [], building=True), sample(2, "to", 1, [], building=True)]
        self.assertEqual(report.building_spans(still_building), [(0.0, 2.0)])

    def test_the_table_says_what_was_measured_and_whether_targets_were_met(self):
        md = report.markdown(SHIFT)
        self.assertIn("| 4 | 2 | started | {city, address} | {postcode} {tel} | 500 | 16 000 | 3 × 1 s |", md)
        self.assertIn("| 7 | 2 | finished | {city, address} |", md)
        abandoned = dict(SHIFT, adaptations=[
            {"epoch": 9, "step": {"term": 3, "event": {"Abandoned": {"why": "the build failed"}},
                                  "adaptation": ADAPTATION}}])
        self.assertIn("| 9 | 3 | abandoned: the build failed | {city, address} |", report.markdown(abandoned))
        self.assertIn("| D-RH, after | 950 |", md)
        self.assertIn("0.95 of the reference (target ≥ 0.90: met)", md)
        self.assertIn("Writes lost: 0 of 100 hotels read back (target 0: met)", md)
        missed = dict(SHIFT, after_vs_best=0.5, writes_lost=2, adaptations=[])
        md = report.markdown(missed)
        self.assertIn("target ≥ 0.90: missed", md)
        self.assertIn("(target 0: missed)", md)
        self.assertIn("| (none) |", md)

    def test_axis_steps_are_round(self):
        self.assertEqual(report.nice_step(4915.2), 5000)
        self.assertEqual(report.nice_step(1200), 2000)
        self.assertEqual(report.nice_step(0.3), 0.5)
        self.assertEqual(report.nice_step(100), 100)

    def test_the_plot_has_the_line_the_switch_and_the_reference(self):
        svg = report.svg(SHIFT)
        self.assertTrue(svg.startswith("<svg"))
        self.assertIn("polyline", svg)
        self.assertIn("switch to D-RH", svg)
        self.assertIn("reference: D-RH on {postcode} {tel}", svg)
        self.assertEqual(svg.count('fill="#fde9c8"'), 1)


if __name__ == "__main__":
    unittest.main()
