#!/usr/bin/env python3
"""Charts and tables of Tessera beside its peers, from the JSON summary that
scripts/bench-peers.sh prints (e.g. docs/results/peers-9a32bfd.json).

Usage: scripts/plot-bench.py SUMMARY.json [--out DIR] [--markdown]

  --out DIR    writes, for each part of the summary (secondary, ycsb) that has results:
                 peers-PART-throughput.svg  median ops/s per query or workload, a bar per system
                 peers-PART-latency.svg     p50 and p99 per query or workload, a bar per system
  --markdown   prints to stdout, per part, one table per query or workload with every system side
               by side: ops/s (runs), p50, p99, server CPU per op (and per object), and Tessera's
               ratio over each system (docs/benchmarks.md is regenerated from it)

Whatever the summary lacks (a part, a system, a workload, a field) is left out of the charts and
shown as "–" in the tables. A file that is not such a summary: a message and exit status 2.
The output depends only on the JSON: the same file gives the same bytes.

Python 3 standard library only.
"""

import argparse
import math
import json
import os
import re
import sys

# Display order and names; a system the summary has but this list lacks comes after, by name.
SYSTEMS = ["tessera", "postgres", "redis", "redis-everysec", "etcd", "cassandra"]
NAMES = {"tessera": "Tessera", "postgres": "PostgreSQL", "redis": "Redis",
         "redis-everysec": "Redis (everysec)", "etcd": "etcd", "cassandra": "Cassandra"}
COLOURS = {"tessera": "#f28e2b", "postgres": "#4e79a7", "redis": "#e15759",
           "redis-everysec": "#ff9d9a", "etcd": "#76b7b2", "cassandra": "#59a14f"}
OTHER_COLOURS = ["#b07aa1", "#9c755f", "#bab0ac", "#edc948"]
PARTS = {"secondary": "Searches on secondary attributes", "ycsb": "YCSB"}
# Per query or workload: its label, a short description for the chart, and a longer one for the
# table's heading naming the operations whose latency is measured (as bench-peers.sh picks them:
# the searches, the reads, or E's scans).
QUERIES = {
    "eq1": ("eq1", "city = C, ~100 rows", "city = C, ~100 matches; latency of the searches"),
    "eq2": ("eq2", "city, age: ~1 row", "city = C and age = A, ~1 match; latency of the searches"),
    "range": ("range", "score range, ~100 rows", "score over 0.1 %, ~100 matches; latency of the searches"),
    "a": ("YCSB A", "50 % updates", "50 % reads, 50 % updates; latency of the reads"),
    "b": ("YCSB B", "5 % updates", "95 % reads, 5 % updates; latency of the reads"),
    "c": ("YCSB C", "reads only", "reads only; latency of the reads"),
    "d": ("YCSB D", "latest reads", "95 % reads of recent records, 5 % inserts; latency of the reads"),
    "e": ("YCSB E", "short scans", "95 % scans of 1-100 records, 5 % inserts; latency of the scans"),
    "f": ("YCSB F", "read-modify-write", "50 % reads, 50 % read-modify-writes; latency of the reads"),
}
NUMBER_FIELDS = ["per_s", "p50_us", "p99_us", "server_cpu_us_per_op", "objects_per_op",
                 "server_cpu_us_per_object"]
RATIO_PREFIX = "tessera_over_"


class Malformed(Exception):
    pass


# ---- reading and checking -------------------------------------------------------------------


