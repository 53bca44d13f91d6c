#!/usr/bin/env python3
"""Every figure of the GPU islands experiment's runs, one row per run (examples/islands/gpu/run.sh).

Usage: python3 examples/islands/gpu/figures.py RUNS_DIR METHOD...

RUNS_DIR is run.sh's $ISLANDS_RUNS/$SIZE: size.txt, then METHOD/seed-S/ with launch.log,
metrics.jsonl and DONE (the run's wall seconds) or RUNNING (not finished). Prints Markdown: the
size, then per run its state, steps reached, parameters (from the start-up line), training tokens/s
(the run's tokens over the sum of its step times, island 0), wall seconds, the last logged training
loss against the final validation loss (a gap that grows is the corpus's repetition showing), the
bytes between islands; then the start-up lines that name the device and how ranks share it.
Python 3 standard library only.
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import report  # noqa: E402


def run_row(directory, method, seed):
    log = os.path.join(directory, "launch.log")
    text = open(log, encoding="utf-8", errors="replace").read() if os.path.isfile(log) else ""
    params = re.search(r"^model: (\d+) parameters", text, re.M)
    state = "done" if os.path.isfile(os.path.join(directory, "DONE")) else "unfinished"
    wall = open(os.path.join(directory, "DONE")).read().strip() if state == "done" else "-"
    steps, evals = [], []
    metrics = os.path.join(directory, "metrics.jsonl")
    if os.path.isfile(metrics):
        steps, evals = report.read_metrics(metrics)
    step = steps[-1]["step"] if steps else 0
    config = report.parse_config(os.path.join(directory, "config.yaml")) \
        if os.path.isfile(os.path.join(directory, "config.yaml")) else {}
    tokens_per_step = int(config.get("train", {}).get("global_batch", 0) or 0) * \
        int(config.get("model", {}).get("seq", 0) or 0)
    seconds = sum(float(r.get("step_s", 0.0)) for r in steps)
    rate = f"{tokens_per_step * len(steps) / seconds:,.0f}" if seconds > 0 else "-"
    train = f"{float(steps[-1]['loss']):.4f}" if steps and "loss" in steps[-1] else "-"
    val = f"{report.eval_loss(evals[-1]):.4f} (step {evals[-1]['step']})" if evals else "-"
    sent = report.format_bytes(report.Run(method, "", 0, steps).bytes_total()) if steps else "-"
    return (method, seed, state, str(step), params.group(1) if params else "-", rate, wall, train, val, sent), text


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs_dir, methods = argv[1], argv[2:]
    lines = []
    size = os.path.join(runs_dir, "size.txt")
    if os.path.isfile(size):
        lines += ["```", open(size, encoding="utf-8").read().rstrip(), "```", ""]
    header = ("method", "seed", "state", "steps", "parameters", "tokens/s (training)", "wall s",
              "last train loss", "final val loss", "bytes between islands")
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join([":--"] * 3 + ["--:"] * 7) + "|"]
    startup = set()
    for method in methods:
        directory = os.path.join(runs_dir, method)
        if not os.path.isdir(directory):
            continue
        for seed in sorted((d for d in os.listdir(directory) if d.startswith("seed-")),
                           key=lambda d: (len(d), d)):
            row, text = run_row(os.path.join(directory, seed), method, seed[len("seed-"):])
            lines.append("| " + " | ".join(row) + " |")
            startup.update(m.group(0) for m in re.finditer(r"^(device|peak): .*$", text, re.M))
    if startup:
        lines += ["", "Start-up lines (every run):", ""] + [f"    {line}" for line in sorted(startup)]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
