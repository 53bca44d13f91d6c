#!/usr/bin/env python3
"""Compare the islands runs: a Markdown table, the issue's targets and an SVG plot.

Usage:
    python3 examples/islands/report.py RUNS_DIR METHOD...

    e.g. python3 examples/islands/report.py runs/islands sync diloco diloco_int8 streaming noloco

The first METHOD is the baseline (synchronous data parallelism). Each RUNS_DIR/METHOD/ holds the
metrics.jsonl and config.yaml that `atoll launch` writes (examples/islands/links.sh and simulated.sh
make them).

Prints to stdout, one row per method:
    method | outer algorithm | final val loss | vs baseline | bytes between islands |
    fewer bytes than baseline | wall-clock (s) | faster than baseline
where the final validation loss is that of the outer parameters (val_loss_outer) when the run has
an outer optimizer, else val_loss; the bytes are outer_bytes_total of the last step (what one rank
sent to the other islands); the wall-clock is the sum of step_s (training time, simulated link
delays included). Then, when a method is named `diloco` (or PREFIX_diloco), whether it meets the
issue's targets (val loss within 3% of the baseline, >= 40x fewer bytes, >= 5x faster); and when
one is named `churn` (or PREFIX_churn: DiLoCo with an island killed and restarted mid-run), its
final loss against DiLoCo's without churn.

Writes RUNS_DIR/islands.md (the table and the target lines) and RUNS_DIR/islands.svg (validation
loss against tokens and against bytes between islands, log scale). Python 3 standard library only.
Exits non-zero with a one-line message when a run's files are missing or hold no evaluation.
"""

import json
import math
import os
import sys
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22")

TARGET_LOSS_PERCENT = 3.0
TARGET_FEWER_BYTES = 40.0
TARGET_SPEEDUP = 5.0


class ReportError(Exception):
    """A run's files are missing or unusable; the message names the file."""


@dataclass
class Run:
    """What the report needs from one method's run directory."""
    method: str
    algorithm: str
    tokens_per_step: int
    steps: list = field(default_factory=list)   # step records, in order
    evals: list = field(default_factory=list)   # evaluation records, in order

    def final_val_loss(self):
        """Validation loss of the last evaluation (outer parameters when present)."""
        return eval_loss(self.evals[-1])

    def bytes_total(self):
        """outer_bytes_total of the last step record, or None when the run does not log it."""
        for record in reversed(self.steps):
            if "outer_bytes_total" in record:
                return float(record["outer_bytes_total"])
        return None

    def wall_clock(self):
        """Training time: the sum of step_s over the step records."""
        return sum(float(r.get("step_s", 0.0)) for r in self.steps)

    def bytes_at(self, step):
        """outer_bytes_total at a step (the last step record at or before it), or None."""
        found = None
        for record in self.steps:
            if record["step"] > step:
                break
            if "outer_bytes_total" in record:
                found = float(record["outer_bytes_total"])
        return found


def eval_loss(record):
    """The loss an evaluation record reports: val_loss_outer when present, else val_loss (NaN when
    written as null: Atoll writes a NaN or infinite value so)."""
    value = record["val_loss_outer"] if "val_loss_outer" in record else record["val_loss"]
    return float("nan") if value is None else float(value)