def _number(value, where):
    """A finite number >= 0, or None when absent (null); anything else is malformed."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise Malformed(f"{where}: expected a number >= 0, found {json.dumps(value)}")
    return value


def _object(value, where):
    if not isinstance(value, dict):
        raise Malformed(f"{where}: expected an object, found {type(value).__name__}")
    return value


def check(summary):
    """The summary, checked so that rendering never meets a surprise; raises Malformed."""
    _object(summary, "the file")
    config = _object(summary.get("config", {}), "config")
    _number(config.get("records"), "config.records")
    _number(config.get("runs"), "config.runs")
    if not any(p in summary for p in PARTS):
        raise Malformed(f"no part with results ({' or '.join(PARTS)}): not a bench-peers.sh summary?")
    for part in PARTS:
        if part not in summary:
            continue
        for key, value in _object(summary[part], part).items():
            where = f"{part}.{key}"
            if key.startswith(RATIO_PREFIX):
                for kind, r in _object(value, where).items():
                    _number(r, f"{where}.{kind}")
                continue
            _number(_object(value, where).get("load_per_s"), f"{where}.load_per_s")
            for kind, q in value.items():
                if kind == "load_per_s":
                    continue
                _object(q, f"{where}.{kind}")
                for field in NUMBER_FIELDS:
                    _number(q.get(field), f"{where}.{kind}.{field}")
                runs = q.get("runs", [])
                if not isinstance(runs, list):
                    raise Malformed(f"{where}.{kind}.runs: expected a list")
                for i, r in enumerate(runs):
                    if _number(r, f"{where}.{kind}.runs[{i}]") is None:
                        raise Malformed(f"{where}.{kind}.runs[{i}]: null")
    return summary


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
    except OSError as e:
        raise Malformed(f"cannot read: {e.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise Malformed(f"not JSON: {e}")
    return check(summary)


def systems_of(part):
    """The systems of a part with results, in display order."""
    found = [k for k in part if not k.startswith(RATIO_PREFIX)]
    return [s for s in SYSTEMS if s in found] + sorted(s for s in found if s not in SYSTEMS)


def kinds_of(part, part_name):
    """The queries or workloads any system of a part ran, in a fixed order."""
    found = {k for s in systems_of(part) for k in part[s] if k != "load_per_s"}
    order = ["eq1", "eq2", "range"] if part_name == "secondary" else list("abcdef")
    return [k for k in order if k in found] + sorted(found - set(order))


def ratio(part, peer, kind):
    """Tessera's throughput over the peer's: bench-peers.sh's own when it printed one, else
    computed from the medians the same way (3 significant digits); None without both."""
    given = part.get(RATIO_PREFIX + peer, {}).get(kind)
    if given is not None:
        return given
    t = part.get("tessera", {}).get(kind, {}).get("per_s")
    p = part.get(peer, {}).get(kind, {}).get("per_s")
    return float(f"{t / p:.3g}") if t is not None and p else None


def name(system, config=None):
    """Tessera, PostgreSQL 15.18, ...: the version number from the config when it has one."""
    n = NAMES.get(system, system)
    m = re.search(r"\d+(\.\d+)+", str((config or {}).get(system, "")))
    return f"{n} {m.group(0)}" if m and system != "tessera" else n


def colour(system, systems):
    if system in COLOURS:
        return COLOURS[system]
    others = [s for s in systems if s not in COLOURS]
    return OTHER_COLOURS[others.index(system) % len(OTHER_COLOURS)]


# ---- Markdown -------------------------------------------------------------------------------


def _int(x):
    return "–" if x is None else f"{x:,.0f}".replace(",", " ")


def _dec(x):
    """One decimal below 100, none above (CPU µs)."""
    return "–" if x is None else (_int(x) if x >= 100 else f"{x:.1f}")


def _small(x):
    """Two decimals below 10 (CPU µs per object)."""
    return "–" if x is None else (_dec(x) if x >= 10 else f"{x:.2f}")


def _sig3(x):
    """A ratio to 3 significant digits, trailing zeros kept: 1.90, 39.5, 0.732."""
    if x is None:
        return "–"
    return _int(x) if x >= 1000 else f"{x:#.3g}".rstrip(".")


def markdown(summary):
    out = []
    config = summary.get("config", {})
    for part_name, title in PARTS.items():
        part = summary.get(part_name)
        if not part or not systems_of(part):
            continue
        systems = systems_of(part)
        unit = "q/s" if part_name == "secondary" else "ops/s"
        out.append(f"<!-- scripts/plot-bench.py --markdown: {title}, from the summary of "
                   f"{config.get('git', '?')} -->\n")
        for kind in kinds_of(part, part_name):
            label, _, long = QUERIES.get(kind, (kind, "", ""))
            out.append(f"#### {label}" + (f" ({long})" if long else "") + "\n")
            per_object = any(part[s].get(kind, {}).get("server_cpu_us_per_object") is not None for s in systems)
            head = ["system", f"{unit} (runs)", "p50 µs", "p99 µs", "server CPU µs/op"]
            head += ["server CPU µs/object"] if per_object else []
            head += ["Tessera / this"]
            out.append("| " + " | ".join(head) + " |")
            out.append("|---|" + "---:|" * (len(head) - 1))
            for s in systems:
                q = part[s].get(kind)
                if q is None:
                    continue
                runs = ", ".join(_int(r) for r in q.get("runs", []))
                row = [name(s, config), _int(q.get("per_s")) + (f" ({runs})" if runs else ""),
                       _int(q.get("p50_us")), _int(q.get("p99_us")), _dec(q.get("server_cpu_us_per_op"))]
                row += [_small(q.get("server_cpu_us_per_object"))] if per_object else []
                row += ["–" if s == "tessera" else _sig3(ratio(part, s, kind))]
                out.append("| " + " | ".join(row) + " |")
            out.append("")
        loads = [(s, part[s]["load_per_s"]) for s in systems if part[s].get("load_per_s") is not None]
        if loads:
            what = "puts" if part_name == "secondary" else "records"
            first, *rest = loads
            out.append(f"Loads: {NAMES.get(first[0], first[0])} {_int(first[1])} {what}/s"
                       + "".join(f", {NAMES.get(s, s)} {_int(v)}" for s, v in rest) + ".\n")
    return "\n".join(out)


# ---- SVG ------------------------------------------------------------------------------------


def _esc(text):
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _nice(v):
    """The smallest 1, 2, 2.5 or 5 × 10^k not below v > 0: a round top for a linear axis."""
    e = 10 ** math.floor(math.log10(v))
    return next(m * e for m in (1, 2, 2.5, 5, 10) if m * e >= v)


def _short(v):
    """A throughput in 3 significant digits: 619, 3.09k, 146k."""
    v = float(f"{v:.3g}")
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def _latency(v):
    return f"{v / 1000:g} ms" if v >= 1000 else f"{v:g} µs"


class Scale:
    """Value -> pixels above the baseline. Logarithmic when the values span more than 10×
    (etcd and Cassandra run 10-40× below the others), linear from 0 otherwise."""

    def __init__(self, values, height):
        self.height = height
        lo, hi = min(values), max(values)
        self.log = hi / lo > 10
        if self.log:
            # A decade below the smallest value and above the largest, so that no bar is empty.
            self.lo = 10 ** (math.ceil(math.log10(lo)) - 1)
            self.hi = 10 ** (math.floor(math.log10(hi)) + 1)
        else:
            self.lo, self.hi = 0, _nice(hi)

    def __call__(self, v):
        if self.log:
            f = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            f = v / self.hi
        return f * self.height

    def ticks(self):
        """(value, labelled): 1, 2, 5 × 10^k on a log axis (labels on the powers of ten when
        the axis spans more than 3 decades), fifths of the top on a linear one."""
        if not self.log:
            return [(self.hi * i / 5, True) for i in range(6)]
        decades = round(math.log10(self.hi / self.lo))
        ticks = []
        for e in range(round(math.log10(self.lo)), round(math.log10(self.hi)) + 1):
            for m in (1, 2, 5):
                if m * 10 ** e <= self.hi:
                    ticks.append((m * 10 ** e, m == 1 or decades <= 3))
        return ticks


def svg_chart(title, subtitle, groups, systems, bars, axis, tick_label, legend):
    """A grouped bar chart. groups: [(label, description)]; bars[(group index, system)]: the
    layers of one bar, [(value, relative width, fill opacity, label or None, tooltip)], drawn in
    order. axis: the value axis's title (with its unit); legend: [(label, fill, opacity)]."""
    values = [v for layers in bars.values() for v, *_ in layers if v > 0]
    bw, pad, left, top, plot_h, legend_w = 30, 36, 80, 80, 320, 190
    group_w = len(systems) * bw + pad
    plot_w = max(len(groups) * group_w, 300)
    # Wide enough for the title too (about 8.5 px a character in bold 14 px sans-serif).
    w_px, h_px = max(left + plot_w + legend_w, left + round(len(title) * 8.5) + 20), top + plot_h + 55
    base = top + plot_h
    scale = Scale(values, plot_h) if values else None
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w_px}" height="{h_px}" '
           f'viewBox="0 0 {w_px} {h_px}" font-family="sans-serif" font-size="11">',
           f'<rect width="{w_px}" height="{h_px}" fill="white"/>',
           f'<text x="{left}" y="24" font-size="14" font-weight="bold">{_esc(title)}</text>',
           f'<text x="{left}" y="44" fill="#444">{_esc(subtitle)}</text>']
    if scale:
        for v, labelled in scale.ticks():
            y = base - scale(v)
            out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#e4e4e4"/>')
            if labelled:
                out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_esc(tick_label(v))}</text>')
    axis_title = axis + (" (log scale)" if scale and scale.log else "")
    out.append(f'<text transform="translate(16 {top + plot_h / 2}) rotate(-90)" text-anchor="middle">'
               f'{_esc(axis_title)}</text>')
    for g, (label, description) in enumerate(groups):
        gx = left + g * group_w + pad / 2
        out.append(f'<text x="{gx + len(systems) * bw / 2:.1f}" y="{base + 18}" text-anchor="middle" '
                   f'font-weight="bold">{_esc(label)}</text>')
        out.append(f'<text x="{gx + len(systems) * bw / 2:.1f}" y="{base + 33}" text-anchor="middle" '
                   f'fill="#444">{_esc(description)}</text>')
        for i, s in enumerate(systems):
            for v, width, opacity, text, tooltip in bars.get((g, s), []):
                if v <= 0:
                    continue  # nothing to draw on a log axis; the tables have the number
                h = scale(v)
                x = gx + i * bw + bw * (1 - width) / 2 + 2
                out.append(f'<rect x="{x:.1f}" y="{base - h:.1f}" width="{bw * width - 4:.1f}" '
                           f'height="{h:.1f}" fill="{colour(s, systems)}" fill-opacity="{opacity}" '
                           f'data-system="{_esc(s)}" data-value="{v:g}"><title>{_esc(tooltip)}</title></rect>')
                if text:
                    out.append(f'<text x="{gx + i * bw + bw / 2:.1f}" y="{base - h - 4:.1f}" '
                               f'text-anchor="middle" font-size="9">{_esc(text)}</text>')
    out.append(f'<line x1="{left}" y1="{base}" x2="{left + plot_w}" y2="{base}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="black"/>')
    lx, ly = left + plot_w + 20, top
    out.append('<g class="legend">')
    for i, (label, fill, opacity) in enumerate(legend):
        out.append(f'<rect x="{lx}" y="{ly + i * 20}" width="14" height="14" fill="{fill}" fill-opacity="{opacity}"/>')
        out.append(f'<text x="{lx + 20}" y="{ly + i * 20 + 11}">{_esc(label)}</text>')
    out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _subtitle(config, what):
    bits = [what]
    if config.get("runs") is not None:
        bits.append(f"median of {config['runs']:g} runs" + (f" of {config['duration_s']:g} s" if
                                                         isinstance(config.get("duration_s"), (int, float)) else ""))
    if config.get("threads") is not None:
        bits.append(f"{config['threads']} closed-loop tasks")
    if config.get("server_cpu") is not None:
        bits.append(f"server on CPU {config['server_cpu']}, client on CPU {config.get('client_cpu', '?')}")
    return "; ".join(bits)


