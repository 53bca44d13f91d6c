#!/usr/bin/env python3
"""The low-communication gap against model size: one SVG, CPU and GPU points marked apart.

Usage:
    python3 examples/islands/scale.py OUT.svg [--gpu RUNS_DIR]... [--points CSV]

Points: CSV (default examples/islands/scale_cpu.csv: issue 20's CPU figures and the DiLoCo
scaling-law paper's M = 4 figures as a reference), then each --gpu RUNS_DIR, a size directory of
examples/islands/gpu/run.sh (runs/islands-gpu/m10, ...): its diloco and sparseloco runs against its
sync runs, paired by seed (examples/islands/quality.py's reading; finished runs only), at the
parameter count of its start-up line. y: final validation loss, percent above synchronous training
(an error bar where there are several seeds: the sd of the paired changes); x: parameters, log
scale. Circles: CPU; squares: GPU; open triangles: the paper. Where no --gpu point exists, the
caption says the GPU points are still to come. Prints the points it drew. Python 3 standard library.
"""

import csv
import math
import os
import re
import statistics
import sys
from xml.sax.saxutils import escape

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import quality  # noqa: E402
import report  # noqa: E402

COLOURS = {"diloco": "#1f77b4", "sparseloco": "#d62728"}
LABELS = {"diloco": "DiLoCo, M = 4", "sparseloco": "SparseLoCo, M = 4"}


def read_csv(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f if not line.startswith("#")]
    for row in csv.DictReader(lines):
        rows.append({"source": row["source"], "method": row["method"], "parameters": float(row["parameters"]),
                     "gap": float(row["gap_percent"]), "sd": float(row["sd"]) if row["sd"] else None,
                     "seeds": int(row["seeds"]) if row["seeds"] else None})
    return rows


def gpu_points(runs_dir):
    baseline = quality.Seeds(runs_dir, "sync")
    log = os.path.join(runs_dir, "sync", baseline.seeds[0], "launch.log")
    found = re.search(r"^model: (\d+) parameters", open(log, encoding="utf-8", errors="replace").read(), re.M)
    if not found:
        raise report.ReportError(f"{log} has no 'model: N parameters' line")
    points = []
    for method in ("diloco", "sparseloco"):
        if not os.path.isdir(os.path.join(runs_dir, method)):
            continue
        try:
            seeds = quality.Seeds(runs_dir, method)
        except report.ReportError:
            continue  # none finished yet
        changes = seeds.changes_against(baseline)
        if not changes:
            continue
        points.append({"source": "gpu", "method": method, "parameters": float(found.group(1)),
                       "gap": statistics.fmean(changes),
                       "sd": statistics.stdev(changes) if len(changes) > 1 else None,
                       "seeds": len(changes)})
    return points


def marker(source, x, y, colour):
    if source == "cpu":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{colour}"/>'
    if source == "gpu":
        return f'<rect x="{x - 5:.1f}" y="{y - 5:.1f}" width="10" height="10" fill="{colour}"/>'
    return (f'<polygon points="{x:.1f},{y - 6:.1f} {x - 6:.1f},{y + 5:.1f} {x + 6:.1f},{y + 5:.1f}" '
            f'fill="white" stroke="{colour}" stroke-width="1.5"/>')


