#!/usr/bin/env python3
"""Figures of the advisor's evaluation (docs/advisor.md) from the raw JSON of
`tessera bench -w advisor-eval` (the whole report, or its `advisor_eval` section).

Usage: scripts/advisor-report.py RAW.json OUTDIR

Writes into OUTDIR:
  summary.json   per workload and overall: model error, Kendall's tau-b, whether the advised
                 configuration measured best, its gain over each baseline, and the targets
  results.md     the same as Markdown tables, then every configuration of every workload
  scatter.svg    predicted against measured throughput, every configuration of every workload
  baselines.svg  per workload: the advised configuration against each baseline, measured

Definitions (also in docs/advisor.md):
  error          |predicted - measured| / measured, measured = the median of the runs
  tau-b          Kendall's tau-b between predicted throughputs and measured medians, over the
                 sampled configurations (top and random picks; `tau_b_all` adds the baselines)
  best within    the advised configuration measured best within the runs' spread when its
  spread         best run reaches the worst run of the configuration with the highest median
                 (their [min, max] ranges overlap, or it is that configuration)
  gain           advised median / baseline median - 1
  disturbed      a run during which other processes used more than `quiet_cores` (from the
                 CPU timeline bench-advisor.sh records in raw.json's "env")
  micro          the step-by-step scenarios (mix S: a family's searches alone, M: its
                 modifications alone), reported apart; the targets count the others only
  CPU error      |predicted - measured| / measured of the servers' CPU per operation: the
                 model's (its closed loop's, fsyncs included) against the run's CPU / operations;
                 what is left of the throughput's error is the closed loop's (clients, fsyncs)

Python 3 standard library only.
"""

import json
import math
import os
import sys

TARGET_ERROR = 0.05
TARGET_TAU = 0.9


# ---- statistics -----------------------------------------------------------------------------


def relative_error(predicted, measured):
    """|predicted - measured| / measured."""
    return abs(predicted - measured) / measured


def kendall_tau_b(xs, ys):
    """Kendall's tau-b of two equally long sequences: (concordant - discordant) /
    sqrt((pairs - ties in x) (pairs - ties in y)). None when either sequence is all ties (or
    there are fewer than two items): the coefficient is undefined then."""
    if len(xs) != len(ys):
        raise ValueError("sequences of different lengths")
    n = len(xs)
    concordant = discordant = ties_x = ties_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = (xs[i] > xs[j]) - (xs[i] < xs[j])
            dy = (ys[i] > ys[j]) - (ys[i] < ys[j])
            if dx == 0:
                ties_x += 1
            if dy == 0:
                ties_y += 1
            if dx * dy > 0:
                concordant += 1
            elif dx * dy < 0:
                discordant += 1
    pairs = n * (n - 1) // 2
    denominator = math.sqrt((pairs - ties_x) * (pairs - ties_y))
    if denominator == 0:
        return None
    return (concordant - discordant) / denominator


def label(config):
    """A configuration's subspaces in short: `{city} {city,address}`, or `(none)`."""
    if not config["subspaces"]:
        return "(none)"
    return " ".join("{" + ",".join(s) + "}" for s in config["subspaces"])


def is_sampled(config):
    labels = config["labels"]
    return labels.get("top_rank") is not None or labels.get("random", False)


def advised_of(workload):
    for c in workload["configurations"]:
        if c["labels"].get("advised"):
            return c
    raise ValueError(f"workload {workload['name']} has no advised configuration")


def measured_best(workload):
    """The configuration with the highest measured median (the first, on equal medians)."""
    return max(workload["configurations"], key=lambda c: c["median_ops_s"])


def best_within_spread(advised, best):
    """Whether `advised` is as good as `best` within the runs' spread: its [min, max] reaches
    best's min (or it is best)."""
    return advised is best or advised["max_ops_s"] >= best["min_ops_s"]