def _title(config, part_name, what):
    bits = []
    if config.get("records") is not None:
        bits.append(f"{_int(config['records'])} records")
    if config.get("git"):
        bits.append(f"git {config['git']}")
    return f"{PARTS[part_name]}: {what}" + (f" ({', '.join(bits)})" if bits else "")


def charts(summary):
    """{file name: SVG text} for every part with results."""
    config = summary.get("config", {})
    out = {}
    for part_name in PARTS:
        part = summary.get(part_name)
        if not part or not systems_of(part):
            continue
        systems, kinds = systems_of(part), kinds_of(part, part_name)
        groups = [QUERIES.get(k, (k, ""))[:2] for k in kinds]
        legend = [(name(s, config), colour(s, systems), 1) for s in systems]
        unit = "queries/s" if part_name == "secondary" else "operations/s"
        throughput, latency = {}, {}
        for g, kind in enumerate(kinds):
            for s in systems:
                q = part[s].get(kind, {})
                if q.get("per_s") is not None:
                    throughput[(g, s)] = [(q["per_s"], 1, 1, _short(q["per_s"]),
                                           f"{name(s, config)}, {kind}: {_int(q['per_s'])} {unit}")]
                # The p99 bar light and wide behind the p50 bar, solid and narrow.
                layers = [(q[f], w, o, None, f"{name(s, config)}, {kind}: {f[:3]} {_int(q[f])} µs")
                          for f, w, o in (("p99_us", 1, 0.35), ("p50_us", 0.6, 1)) if q.get(f) is not None]
                if layers:
                    latency[(g, s)] = layers
        if throughput:
            out[f"peers-{part_name}-throughput.svg"] = svg_chart(
                _title(config, part_name, "throughput"),
                _subtitle(config, "higher is better"), groups, systems, throughput, unit, _short, legend)
        if latency:
            out[f"peers-{part_name}-latency.svg"] = svg_chart(
                _title(config, part_name, "latency, p50 and p99"),
                _subtitle(config, "lower is better"), groups, systems, latency, "latency", _latency,
                legend + [("p50 (solid, narrow)", "#666", 1), ("p99 (light, wide)", "#666", 0.35)])
    return out


