#!/usr/bin/env bash
# Activation recomputation: train.recompute none, selective and full on the reference model at seq
# 1024 with 8 layers (bench/train_recompute.yaml: one rank, 2 threads, 2 sequences per step),
# measured in the same run: the peak activation memory (metrics.jsonl's activation_bytes, every
# allocation counted: runtime/metrics/allocation_peak.h) against atoll plan's estimate, the median
# step time, both as ratios to none against the issue's targets, and the largest microbatch each
# mode fits in a fixed activation budget (from the measured bytes per sequence). Also bf16, whose
# attention at seq 1024 is the fused kernel too. Never fails for being slow.
# Usage: bash bench/bench_recompute.sh [STEPS=8] [BUDGET_MIB=512]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
warmup=2  # steps left out of the time: the allocator's first pass, the optimizer state's allocation
bench_start bench_recompute 8 "$warmup" "${1:-}"
budget_mib=${2:-512}
python=${ATOLL_PYTHON_BIN:-.venv/bin/python}
config=bench/train_recompute.yaml
run_dir=runs/bench-recompute
rm -rf "$run_dir"

run() {  # run NAME [--set ...]: a run of the benchmark config into $run_dir/NAME
  local name=$1
  shift
  "$atoll" train "$config" --set run.dir="$run_dir/$name" --set train.steps="$steps" "$@" >"$run_dir/$name.log" 2>&1 \
    || { echo "bench_recompute: the $name run failed; see $run_dir/$name.log" >&2; exit 1; }
  "$atoll" plan "$config" "$@" | awk '$1 == "0" && NF == 12 { print $11, $12; exit }' >"$run_dir/$name.plan" || true
}
mkdir -p "$run_dir"
for precision in fp32 bf16; do
  for mode in none selective full; do
    echo "== $precision, recompute $mode"
    run "$precision-$mode" --set train.precision="$precision" --set train.recompute="$mode"
    # One sequence per step as well: the bytes per sequence are the slope between the two.
    run "$precision-$mode-b1" --set train.precision="$precision" --set train.recompute="$mode" \
      --set train.global_batch=1 --set train.steps=$((warmup + 1))
  done
done

"$python" - "$run_dir" "$warmup" "$budget_mib" <<'PY'
import json, os, statistics, sys
run_dir, warmup, budget_mib = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
MiB = 2**20

def records(name):
    path = os.path.join(run_dir, name, "metrics.jsonl")
    return [json.loads(line) for line in open(path) if '"tokens_per_s"' in line]

def plan_mib(name):
    text = open(os.path.join(run_dir, name + ".plan")).read().split()
    value, unit = float(text[0]), text[1]
    return value * {"B": 1 / MiB, "KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[unit]

targets = {"selective": (0.65, 1.10), "full": (0.30, 1.40)}
for precision in ("fp32", "bf16"):
    rows = {}
    for mode in ("none", "selective", "full"):
        r = records(f"{precision}-{mode}")
        steady = r[warmup:] or r
        peak = max(x["activation_bytes"] for x in steady) / MiB
        per_sequence = peak - max(x["activation_bytes"] for x in records(f"{precision}-{mode}-b1")) / MiB
        rows[mode] = dict(peak=peak, step=statistics.median(x["step_s"] for x in steady),
                          plan=plan_mib(f"{precision}-{mode}"), per_sequence=per_sequence,
                          loss=r[-1]["loss"])
    base = rows["none"]
    print()
    print(f"{precision}, reference model at seq 1024, 8 layers, 2 sequences per step, one rank "
          f"(median step of steps {warmup + 1}+):")
    print(f"{'recompute':10s} {'activations':>12s} {'x none':>7s} {'plan':>10s} {'plan/meas':>9s} "
          f"{'step s':>7s} {'x none':>7s} {'MiB/seq':>8s} {f'fits {budget_mib:.0f} MiB':>13s}  final loss")
    for mode, row in rows.items():
        fits = int(budget_mib // row["per_sequence"]) if row["per_sequence"] > 0 else 0
        print(f"{mode:10s} {row['peak']:9.1f} MiB {row['peak'] / base['peak']:7.2f} {row['plan']:6.1f} MiB "
              f"{row['plan'] / row['peak']:9.2f} {row['step']:7.3f} {row['step'] / base['step']:7.2f} "
              f"{row['per_sequence']:8.1f} {fits:9d} seq  {row['loss']:.6f}")
    for mode, (memory_target, time_target) in targets.items():
        row = rows[mode]
        memory, time = row["peak"] / base["peak"], row["step"] / base["step"]
        verdict = "met" if memory <= memory_target and time <= time_target else "NOT MET"
        print(f"{precision} {mode}: {memory:.2f}x none's activations (target <= {memory_target}), "
              f"{time:.2f}x its step time (target <= {time_target}): {verdict}")
    same = all(row["loss"] == base["loss"] for row in rows.values())
    print(f"{precision}: final losses {'identical' if same else 'DIFFER'} across modes")
PY