def split_flow(text):
    """Split the inside of a YAML flow mapping on top-level commas."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def parse_config(path):
    """Read `section:` headers and their indented `key: value` lines into {section: {key: value}}.

    A one-line flow mapping (`outer: { algorithm: diloco, ... }`) is also understood.
    """
    sections, current = {}, None
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            indented = line[0] in " \t"
            key, sep, value = line.strip().partition(":")
            if not sep:
                continue
            key, value = key.strip(), value.strip()
            if not indented:
                current = sections.setdefault(key, {})
                if value.startswith("{") and value.endswith("}"):
                    for item in split_flow(value[1:-1]):
                        k, _, v = item.partition(":")
                        current[k.strip()] = v.strip()
            elif current is not None:
                current[key] = value.strip("'\"")
    return sections


def read_metrics(path):
    """Step and evaluation records of the last run in a metrics.jsonl.

    When step numbers go back (a restarted run appended to the file), every record from that step
    on is dropped first, so a restart from step 1 keeps only the new run.
    """
    steps, evals = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn line of a killed run
            if not isinstance(record, dict) or "step" not in record:
                continue
            step = record["step"]
            if "loss" in record or "step_s" in record:
                if steps and step <= steps[-1]["step"]:
                    steps = [r for r in steps if r["step"] < step]
                    evals = [r for r in evals if r["step"] < step]
                steps.append(record)
            elif "val_loss" in record or "val_loss_outer" in record:
                evals.append(record)
    return steps, evals


def load_run(runs_dir, method):
    """Load RUNS_DIR/METHOD, raising ReportError naming the file that is missing or unusable."""
    directory = os.path.join(runs_dir, method)
    metrics = os.path.join(directory, "metrics.jsonl")
    config = os.path.join(directory, "config.yaml")
    hint = "run examples/islands/links.sh or simulated.sh first"
    if not os.path.isfile(metrics):
        raise ReportError(f"{metrics} is missing; {hint}")
    if not os.path.isfile(config):
        raise ReportError(f"{config} is missing; {hint}")
    steps, evals = read_metrics(metrics)
    if not steps:
        raise ReportError(f"{metrics} has no step records; {hint}")
    if not evals:
        raise ReportError(f"{metrics} has no eval records (set train.eval_every); {hint}")
    sections = parse_config(config)
    try:
        tokens = int(sections["train"]["global_batch"]) * int(sections["model"]["seq"])
    except (KeyError, ValueError):
        raise ReportError(f"{config} lacks train.global_batch or model.seq") from None
    outer = sections.get("outer", {})
    algorithm = outer.get("algorithm", "none")
    compression = outer.get("compression", "none")
    if compression not in ("", "none"):
        algorithm += f" ({compression})"
    return Run(method, algorithm, tokens, steps, evals)


def format_bytes(n):
    """Bytes in binary units with one decimal: 512 B, 1.5 KiB, 12.3 MiB, 2.0 GiB."""
    if n is None:
        return "n/a"
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    u = 0
    while n >= 1024.0 and u < len(units) - 1:
        n /= 1024.0
        u += 1
    return f"{n:.0f} B" if u == 0 else f"{n:.1f} {units[u]}"


def ratio(numerator, denominator):
    """numerator / denominator, inf for x/0 with x > 0, None when undefined."""
    if numerator is None or denominator is None:
        return None
    if denominator == 0:
        return math.inf if numerator > 0 else None
    return numerator / denominator


def format_ratio(value):
    """A ratio as `49.8x`, `inf` or `n/a`."""
    if value is None:
        return "n/a"
    if math.isinf(value):
        return "inf"
    return f"{value:.1f}x"


def percent_change(value, baseline):
    """Signed percent change of value against baseline, or None when the baseline is 0."""
    return None if baseline == 0 else 100.0 * (value - baseline) / baseline


def format_percent(value):
    """A signed percent such as `+1.2%`, or `n/a`."""
    return "n/a" if value is None else f"{value:+.1f}%"


def table_lines(runs):
    """The Markdown comparison table, one row per run; runs[0] is the baseline."""
    base = runs[0]
    header = ("method", "outer algorithm", "final val loss", "vs baseline", "bytes between islands",
              "fewer bytes than baseline", "wall-clock (s)", "faster than baseline")
    aligns = (":--", ":--", "--:", "--:", "--:", "--:", "--:", "--:")
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(aligns) + "|"]
    for run in runs:
        row = (run.method, run.algorithm, f"{run.final_val_loss():.4f}",
               format_percent(percent_change(run.final_val_loss(), base.final_val_loss())),
               format_bytes(run.bytes_total()),
               format_ratio(ratio(base.bytes_total(), run.bytes_total())),
               f"{run.wall_clock():.1f}", format_ratio(ratio(base.wall_clock(), run.wall_clock())))
        lines.append("| " + " | ".join(row) + " |")
    return lines


def named(runs, name):
    """The run of method `name` or PREFIX_`name` (runs named with every_method's prefix), or None."""
    return next((r for r in runs if r.method == name or r.method.endswith("_" + name)), None)


def churn_lines(runs):
    """The churn run's final loss against DiLoCo's without churn (none when either is absent)."""
    churn, diloco = named(runs, "churn"), named(runs, "diloco")
    if churn is None or diloco is None:
        return []
    change = percent_change(churn.final_val_loss(), diloco.final_val_loss())
    return [f"churn: final val loss {churn.final_val_loss():.4f} with an island killed and restarted, "
            f"{diloco.final_val_loss():.4f} without: {format_percent(change)}"]


def target_lines(runs):
    """The issue's targets checked for the method named `diloco` (none when it is absent)."""
    base = runs[0]
    diloco = named(runs, "diloco")
    if diloco is None or diloco is base:
        return []
    loss = percent_change(diloco.final_val_loss(), base.final_val_loss())
    fewer = ratio(base.bytes_total(), diloco.bytes_total())
    faster = ratio(base.wall_clock(), diloco.wall_clock())

    def verdict(ok):
        return "met" if ok else "MISSED"

    return [
        f"target: DiLoCo val loss within {TARGET_LOSS_PERCENT:g}% of synchronous: "
        f"{format_percent(loss)} -> {verdict(loss is not None and loss <= TARGET_LOSS_PERCENT)}",
        f"target: >= {TARGET_FEWER_BYTES:g}x fewer bytes: {format_ratio(fewer)} -> "
        f"{verdict(fewer is not None and fewer >= TARGET_FEWER_BYTES)}",
        f"target: >= {TARGET_SPEEDUP:g}x faster wall-clock: "
        f"{format_ratio(faster)} -> {verdict(faster is not None and faster >= TARGET_SPEEDUP)}",
    ]


# ---------------------------------------------------------------------------------------------
# SVG plot


def nice_step(span, count):
    """A round tick spacing (1, 2 or 5 times a power of ten) giving about `count` ticks."""
    raw = span / max(count, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for multiple in (1.0, 2.0, 5.0, 10.0):
        if raw <= multiple * magnitude:
            return multiple * magnitude
    return 10.0 * magnitude


def linear_axis(lo, hi, count=5, from_zero=False):
    """(axis_lo, axis_hi, ticks) covering [lo, hi] with round tick values."""
    if from_zero:
        lo = min(0.0, lo)
    if hi <= lo:
        pad = abs(lo) * 0.05 or 1.0
        lo, hi = lo - pad, hi + pad
    step = nice_step(hi - lo, count)
    axis_lo = math.floor(lo / step + 1e-9) * step
    axis_hi = math.ceil(hi / step - 1e-9) * step
    n = int(round((axis_hi - axis_lo) / step))
    ticks = [axis_lo + i * step for i in range(n + 1)]
    return axis_lo, axis_hi, ticks


def log_axis(lo, hi):
    """(axis_lo, axis_hi, ticks) for a log10 axis over [lo, hi] (both > 0)."""
    axis_lo, axis_hi = lo / 1.3, hi * 1.3
    first, last = math.floor(math.log10(axis_lo)), math.ceil(math.log10(axis_hi))
    for multiples in ((1,), (1, 2, 5), tuple(range(1, 10))):
        ticks = [m * 10.0 ** k for k in range(first, last + 1) for m in multiples
                 if axis_lo <= m * 10.0 ** k <= axis_hi]
        if len(ticks) >= 3:
            break
    stride = max(1, math.ceil(len(ticks) / 8))
    return axis_lo, axis_hi, ticks[::stride]


def format_si(value):
    """A compact tick label: 0, 250, 1.5k, 20M, 3G."""
    if value == 0:
        return "0"
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")):
        if abs(value) >= scale:
            text = f"{value / scale:.2f}".rstrip("0").rstrip(".")
            return text + suffix
    return f"{value:.3g}"


def format_loss_tick(value, step):
    """A y tick label with just enough decimals for the tick spacing."""
    decimals = max(0, -int(math.floor(math.log10(step)))) if step > 0 else 2
    return f"{value:.{decimals}f}"


def panel_svg(box, title, x_title, series, x_axis, y_axis, log_x, x_label):
    """SVG elements of one panel: frame, grid, ticks, titles and one polyline per series.

    box is (left, top, width, height) of the plot area; series is [(colour, [(x, y), ...])].
    """
    left, top, width, height = box
    x_lo, x_hi, x_ticks = x_axis
    y_lo, y_hi, y_ticks = y_axis

    def tx(x):
        if log_x:
            return left + width * (math.log10(x) - math.log10(x_lo)) / (
                math.log10(x_hi) - math.log10(x_lo))
        return left + width * (x - x_lo) / (x_hi - x_lo)

    def ty(y):
        return top + height * (1.0 - (y - y_lo) / (y_hi - y_lo))

    out = [f'<text x="{left + width / 2:.1f}" y="{top - 14:.1f}" class="title">'
           f'{escape(title)}</text>']
    y_step = y_ticks[1] - y_ticks[0] if len(y_ticks) > 1 else 0.1
    for y in y_ticks:
        py = ty(y)
        out.append(f'<line x1="{left}" y1="{py:.1f}" x2="{left + width}" y2="{py:.1f}" class="grid"/>')
        out.append(f'<line x1="{left - 5}" y1="{py:.1f}" x2="{left}" y2="{py:.1f}" class="axis"/>')
        out.append(f'<text x="{left - 8}" y="{py + 4:.1f}" class="ytick">'
                   f'{format_loss_tick(y, y_step)}</text>')
    for x in x_ticks:
        px = tx(x)
        out.append(f'<line x1="{px:.1f}" y1="{top}" x2="{px:.1f}" y2="{top + height}" class="grid"/>')
        out.append(f'<line x1="{px:.1f}" y1="{top + height}" x2="{px:.1f}" y2="{top + height + 5}" '
                   f'class="axis"/>')
        out.append(f'<text x="{px:.1f}" y="{top + height + 19}" class="xtick">{x_label(x)}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{width}" height="{height}" class="frame"/>')
    out.append(f'<text x="{left + width / 2:.1f}" y="{top + height + 40}" class="label">'
               f'{escape(x_title)}</text>')
    cy = top + height / 2
    out.append(f'<text x="{left - 48}" y="{cy:.1f}" class="label" '
               f'transform="rotate(-90 {left - 48} {cy:.1f})">validation loss</text>')
    for colour, points in series:
        if not points:
            continue
        coords = " ".join(f"{tx(x):.1f},{ty(y):.1f}" for x, y in points)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in points:
            out.append(f'<circle cx="{tx(x):.1f}" cy="{ty(y):.1f}" r="2.5" fill="{colour}"/>')
    return out


def plot_svg(runs):
    """The two-panel SVG document (loss vs tokens, loss vs bytes between islands) as a string."""
    width, height = 1100, 450
    by_tokens, by_bytes = [], []
    for i, run in enumerate(runs):
        colour = COLOURS[i % len(COLOURS)]
        tokens = [(r["step"] * run.tokens_per_step, eval_loss(r)) for r in run.evals]
        sent = []
        for r in run.evals:
            b = run.bytes_at(r["step"])
            if b is not None and b > 0:
                sent.append((b, eval_loss(r)))
        by_tokens.append((colour, tokens))
        by_bytes.append((colour, sent))

    all_y = [y for _, pts in by_tokens + by_bytes for _, y in pts]
    y_lo, y_hi = min(all_y), max(all_y)
    pad = (y_hi - y_lo) * 0.05
    y_axis = linear_axis(y_lo - pad, y_hi + pad, count=6)

    token_x = [x for _, pts in by_tokens for x, _ in pts]
    x_tokens = linear_axis(min(token_x), max(token_x), count=6, from_zero=True)

    plot_top, plot_height, plot_width = 50, 300, 460
    body = [panel_svg((75, plot_top, plot_width, plot_height), "validation loss vs tokens",
                      "tokens", by_tokens, x_tokens, y_axis, False, format_si)]
    byte_x = [x for _, pts in by_bytes for x, _ in pts]
    right = (625, plot_top, plot_width, plot_height)
    if byte_x:
        x_bytes = log_axis(min(byte_x), max(byte_x))
        body.append(panel_svg(right, "validation loss vs bytes between islands",
                              "bytes sent to other islands per rank (log scale)", by_bytes,
                              x_bytes, y_axis, True, lambda x: format_si(x) + " B"))
    else:
        body.append([f'<text x="{right[0] + plot_width / 2}" y="{plot_top + plot_height / 2}" '
                     f'class="title">no bytes between islands logged</text>'])

    legend, x = [], 75.0
    legend_y = height - 22
    for i, run in enumerate(runs):
        colour = COLOURS[i % len(COLOURS)]
        label = run.method + (" (baseline)" if i == 0 else "")
        legend.append(f'<line x1="{x:.1f}" y1="{legend_y}" x2="{x + 24:.1f}" y2="{legend_y}" '
                      f'stroke="{colour}" stroke-width="3"/>')
        legend.append(f'<text x="{x + 30:.1f}" y="{legend_y + 4}" class="legend">'
                      f'{escape(label)}</text>')
        x += 30 + 7.5 * len(label) + 30

    style = ("<style>text{font-family:sans-serif;fill:#222}"
             ".title{font-size:15px;font-weight:bold;text-anchor:middle}"
             ".label{font-size:13px;text-anchor:middle}"
             ".xtick{font-size:11px;text-anchor:middle}.ytick{font-size:11px;text-anchor:end}"
             ".legend{font-size:13px}"
             ".grid{stroke:#e4e4e4;stroke-width:1}.axis{stroke:#444;stroke-width:1}"
             ".frame{fill:none;stroke:#444;stroke-width:1}</style>")
    parts = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">', style,
             f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>']
    for panel in body:
        parts.extend(panel)
    parts.extend(legend)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv):
    """Entry point: load the runs, print and write the table, targets and plot."""
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs_dir, methods = argv[1], argv[2:]
    try:
        runs = [load_run(runs_dir, m) for m in methods]
    except (ReportError, OSError) as error:
        print(f"report: {error}", file=sys.stderr)
        return 1
    lines = table_lines(runs)
    targets = target_lines(runs) + churn_lines(runs)
    text = "\n".join(lines) + "\n"
    if targets:
        text += "\n" + "\n".join(targets) + "\n"
    sys.stdout.write(text)
    with open(os.path.join(runs_dir, "islands.md"), "w", encoding="utf-8") as f:
        f.write(text)
    svg_path = os.path.join(runs_dir, "islands.svg")
    with open(svg_path, "w", encoding="utf-8") as f:
        f.write(plot_svg(runs))
    print(f"plot: {svg_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