# ---- command line ---------------------------------------------------------------------------


def main(argv):
    ap = argparse.ArgumentParser(prog="plot-bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("summary", help="the JSON summary bench-peers.sh printed")
    ap.add_argument("--out", help="the directory to write the SVG charts into")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown on stdout")
    args = ap.parse_args(argv[1:])
    if not args.out and not args.markdown:
        ap.error("nothing to do: give --out DIR, --markdown or both")
    try:
        summary = load(args.summary)
    except Malformed as e:
        print(f"plot-bench.py: {args.summary}: {e}", file=sys.stderr)
        return 2
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        written = charts(summary)
        for part_name in PARTS:
            for what in ("throughput", "latency"):
                path = os.path.join(args.out, f"peers-{part_name}-{what}.svg")
                if os.path.basename(path) in written:
                    # newline="\n": the same bytes on every platform.
                    with open(path, "w", encoding="utf-8", newline="\n") as f:
                        f.write(written[os.path.basename(path)])
                    print(f"plot-bench.py: wrote {path}", file=sys.stderr)
                elif os.path.exists(path):
                    # A chart of an earlier summary would pass for one of this one.
                    os.remove(path)
                    print(f"plot-bench.py: removed {path} (no {part_name} {what} in this summary)", file=sys.stderr)
    if args.markdown:
        sys.stdout.write(markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