def baselines_of(workload):
    """{baseline name: configuration} over the workload's configurations."""
    out = {}
    for c in workload["configurations"]:
        for name in c["labels"].get("baselines", []):
            out[name] = c
    return out


MICRO_MIXES = ("S", "M")


def is_micro(workload):
    return workload.get("mix") in MICRO_MIXES


def predicted_cpu_s(config):
    """The model's servers' CPU per operation: the closed loop's (fsyncs' share included) when
    the prediction has one, else the sum of each class's probability times its cost."""
    if config.get("predicted_server_s"):
        return config["predicted_server_s"]
    return sum(c["probability"] * c["cost_s"] for c in config.get("predicted_classes", []))


def measured_cpu_s(config):
    """The servers' CPU per operation, the median over the runs that report it (None if none)."""
    values = sorted(
        r["work"]["cpu_s"] / r["operations"]
        for r in config["runs"]
        if r.get("work") and r.get("operations")
    )
    if not values:
        return None
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def cpu_errors(configs):
    out = []
    for c in configs:
        measured, predicted = measured_cpu_s(c), predicted_cpu_s(c)
        if measured and predicted:
            out.append((predicted - measured) / measured)
    return out


def _mean(v):
    return sum(v) / len(v) if v else None


def summarize_micro(workload):
    """A step-by-step scenario: how far the model is, in throughput and in CPU, and its bias."""
    configs = workload["configurations"]
    signed = [(c["predicted_ops_s"] - c["median_ops_s"]) / c["median_ops_s"] for c in configs]
    cpu = cpu_errors(configs)
    return {
        "workload": workload["name"],
        "configurations": len(configs),
        "mean_error": _mean([abs(e) for e in signed]),
        "bias": _mean(signed),
        "cpu_error": _mean([abs(e) for e in cpu]),
        "cpu_bias": _mean(cpu),
        "tau_b": kendall_tau_b(
            [c["predicted_ops_s"] for c in configs], [c["median_ops_s"] for c in configs]
        ),
    }


def summarize_workload(workload):
    configs = workload["configurations"]
    errors = [relative_error(c["predicted_ops_s"], c["median_ops_s"]) for c in configs]
    cpu = cpu_errors(configs)
    before = [
        relative_error(c["predicted_ops_s_before_refit"], c["median_ops_s"])
        for c in configs
        if c.get("predicted_ops_s_before_refit")
    ]
    sampled = [c for c in configs if is_sampled(c)]
    advised = advised_of(workload)
    best = measured_best(workload)
    by_measured = sorted(configs, key=lambda c: -c["median_ops_s"])
    baselines = baselines_of(workload)
    gains = {
        name: advised["median_ops_s"] / c["median_ops_s"] - 1.0 for name, c in sorted(baselines.items())
    }
    best_baseline_name = max(baselines, key=lambda n: baselines[n]["median_ops_s"]) if baselines else None
    best_baseline = baselines.get(best_baseline_name)
    return {
        "workload": workload["name"],
        "configurations": len(configs),
        "sampled": len(sampled),
        "mean_error": sum(errors) / len(errors),
        "max_error": max(errors),
        "bias": _mean([(c["predicted_ops_s"] - c["median_ops_s"]) / c["median_ops_s"] for c in configs]),
        "cpu_error": _mean([abs(e) for e in cpu]),
        "mean_error_before_refit": _mean(before),
        "tau_b": kendall_tau_b(
            [c["predicted_ops_s"] for c in sampled], [c["median_ops_s"] for c in sampled]
        ),
        "tau_b_all": kendall_tau_b(
            [c["predicted_ops_s"] for c in configs], [c["median_ops_s"] for c in configs]
        ),
        "advised": label(advised),
        "advised_predicted_ops_s": advised["predicted_ops_s"],
        "advised_measured_ops_s": advised["median_ops_s"],
        "advised_measured_rank": by_measured.index(advised) + 1,
        "measured_best": label(best),
        "measured_best_ops_s": best["median_ops_s"],
        "advised_is_measured_best": advised is best,
        "advised_best_within_spread": best_within_spread(advised, best),
        "gain_over_baselines": gains,
        "best_baseline": best_baseline_name,
        "gain_over_best_baseline": gains.get(best_baseline_name),
        "not_below_best_baseline": best_baseline is None
        or best_within_spread(advised, best_baseline)
        or advised["median_ops_s"] >= best_baseline["median_ops_s"],
    }