def plot(points):
    width, height = 860, 470
    left, top, pw, ph = 80, 50, 740, 300
    xs = [p["parameters"] for p in points]
    x_lo, x_hi = 10 ** math.floor(math.log10(min(xs))), 10 ** math.ceil(math.log10(max(xs)))
    y_hi_data = max(p["gap"] + (p["sd"] or 0) for p in points)
    y_lo, y_hi, y_ticks = report.linear_axis(min(0.0, min(p["gap"] for p in points)), y_hi_data * 1.08, 6)

    def tx(x):
        return left + pw * (math.log10(x) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo))

    def ty(y):
        return top + ph * (1 - (y - y_lo) / (y_hi - y_lo))

    out = [f'<text x="{left + pw / 2}" y="{top - 18}" class="title">Final loss above synchronous training, '
           f'by model size</text>']
    for y in y_ticks:
        out.append(f'<line x1="{left}" y1="{ty(y):.1f}" x2="{left + pw}" y2="{ty(y):.1f}" class="grid"/>')
        out.append(f'<text x="{left - 8}" y="{ty(y) + 4:.1f}" class="ytick">{y:+.0f}%</text>')
    decade = x_lo
    while decade <= x_hi * 1.0001:
        px = tx(decade)
        out.append(f'<line x1="{px:.1f}" y1="{top}" x2="{px:.1f}" y2="{top + ph}" class="grid"/>')
        out.append(f'<text x="{px:.1f}" y="{top + ph + 18}" class="xtick">{report.format_si(decade)}</text>')
        decade *= 10
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" class="frame"/>')
    out.append(f'<text x="{left + pw / 2}" y="{top + ph + 40}" class="label">parameters (log scale)</text>')
    out.append(f'<text x="{left - 55}" y="{top + ph / 2}" class="label" '
               f'transform="rotate(-90 {left - 55} {top + ph / 2})">final val loss vs synchronous</text>')
    # A line through each (source, method)'s points, by size.
    for source in ("cpu", "gpu", "paper"):
        for method, colour in COLOURS.items():
            mine = sorted((p for p in points if p["source"] == source and p["method"] == method),
                          key=lambda p: p["parameters"])
            if len(mine) > 1:
                dash = ' stroke-dasharray="4 3"' if source == "paper" else ""
                coords = " ".join(f"{tx(p['parameters']):.1f},{ty(p['gap']):.1f}" for p in mine)
                out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>')
    for p in points:
        colour = COLOURS.get(p["method"], "#555")
        x, y = tx(p["parameters"]), ty(p["gap"])
        if p["sd"]:
            out.append(f'<line x1="{x:.1f}" y1="{ty(p["gap"] - p["sd"]):.1f}" x2="{x:.1f}" '
                       f'y2="{ty(p["gap"] + p["sd"]):.1f}" stroke="{colour}" stroke-width="1"/>')
        out.append(marker(p["source"], x, y, colour))
        # DiLoCo's figures to the left of its points, the others' to the right: close points stay legible.
        left_side = p["method"] == "diloco"
        if p["source"] == "paper":  # above its marker, clear of the dashed line
            out.append(f'<text x="{x:.1f}" y="{y - 10:.1f}" class="point" text-anchor="middle">'
                       f'{p["gap"]:+.1f}%</text>')
        else:
            out.append(f'<text x="{x - 9 if left_side else x + 9:.1f}" y="{y + 4:.1f}" class="point" '
                       f'text-anchor="{"end" if left_side else "start"}">{p["gap"]:+.1f}%</text>')
    # Legend: colours for methods, shapes for where each point was measured.
    ly = height - 62
    x = left
    for method, colour in COLOURS.items():
        out.append(f'<line x1="{x}" y1="{ly}" x2="{x + 22}" y2="{ly}" stroke="{colour}" stroke-width="3"/>')
        out.append(f'<text x="{x + 28}" y="{ly + 4}" class="legend">{LABELS[method]}</text>')
        x += 170
    has_gpu = any(p["source"] == "gpu" for p in points)
    shapes = (("cpu", "CPU, issue 20 (2 cores, byte-level)"),
              ("gpu", "GPU, issue 55 (subword, H = 30)" if has_gpu else "GPU, issue 55: not yet run"),
              ("paper", "paper, M = 4 (C4; reference)"))
    ly2, x = ly + 24, left
    for source, text in shapes:
        out.append(marker(source, x + 8, ly2, "#555"))
        out.append(f'<text x="{x + 22}" y="{ly2 + 4}" class="legend">{escape(text)}</text>')
        x += 22 + 7 * len(text) + 25
    if not has_gpu:
        out.append(f'<text x="{left}" y="{height - 10}" class="caption">No GPU point yet: scripts/gpu_islands.sh '
                   f'waits for a GPU machine; its points will be squares.</text>')
    style = ("<style>text{font-family:sans-serif;fill:#222}.title{font-size:15px;font-weight:bold;"
             "text-anchor:middle}.label{font-size:13px;text-anchor:middle}.xtick{font-size:11px;"
             "text-anchor:middle}.ytick{font-size:11px;text-anchor:end}.legend{font-size:13px}"
             ".point{font-size:11px}.caption{font-size:12px;font-style:italic}"
             ".grid{stroke:#e4e4e4;stroke-width:1}.frame{fill:none;stroke:#444;stroke-width:1}</style>")
    return "\n".join(['<?xml version="1.0" encoding="UTF-8"?>',
                      f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                      f'viewBox="0 0 {width} {height}">', style,
                      f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>'] + out +
                     ["</svg>"]) + "\n"


def main(argv):
    args = argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out, gpu_dirs, csv_path = args[0], [], os.path.join(HERE, "scale_cpu.csv")
    rest = args[1:]
    while rest:
        if len(rest) < 2 or rest[0] not in ("--gpu", "--points"):
            print(__doc__.strip(), file=sys.stderr)
            return 2
        if rest[0] == "--gpu":
            gpu_dirs.append(rest[1])
        else:
            csv_path = rest[1]
        rest = rest[2:]
    try:
        points = read_csv(csv_path)
        for directory in gpu_dirs:
            points += gpu_points(directory)
    except (report.ReportError, OSError, ValueError, KeyError) as error:
        print(f"scale: {error}", file=sys.stderr)
        return 1
    with open(out, "w", encoding="utf-8") as f:
        f.write(plot(points))
    for p in sorted(points, key=lambda p: (p["source"], p["method"], p["parameters"])):
        spread = f" +- {p['sd']:.1f}" if p["sd"] else ""
        seeds = f", {p['seeds']} seed(s)" if p["seeds"] else ""
        print(f"{p['source']:5} {p['method']:10} {p['parameters']:>12,.0f} parameters: {p['gap']:+.1f}%{spread}{seeds}")
    print(f"plot: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
