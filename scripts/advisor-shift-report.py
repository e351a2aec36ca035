#!/usr/bin/env python3
"""The workload-shift experiment's figures from `tessera bench -w advisor-shift`'s JSON report.

Usage: scripts/advisor-shift-report.py SHIFT.json OUT_DIR

Writes OUT_DIR/shift.md (the settings, the adaptations the server logged, throughput before,
during and after, against the references) and OUT_DIR/shift.svg (operations a second, second by
second, with the switch, the builds and the reference for the second workload). Standard
library only; tests: scripts/test_advisor_shift_report.py.
"""

import json
import math
import os
import sys


def load(path):
    """The `advisor_shift` section of a bench report (or the section itself)."""
    with open(path) as f:
        raw = json.load(f)
    return raw.get("advisor_shift", raw)


def sets(subspaces):
    """`{city, address} {tel}`, or `(none)`."""
    if not subspaces:
        return "(none)"
    return " ".join("{" + ", ".join(s) + "}" for s in subspaces)


def switch_time(shift):
    """Seconds from the start at which the clients switched: the first `to` sample's second."""
    return next((s["t_s"] - 1.0 for s in shift["timeline"] if s["workload"] == "to"), None)


def building_spans(timeline):
    """[(start, end)] seconds during which a subspace was being built."""
    spans, start = [], None
    for s in timeline:
        if s["building"] and start is None:
            start = s["t_s"] - 1.0
        elif not s["building"] and start is not None:
            spans.append((start, s["t_s"] - 1.0))
            start = None
    if start is not None:
        spans.append((start, timeline[-1]["t_s"]))
    return spans


def _num(x):
    return "n/a" if x is None else f"{x:,.0f}".replace(",", " ")


def _ratio(x):
    return "n/a" if x is None else f"{x:.2f}"


def markdown(shift):
    best = shift["reference_best"]["throughput_ops_s"]
    start = shift["reference_start"]["throughput_ops_s"]
    lines = [
        f"Settings: {shift['hotels']} hotels, {shift['partitions']} partitions, {shift['threads']} clients, "
        f"{shift['from']} for {shift['before_s']:.0f} s, then {shift['to']} for {shift['after_s']:.0f} s.",
        "",
        f"The space started as {sets(shift['start'])} (the advisor's configuration for {shift['from']}) "
        f"and ended as {sets(shift['end'])}; the advisor's configuration for {shift['to']} is "
        f"{sets(shift['advised_for_to'])}.",
        "",
        "Adaptations the server logged:",
        "",
        "| epoch | term | step | from | to | predicted from | predicted to | periods running |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in shift["adaptations"]:
        step = r["step"]
        a = step["adaptation"]
        event = step["event"] if isinstance(step["event"], str) else "abandoned: " + step["event"]["Abandoned"]["why"]
        lines.append(
            f"| {r['epoch']} | {step['term']} | {event.lower()} | {sets(a['from'])} | {sets(a['to'])} | "
            f"{_num(a['predicted_from_ops_s'])} | {_num(a['predicted_to_ops_s'])} | "
            f"{a['observations']} × {a['period_s']} s |"
        )
    if not shift["adaptations"]:
        lines.append("| (none) | | | | | | | |")
    after_vs_best = shift.get("after_vs_best")
    lines += [
        "",
        "| phase | ops/s (median of seconds) |",
        "|---|---|",
        f"| {shift['from']}, before the switch | {_num(shift['before_ops_s'])} |",
        f"| {shift['to']}, until adapted ({_num(shift['adapted_after_s'])} s after the switch) | {_num(shift['during_ops_s'])} |",
        f"| {shift['to']}, after | {_num(shift['after_ops_s'])} |",
        f"| reference: {shift['to']} on {sets(shift['advised_for_to'])}, fresh space | {_num(best)} |",
        f"| reference: {shift['to']} on {sets(shift['start'])} (no adaptation) | {_num(start)} |",
        "",
        f"After the adaptation: {_ratio(after_vs_best)} of the reference (target ≥ 0.90: "
        f"{'met' if after_vs_best is not None and after_vs_best >= 0.9 else 'missed'}). "
        f"Writes lost: {shift['writes_lost']} of {shift['hotels_checked']} hotels read back (target 0: "
        f"{'met' if shift['writes_lost'] == 0 else 'missed'}).",
        "",
    ]
    return "\n".join(lines)


def nice_step(x):
    """The smallest of 1, 2 and 5 times a power of ten that is at least `x` (> 0)."""
    power = 10 ** math.floor(math.log10(x))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= x)