def disturbed(run, env):
    """Whether something else used more than env's `quiet_cores` while `run` was timed: some
    sample of `other_cores_timeline` ([unix time, cores], each over the 2 s before it) overlaps
    the run. None without a timeline (or a run without its start time)."""
    timeline = (env or {}).get("other_cores_timeline")
    start = run.get("started_unix_s")
    if not timeline or start is None:
        return None
    end = start + run.get("elapsed_s", 0.0)
    quiet = env.get("quiet_cores", 0.3)
    return any(o > quiet for t, o in timeline if t > start and t - 2.0 < end)


def summarize(report, env=None):
    main = [w for w in report["workloads"] if not is_micro(w)]
    micro = [summarize_micro(w) for w in report["workloads"] if is_micro(w)]
    workloads = [summarize_workload(w) for w in main]
    errors = [
        relative_error(c["predicted_ops_s"], c["median_ops_s"])
        for w in main
        for c in w["configurations"]
    ]
    taus = [w["tau_b"] for w in workloads]
    overall = {
        "configurations": len(errors),
        "mean_error": sum(errors) / len(errors) if errors else None,
        "error_stdev": _stdev(errors),
        "min_tau_b": min((t for t in taus if t is not None), default=None),
        "advised_best_within_spread": sum(w["advised_best_within_spread"] for w in workloads),
        "advised_strictly_best": sum(w["advised_is_measured_best"] for w in workloads),
        "workloads": len(workloads),
    }
    flags = [disturbed(r, env) for w in report["workloads"] for c in w["configurations"] for r in c["runs"]]
    if any(f is not None for f in flags):
        overall["runs"] = len(flags)
        overall["runs_disturbed"] = sum(bool(f) for f in flags)
        overall["other_cores_max"] = env.get("other_cores_max")
    targets = {
        "mean_error_le_5pct": {
            "value": overall["mean_error"],
            "met": overall["mean_error"] is not None and overall["mean_error"] <= TARGET_ERROR,
        },
        "tau_b_ge_0.9_every_workload": {
            "value": overall["min_tau_b"],
            "met": all(t is not None and t >= TARGET_TAU for t in taus),
        },
        "advised_best_within_spread_every_workload": {
            "value": f"{overall['advised_best_within_spread']}/{len(workloads)}",
            "met": all(w["advised_best_within_spread"] for w in workloads),
        },
        "never_below_best_baseline": {
            "value": f"{sum(w['not_below_best_baseline'] for w in workloads)}/{len(workloads)}",
            "met": all(w["not_below_best_baseline"] for w in workloads),
        },
    }
    before = [
        relative_error(c["predicted_ops_s_before_refit"], c["median_ops_s"])
        for w in main
        for c in w["configurations"]
        if c.get("predicted_ops_s_before_refit")
    ]
    if before:
        overall["mean_error_before_refit"] = _mean(before)
    cpu = [e for w in main for e in cpu_errors(w["configurations"])]
    if cpu:
        overall["cpu_error"] = _mean([abs(e) for e in cpu])
    return {
        "settings": settings_of(report),
        "overall": overall,
        "targets": targets,
        "micro": micro,
        "workloads": workloads,
    }


def _stdev(v):
    if len(v) < 2:
        return None
    m = sum(v) / len(v)
    return math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))


def settings_of(report):
    keys = ["hotels", "partitions", "threads", "duration_s", "warmup_s", "repetitions", "seed",
            "sample_top", "sample_random", "calibration_source", "calibration", "refit"]
    return {k: report.get(k) for k in keys}


