#!/usr/bin/env bash
# ZeRO benchmark: the reference model (bench/train_dp2.yaml: dim 256, 4 layers, global batch 16)
# at DP=2 and DP=4 under ZeRO stages 0-3, in fp32 and in bf16 mixed precision, measured in the same
# run. Prints per stage tokens/s and the bytes of model state each rank really allocates
# (parameters, gradients, optimizer state, from metrics.jsonl), each as a ratio against stage 0 at
# the same dp and precision, and checks the fp32 targets:
# optimizer state at stage 1, DP=4 <= 0.27x stage 0; all model state at stage 3, DP=4 <= 0.30x;
# throughput at stage 1 >= 0.95x stage 0. Never fails for being slow.
# Usage: bash bench/bench_zero.sh [STEPS=15]   (ATOLL_BIN overrides build/bin/atoll)
# On a 2-core machine DP=4 runs 4 ranks on 2 cores: its tokens/s measure the oversubscription
# (the ratios between stages still compare like with like).
set -euo pipefail
cd "$(dirname "$0")/.."
warmup=3
source bench/common.sh
bench_start bench_zero 15 $warmup "$@"

runs=()
for precision in fp32 bf16; do
  for dp in 2 4; do
    for zero in 0 1 2 3; do
      name=$precision-dp$dp-zero$zero
      dir=runs/bench-zero/$name
      rm -rf "$dir"
      echo "== $name"
      OMP_NUM_THREADS=1 "$atoll" launch bench/train_dp2.yaml --set train.steps="$steps" --set run.dir="$dir" \
        --set parallel.dp=$dp --set parallel.zero=$zero --set train.precision=$precision |
        { grep -E '^step' || true; }
      runs+=("$name=$dir/metrics.jsonl")
    done
  done
done

"${ATOLL_PYTHON_BIN:-.venv/bin/python}" - "$warmup" "$(nproc --all)" "${runs[@]}" <<'PY'
import json, statistics, sys
warmup, cores = int(sys.argv[1]), int(sys.argv[2])
runs = dict(arg.split("=", 1) for arg in sys.argv[3:])

def summary(path):
    records = [json.loads(line) for line in open(path) if '"tokens_per_s"' in line]
    last = records[-1]
    return {"tps": statistics.median(r["tokens_per_s"] for r in (records[warmup:] or records)),
            "params": last["param_bytes"], "grads": last["grad_bytes"], "optim": last["optimizer_bytes"]}

MiB = 2**20
print(f"\nmedian tokens/s of steps {warmup + 1}+; model state per rank after the last step")
print(f"{'layout':17s} {'tokens/s':>9s} {'x Z0':>6s} {'params':>9s} {'grads':>9s} {'optimizer':>10s} {'state':>9s}"
      f" {'optim x Z0':>10s} {'state x Z0':>10s}")
figures = {}
for precision, dp in ((p, d) for p in ("fp32", "bf16") for d in (2, 4)):
    base = summary(runs[f"{precision}-dp{dp}-zero0"])
    for zero in range(4):
        s = summary(runs[f"{precision}-dp{dp}-zero{zero}"])
        state, base_state = s["params"] + s["grads"] + s["optim"], base["params"] + base["grads"] + base["optim"]
        r = {"tps": s["tps"] / base["tps"], "optim": s["optim"] / base["optim"], "state": state / base_state}
        figures[(precision, dp, zero)] = r
        note = "" if dp <= cores else f"  ({dp} ranks on {cores} cores)"
        print(f"{precision} dp{dp} zero{zero}   {s['tps']:9.0f} {r['tps']:6.2f} {s['params'] / MiB:7.2f}Mi {s['grads'] / MiB:7.2f}Mi"
              f" {s['optim'] / MiB:8.2f}Mi {state / MiB:7.2f}Mi {r['optim']:10.3f} {r['state']:10.3f}{note}")

def check(what, value, op, target):
    ok = value <= target if op == "<=" else value >= target
    print(f"target: {what} = {value:.3f} ({op} {target}): {'met' if ok else 'NOT met'}")
print()
check("optimizer state, stage 1 / stage 0 at DP=4, fp32", figures[("fp32", 4, 1)]["optim"], "<=", 0.27)
check("model state, stage 3 / stage 0 at DP=4, fp32", figures[("fp32", 4, 3)]["state"], "<=", 0.30)
check("tokens/s, stage 1 / stage 0 at DP=2, fp32", figures[("fp32", 2, 1)]["tps"], ">=", 0.95)
check("tokens/s, stage 1 / stage 0 at DP=4, fp32", figures[("fp32", 4, 1)]["tps"], ">=", 0.95)
for dp in (2, 4):
    speedup = summary(runs[f"bf16-dp{dp}-zero0"])["tps"] / summary(runs[f"fp32-dp{dp}-zero0"])["tps"]
    print(f"bf16 / fp32 tokens/s at DP={dp}, stage 0: {speedup:.2f}x")
PY
