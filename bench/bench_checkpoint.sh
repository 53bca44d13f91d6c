#!/usr/bin/env bash
# Checkpoint benchmark: the reference model (bench/train_dp2.yaml, DP=2, ZeRO-1) and a larger one
# (~85M parameters: dim 768, 12 layers, ffn 2048, seq 128) that makes I/O visible, saving in each
# mode, measured in the same run against training without checkpoints. Prints per mode the stall
# per checkpoint (the time the trainer was blocked: the save call plus a lazy snapshot's fence) and
# its ratio to the synchronous save, the throughput with a checkpoint every step and every 10 steps
# against none, and resident memory over 100 lazy saves. Targets: async_lazy stall <= 1/20 of sync;
# <= 3% throughput loss at every 10 steps; host memory flat across 100 saves.
# Usage: bash bench/bench_checkpoint.sh [STEPS=30]   (ATOLL_BIN overrides build/bin/atoll)
set -euo pipefail
cd "$(dirname "$0")/.."
warmup=3
source bench/common.sh
bench_start bench_checkpoint 30 $warmup "$@"

large=(--set model.dim=768 --set model.layers=12 --set model.heads=12 --set model.kv_heads=12 --set model.ffn=2048
  --set model.seq=128 --set train.global_batch=4)
runs=()
run() {  # run NAME STEPS [--set ...]
  local name=$1 n=$2
  shift 2
  local dir=runs/bench-checkpoint/$name
  rm -rf "$dir"
  echo "== $name"
  OMP_NUM_THREADS=1 "$atoll" launch bench/train_dp2.yaml --set parallel.zero=1 --set train.steps="$n" \
    --set run.dir="$dir" --set checkpoint.keep=2 "$@" | { grep -E 'checkpoint' | grep -vE '^\|' | tail -2 || true; }
  runs+=("$name=$dir/metrics.jsonl")
}
run none "$steps"
for mode in sync async async_lazy; do run "$mode-every1" "$steps" --set checkpoint.every=1 --set checkpoint.mode=$mode; done
run sync-every10 "$steps" --set checkpoint.every=10 --set checkpoint.mode=sync
run async_lazy-every10 "$steps" --set checkpoint.every=10 --set checkpoint.mode=async_lazy
run async_lazy-100-saves 100 --set checkpoint.every=1 --set checkpoint.mode=async_lazy
run large-none 8 "${large[@]}"
for mode in sync async_lazy; do run "large-$mode" 8 "${large[@]}" --set checkpoint.every=2 --set checkpoint.mode=$mode; done

"${ATOLL_PYTHON_BIN:-.venv/bin/python}" - "$warmup" "${runs[@]}" <<'PY'
import json, statistics, sys
warmup = int(sys.argv[1])
runs = dict(arg.split("=", 1) for arg in sys.argv[2:])

def load(path):
    steps, saves = {}, {}
    for line in open(path):
        r = json.loads(line)
        if "tokens_per_s" in r: steps[r["step"]] = r
        if "checkpoint_s" in r: saves[r["step"]] = r["checkpoint_s"]
    return steps, saves

def summary(name):
    steps, saves = load(runs[name])
    # Blocked per checkpoint: the save call, plus the fence at the next step's update.
    stalls = [s + steps.get(k + 1, {}).get("checkpoint_wait_s", 0.0) for k, s in saves.items()]
    kept = [k for k in steps if k > warmup]
    tokens = steps[kept[0]]["tokens_per_s"] * steps[kept[0]]["step_s"]
    wall = sum(steps[k]["step_s"] + saves.get(k, 0.0) for k in kept)  # step_s includes the fence
    return {"stall": statistics.median(stalls) if stalls else 0.0, "tps": tokens * len(kept) / wall,
            "rss": [steps[k]["rss_bytes"] for k in sorted(steps)]}

for group, base_name in (("reference model (3.3M parameters, 38 MiB per checkpoint)", "none"),
                         ("larger model (~85M parameters, ~1 GiB per checkpoint)", "large-none")):
    print(f"\n{group}")
    base = summary(base_name)
    prefix = "large-" if base_name.startswith("large") else ""
    sync_name = prefix + ("sync" if prefix else "sync-every1")
    sync_stall = summary(sync_name)["stall"]
    print(f"{'run':24s} {'stall/ckpt':>11s} {'x sync':>8s} {'tokens/s':>9s} {'x none':>7s}")
    print(f"{base_name:24s} {'':>11s} {'':>8s} {base['tps']:9.0f} {1.0:7.3f}")
    for name in runs:
        if name == base_name or name.startswith("large") != bool(prefix): continue
        s = summary(name)
        print(f"{name:24s} {1e3 * s['stall']:9.1f}ms {s['stall'] / sync_stall:8.3f} {s['tps']:9.0f} {s['tps'] / base['tps']:7.3f}")

def check(what, value, op, target):
    ok = value <= target if op == "<=" else value >= target
    print(f"target: {what} = {value:.3f} ({op} {target}): {'met' if ok else 'NOT met'}")
print()
for prefix, sync, lazy in (("", "sync-every1", "async_lazy-every1"), ("large ", "large-sync", "large-async_lazy")):
    check(f"{prefix}async_lazy stall / sync stall", summary(lazy)["stall"] / summary(sync)["stall"], "<=", 0.05)
check("tokens/s with async_lazy every 10 steps / none", summary("async_lazy-every10")["tps"] / summary("none")["tps"], ">=", 0.97)
rss = summary("async_lazy-100-saves")["rss"]
growth = (rss[-1] - rss[9]) / 2**20
print(f"resident memory over 100 lazy saves: {rss[9] / 2**20:.1f} MiB after 10, {rss[-1] / 2**20:.1f} MiB after 100 "
      f"({growth:+.1f} MiB): {'flat' if abs(growth) < 0.02 * rss[9] / 2**20 else 'NOT flat'}")
PY