def load(path):
    """(the advisor_eval section, the env bench-advisor.sh added or {})."""
    with open(path) as f:
        raw = json.load(f)
    return raw.get("advisor_eval", raw), raw.get("env", {})


# ---- Markdown -------------------------------------------------------------------------------


def _pct(x, signed=False):
    if x is None:
        return "–"
    return f"{x * 100:+.1f} %" if signed else f"{x * 100:.1f} %"


def _num(x):
    return "–" if x is None else f"{x:.2f}"


def _ops(x):
    return f"{x:,.0f}".replace(",", " ")


def _kinds(config):
    labels = config["labels"]
    kinds = []
    if labels.get("advised"):
        kinds.append("**advised**")
    if labels.get("top_rank") is not None and not labels.get("advised"):
        kinds.append(f"top {labels['top_rank']}")
    if labels.get("random"):
        kinds.append("random")
    kinds.extend(labels.get("baselines", []))
    return ", ".join(kinds)


def markdown(report, summary, env=None):
    s = summary["settings"]
    lines = [
        f"Settings: {s['hotels']} hotels, {s['partitions']} partitions, {s['threads']} clients, "
        f"{s['repetitions']} run(s) of {s['duration_s']:g} s after {s['warmup_s']:g} s of warm-up per "
        f"configuration, seed {s['seed']}, calibration: {s['calibration_source']}"
        + (f", refitted on the micro-scenarios' {s['refit']['runs']} runs." if s.get("refit") else "."),
        "",
    ]
    if summary.get("micro"):
        lines += [
            "Step by step (seed 000 §4.5): each family's searches alone (S) and modifications alone (M), "
            "predicted against measured; signed errors show the bias.",
            "",
            "| scenario | configs | mean error | bias | CPU error | CPU bias | τ-b |",
            "|---|---|---|---|---|---|---|",
        ]
        for m in summary["micro"]:
            lines.append(
                f"| {m['workload']} | {m['configurations']} | {_pct(m['mean_error'])} | {_pct(m['bias'], True)} "
                f"| {_pct(m['cpu_error'])} | {_pct(m['cpu_bias'], True)} | {_num(m['tau_b'])} |"
            )
        lines.append("")
    lines += [
        "| workload | configs | mean error | bias | CPU error | before refit | τ-b sampled | τ-b all | advised | predicted | measured | measured rank | measured best | best within spread | gain over best baseline |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for w in summary["workloads"]:
        gain = w["gain_over_best_baseline"]
        lines.append(
            f"| {w['workload']} | {w['configurations']} | {_pct(w['mean_error'])} | {_pct(w['bias'], True)} "
            f"| {_pct(w['cpu_error'])} | {_pct(w['mean_error_before_refit'])} | {_num(w['tau_b'])} "
            f"| {_num(w['tau_b_all'])} | {w['advised']} | {_ops(w['advised_predicted_ops_s'])} "
            f"| {_ops(w['advised_measured_ops_s'])} | {w['advised_measured_rank']} | {w['measured_best']} "
            f"| {'yes' if w['advised_best_within_spread'] else 'no'} "
            f"| {_pct(gain, True)} ({w['best_baseline']}) |"
        )
    o = summary["overall"]
    lines += [
        "",
        f"Overall: mean error {_pct(o['mean_error'])} (standard deviation {_pct(o['error_stdev'])}) over "
        f"{o['configurations']} configurations; lowest τ-b {_num(o['min_tau_b'])}; advised configuration best "
        f"within the runs' spread in {o['advised_best_within_spread']} of {o['workloads']} workloads "
        f"(strictly best in {o['advised_strictly_best']}).",
        "",
    ]
    if "runs_disturbed" in o:
        lines += [
            f"Other processes used more than {env.get('quiet_cores', 0.3):g} cores during {o['runs_disturbed']} of "
            f"{o['runs']} timed runs (marked * below; at most {o['other_cores_max']:.2f} cores).",
            "",
        ]
    lines += [
        "| target | value | met |",
        "|---|---|---|",
    ]
    for name, t in summary["targets"].items():
        v = t["value"]
        if isinstance(v, float):
            v = _pct(v) if "error" in name else _num(v)
        lines.append(f"| {name} | {v} | {'yes' if t['met'] else 'no'} |")
    baseline_names = sorted({n for w in summary["workloads"] for n in w["gain_over_baselines"]})
    lines += ["", "Gain of the advised configuration over each baseline (measured medians):", "",
              "| workload | " + " | ".join(baseline_names) + " |",
              "|---|" + "---|" * len(baseline_names)]
    for w in summary["workloads"]:
        cells = [_pct(w["gain_over_baselines"].get(n), True) for n in baseline_names]
        lines.append(f"| {w['workload']} | " + " | ".join(cells) + " |")
    lines += ["", "## Every configuration", ""]
    for w in report["workloads"]:
        lines += [f"### {w['name']}", "",
                  "| subspaces | why | predicted | measured median | runs | error |",
                  "|---|---|---|---|---|---|"]
        for c in sorted(w["configurations"], key=lambda c: -c["predicted_ops_s"]):
            runs = ", ".join(_ops(r["throughput_ops_s"]) + ("*" if disturbed(r, env) else "") for r in c["runs"])
            err = relative_error(c["predicted_ops_s"], c["median_ops_s"])
            lines.append(
                f"| {label(c)} | {_kinds(c)} | {_ops(c['predicted_ops_s'])} | {_ops(c['median_ops_s'])} "
                f"| {runs} | {_pct(err)} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


# ---- SVG ------------------------------------------------------------------------------------

FAMILY_COLOURS = {"A": "#1f77b4", "B": "#d62728", "C": "#2ca02c"}


def _esc(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _log_ticks(lo, hi):
    """1, 2, 5 × powers of ten within [lo, hi]."""
    ticks = []
    e = math.floor(math.log10(lo))
    while 10 ** e <= hi:
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo <= v <= hi:
                ticks.append(v)
        e += 1
    return ticks


def _nice(v):
    """The smallest 1, 2 or 5 × 10^k (or 2.5 × 10^k) not below v > 0: a round top for an axis."""
    e = 10 ** math.floor(math.log10(v))
    return next(m * e for m in (1, 2, 2.5, 5, 10) if m * e >= v)


def _marker(kind, x, y, colour):
    if kind == "advised":
        pts = f"{x},{y - 7} {x + 7},{y} {x},{y + 7} {x - 7},{y}"
        return f'<polygon points="{pts}" fill="{colour}" stroke="black" stroke-width="1"/>'
    if kind == "baseline":
        pts = f"{x},{y - 5} {x + 5},{y + 4} {x - 5},{y + 4}"
        return f'<polygon points="{pts}" fill="none" stroke="{colour}" stroke-width="1.5"/>'
    if kind == "random":
        return f'<rect x="{x - 4}" y="{y - 4}" width="8" height="8" fill="none" stroke="{colour}" stroke-width="1.5"/>'
    return f'<circle cx="{x}" cy="{y}" r="4" fill="{colour}" fill-opacity="0.7"/>'


def _kind(config):
    labels = config["labels"]
    if labels.get("advised"):
        return "advised"
    if labels.get("top_rank") is not None:
        return "top"
    if labels.get("random"):
        return "random"
    return "baseline"


def svg_scatter(report):
    """Predicted against measured throughput (log-log), the diagonal and ±5 %."""
    points = [(w, c) for w in report["workloads"] for c in w["configurations"]]
    values = [v for _, c in points for v in (c["predicted_ops_s"], c["median_ops_s"]) if v > 0]
    lo = 10 ** math.floor(math.log10(min(values))) if values else 1
    hi = 10 ** math.ceil(math.log10(max(values))) if values else 10
    size, left, top, right, bottom = 520, 70, 30, 190, 60
    w_px, h_px = size + left + right, size + top + bottom

    def pos(v):
        return (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * size

    def px(v):
        return left + pos(v)

    def py(v):
        return top + size - pos(v)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w_px}" height="{h_px}" '
           f'viewBox="0 0 {w_px} {h_px}" font-family="sans-serif" font-size="11">',
           f'<rect width="{w_px}" height="{h_px}" fill="white"/>',
           f'<text x="{left + size / 2}" y="18" text-anchor="middle" font-size="13">'
           'Predicted against measured throughput (ops/s), every workload</text>']
    for t in _log_ticks(lo, hi):
        out.append(f'<line x1="{px(t):.1f}" y1="{top}" x2="{px(t):.1f}" y2="{top + size}" stroke="#eee"/>')
        out.append(f'<line x1="{left}" y1="{py(t):.1f}" x2="{left + size}" y2="{py(t):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{px(t):.1f}" y="{top + size + 15}" text-anchor="middle">{t:g}</text>')
        out.append(f'<text x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{size}" height="{size}" fill="none" stroke="black"/>')
    # The diagonal (perfect prediction) and the ±5 % band around it.
    for factor, dash in ((1.0, ""), (1.05, ' stroke-dasharray="4 3"'), (1 / 1.05, ' stroke-dasharray="4 3"')):
        # predicted = factor × measured, clipped to the plot.
        x0, x1 = max(lo, lo / factor), min(hi, hi / factor)
        out.append(f'<line x1="{px(x0):.1f}" y1="{py(x0 * factor):.1f}" x2="{px(x1):.1f}" '
                   f'y2="{py(x1 * factor):.1f}" stroke="grey"{dash}/>')
    for w, c in points:
        if c["predicted_ops_s"] <= 0 or c["median_ops_s"] <= 0:
            continue
        colour = FAMILY_COLOURS.get(w["name"][0], "black")
        x, y = px(c["median_ops_s"]), py(c["predicted_ops_s"])
        # Whiskers: the runs' spread.
        out.append(f'<line x1="{px(max(lo, c["min_ops_s"])):.1f}" y1="{y:.1f}" x2="{px(c["max_ops_s"]):.1f}" '
                   f'y2="{y:.1f}" stroke="{colour}" stroke-opacity="0.5"/>')
        out.append(_marker(_kind(c), round(x, 1), round(y, 1), colour))
    out.append(f'<text x="{left + size / 2}" y="{top + size + 38}" text-anchor="middle">measured (median of the runs; whiskers: min-max)</text>')
    out.append(f'<text transform="translate(18 {top + size / 2}) rotate(-90)" text-anchor="middle">predicted by the model</text>')
    lx, ly = left + size + 20, top + 10
    for i, (fam, colour) in enumerate(FAMILY_COLOURS.items()):
        out.append(f'<rect x="{lx}" y="{ly + i * 18}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{lx + 18}" y="{ly + i * 18 + 10}">workload {fam}</text>')
    ly += 70
    for i, (kind, text) in enumerate((("advised", "advised"), ("top", "top 2-5"), ("random", "random"),
                                      ("baseline", "baseline"))):
        out.append(_marker(kind, lx + 6, ly + i * 18 + 6, "#555"))
        out.append(f'<text x="{lx + 18}" y="{ly + i * 18 + 10}">{text}</text>')
    ly += 80
    out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 14}" y2="{ly}" stroke="grey"/>')
    out.append(f'<text x="{lx + 18}" y="{ly + 4}">exact</text>')
    out.append(f'<line x1="{lx}" y1="{ly + 16}" x2="{lx + 14}" y2="{ly + 16}" stroke="grey" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{lx + 18}" y="{ly + 20}">±5 %</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def svg_baselines(report):
    """Per workload, bars of the measured medians of the advised configuration and of each
    baseline (whiskers: min-max of the runs; a black tick: the prediction)."""
    workloads = report["workloads"]
    cols = 3
    rows = max(1, math.ceil(len(workloads) / cols))
    pw, ph = 300, 230
    left, top, bottom = 50, 40, 70
    w_px, h_px = cols * pw + 20, rows * ph + 50
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w_px}" height="{h_px}" '
           f'viewBox="0 0 {w_px} {h_px}" font-family="sans-serif" font-size="10">',
           f'<rect width="{w_px}" height="{h_px}" fill="white"/>',
           f'<text x="{w_px / 2}" y="20" text-anchor="middle" font-size="13">Advised configuration against the '
           'baselines: measured ops/s (bars: median; whiskers: min-max; tick: predicted)</text>']
    for k, w in enumerate(workloads):
        ox, oy = (k % cols) * pw + 10, (k // cols) * ph + 30
        bars = [("advised", advised_of(w))]
        bars += [(name, c) for name, c in sorted(baselines_of(w).items())]
        top_value = _nice(max(max(c["max_ops_s"], c["predicted_ops_s"]) for _, c in bars))
        vmax = top_value * 1.1
        plot_h = ph - top - bottom + 20
        plot_w = pw - left - 10
        bw = plot_w / len(bars)

        def y(v):
            return oy + top + plot_h - v / vmax * plot_h

        out.append(f'<text x="{ox + pw / 2}" y="{oy + 22}" text-anchor="middle" font-size="12">{_esc(w["name"])}</text>')
        base_y = oy + top + plot_h
        out.append(f'<line x1="{ox + left}" y1="{base_y}" x2="{ox + left + plot_w}" y2="{base_y}" stroke="black"/>')
        out.append(f'<line x1="{ox + left}" y1="{oy + top}" x2="{ox + left}" y2="{base_y}" stroke="black"/>')
        for frac in (0.0, 0.5, 1.0):
            v = top_value * frac
            out.append(f'<text x="{ox + left - 4}" y="{y(v) + 3:.1f}" text-anchor="end">{v:.0f}</text>')
        colour = FAMILY_COLOURS.get(w["name"][0], "grey")
        for i, (name, c) in enumerate(bars):
            x0 = ox + left + i * bw + bw * 0.15
            width = bw * 0.7
            fill = colour if name == "advised" else "#bbb"
            out.append(f'<rect x="{x0:.1f}" y="{y(c["median_ops_s"]):.1f}" width="{width:.1f}" '
                       f'height="{base_y - y(c["median_ops_s"]):.1f}" fill="{fill}"/>')
            cx = x0 + width / 2
            out.append(f'<line x1="{cx:.1f}" y1="{y(c["min_ops_s"]):.1f}" x2="{cx:.1f}" y2="{y(c["max_ops_s"]):.1f}" stroke="black"/>')
            out.append(f'<line x1="{x0:.1f}" y1="{y(c["predicted_ops_s"]):.1f}" x2="{x0 + width:.1f}" '
                       f'y2="{y(c["predicted_ops_s"]):.1f}" stroke="black" stroke-width="2"/>')
            out.append(f'<text x="{cx:.1f}" y="{y(c["max_ops_s"]) - 3:.1f}" text-anchor="middle" font-size="9">'
                       f'{c["median_ops_s"]:.0f}</text>')
            out.append(f'<text transform="translate({cx:.1f} {base_y + 8}) rotate(40)" font-size="9">{_esc(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    report, env = load(argv[1])
    out = argv[2]
    os.makedirs(out, exist_ok=True)
    summary = summarize(report, env)
    if env:
        summary["env"] = {k: v for k, v in env.items() if k != "other_cores_timeline"}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(markdown(report, summary, env))
    with open(os.path.join(out, "scatter.svg"), "w") as f:
        f.write(svg_scatter(report))
    with open(os.path.join(out, "baselines.svg"), "w") as f:
        f.write(svg_baselines(report))
    for name, t in summary["targets"].items():
        print(f"{name}: {t['value']} ({'met' if t['met'] else 'missed'})")


if __name__ == "__main__":
    main(sys.argv)
