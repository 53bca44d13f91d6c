#!/usr/bin/env bash
# Pipeline benchmark: bench/train_pp.yaml (dim 256, 8 layers, global batch 16) on one rank (the
# baseline) and as PP=2 and PP=4 pipelines with m = 4p microbatches under GPipe, 1F1B and
# interleaved 1F1B (2 virtual stages), measured in the same run. Prints per stage the measured
# bubble (idle time in the schedule over its wall time) next to theory -- (p-1)/(m+p-1), or
# (p-1)/(vm+p-1) interleaved -- tokens/s against one rank, and the peak activation memory per
# stage (heap growth during the schedule) of GPipe against 1F1B.
# Usage: bash bench/bench_pipeline.sh [STEPS=15]   (ATOLL_BIN overrides build/bin/atoll)
# On a 2-core machine PP=4 runs 4 ranks on 2 cores: its bubble and throughput figures then measure
# the oversubscription, not the schedule (the script says so).
set -euo pipefail
cd "$(dirname "$0")/.."
warmup=3
source bench/common.sh
bench_start bench_pipeline 15 $warmup "$@"

runs=()
run() {  # run NAME [--set ...]
  local name=$1
  shift
  local dir=runs/bench-pipeline/$name
  rm -rf "$dir"
  echo "== $name"
  OMP_NUM_THREADS=1 "$atoll" launch bench/train_pp.yaml --set train.steps="$steps" --set run.dir="$dir" "$@" |
    { grep -E '^step' || true; }
  runs+=("$name=$dir/metrics.jsonl")
}
run one-rank --set parallel.pp=1 --set parallel.microbatches=8
for p in 2 4; do
  m=$((4 * p))
  run "pp$p-gpipe" --set parallel.pp=$p --set parallel.microbatches=$m --set parallel.schedule=gpipe
  run "pp$p-1f1b" --set parallel.pp=$p --set parallel.microbatches=$m --set parallel.schedule=1f1b
  run "pp$p-interleaved" --set parallel.pp=$p --set parallel.microbatches=$m --set parallel.schedule=interleaved \
    --set parallel.virtual_stages=2
done

"${ATOLL_PYTHON_BIN:-.venv/bin/python}" - "$warmup" "$(nproc --all)" "${runs[@]}" <<'PY'
import json, statistics, sys
warmup, cores = int(sys.argv[1]), int(sys.argv[2])
runs = dict(arg.split("=", 1) for arg in sys.argv[3:])

def steady(path):
    records = [json.loads(line) for line in open(path) if '"tokens_per_s"' in line]
    return records[warmup:] or records

base = statistics.median(r["tokens_per_s"] for r in steady(runs.pop("one-rank")))
print(f"\nmedian of steps {warmup + 1}+; one rank: {base:.0f} tokens/s")
print(f"{'layout':18s} {'tokens/s':>9s} {'x 1 rank':>9s}  {'bubble per stage: measured / theory':40s} {'peak activations per stage'}")
peaks = {}
for name, path in runs.items():
    records = steady(path)
    p = len(records[0]["stage_idle"])
    m, v = 4 * p, 2 if "interleaved" in name else 1
    theory = (p - 1) / (v * m + p - 1)
    idle = [statistics.median(r["stage_idle"][s] for r in records) for s in range(p)]
    act = [max(r["stage_activation_bytes"][s] for r in records) / 2**20 for s in range(p)]
    peaks[name] = act
    tps = statistics.median(r["tokens_per_s"] for r in records)
    bubble = " ".join(f"{100 * x:4.1f}%" for x in idle) + f" / {100 * theory:.1f}%"
    worst = max(abs(x - theory) for x in idle)
    note = "" if p <= cores else f"  ({p} ranks on {cores} cores: oversubscribed)"
    print(f"{name:18s} {tps:9.0f} {tps / base:9.2f}  {bubble:40s} {' '.join(f'{a:.0f}' for a in act)} MiB"
          f"  max |measured - theory| {100 * worst:.1f} pp{note}")
for p in (2, 4):
    g, f = peaks[f"pp{p}-gpipe"], peaks[f"pp{p}-1f1b"]
    print(f"PP={p}: stage 0 peak activations GPipe {g[0]:.0f} MiB vs 1F1B {f[0]:.0f} MiB ({g[0] / max(f[0], 1e-9):.1f}x)")
PY