def svg(shift):
    timeline = shift["timeline"]
    w_px, h_px, left, right, top, bottom = 760, 320, 60, 20, 40, 40
    t_max = max((s["t_s"] for s in timeline), default=1.0)
    best = shift["reference_best"]["throughput_ops_s"]
    v_max = max([s["ops_s"] for s in timeline] + [best, 1.0]) * 1.1

    def x(t):
        return left + t / t_max * (w_px - left - right)

    def y(v):
        return top + (1 - v / v_max) * (h_px - top - bottom)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w_px}" height="{h_px}" '
        f'viewBox="0 0 {w_px} {h_px}" font-family="sans-serif" font-size="10">',
        f'<rect width="{w_px}" height="{h_px}" fill="white"/>',
        f'<text x="{w_px / 2}" y="18" text-anchor="middle" font-size="13">Workload shift {shift["from"]} → '
        f'{shift["to"]} on an adaptive space: ops/s each second</text>',
    ]
    for a, b in building_spans(timeline):
        out.append(f'<rect x="{x(a):.1f}" y="{top}" width="{max(1.0, x(b) - x(a)):.1f}" '
                   f'height="{h_px - top - bottom}" fill="#fde9c8"/>')
    base = h_px - bottom
    out.append(f'<line x1="{left}" y1="{base}" x2="{w_px - right}" y2="{base}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="black"/>')
    step = nice_step(v_max / 5)
    v = 0.0
    while v <= v_max:
        out.append(f'<text x="{left - 4}" y="{y(v) + 3:.1f}" text-anchor="end">{v:.0f}</text>')
        v += step
    for t in range(0, int(t_max) + 1, max(1, int(t_max / 8))):
        out.append(f'<text x="{x(t):.1f}" y="{base + 14}" text-anchor="middle">{t} s</text>')
    out.append(f'<line x1="{left}" y1="{y(best):.1f}" x2="{w_px - right}" y2="{y(best):.1f}" '
               f'stroke="green" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{w_px - right}" y="{y(best) - 4:.1f}" text-anchor="end" fill="green">'
               f'reference: {shift["to"]} on {sets(shift["advised_for_to"])}</text>')
    switched = switch_time(shift)
    if switched is not None:
        out.append(f'<line x1="{x(switched):.1f}" y1="{top}" x2="{x(switched):.1f}" y2="{base}" stroke="red"/>')
        out.append(f'<text x="{x(switched) + 3:.1f}" y="{top + 10}" fill="red">switch to {shift["to"]}</text>')
    points = " ".join(f"{x(s['t_s']):.1f},{y(s['ops_s']):.1f}" for s in timeline)
    out.append(f'<polyline points="{points}" fill="none" stroke="steelblue" stroke-width="1.5"/>')
    out.append(f'<text x="{left + 4}" y="{h_px - 6}">shaded: a subspace being built</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    shift = load(argv[1])
    os.makedirs(argv[2], exist_ok=True)
    with open(os.path.join(argv[2], "shift.md"), "w") as f:
        f.write(markdown(shift))
    with open(os.path.join(argv[2], "shift.svg"), "w") as f:
        f.write(svg(shift))
    print(f"after/best: {_ratio(shift.get('after_vs_best'))}; writes lost: {shift['writes_lost']}")


if __name__ == "__main__":
    main(sys.argv)
