#!/usr/bin/env bash
# Training benchmark: the reference model (dim 256, 4 layers, seq 256, global batch 16) at DP=2,
# one thread per rank, in Atoll and in PyTorch (eager, DistributedDataParallel over gloo), measured
# in the same run. Prints tokens/s, MFU and the ratio.
# Usage: bash bench/bench_train.sh [STEPS=30]   (ATOLL_BIN overrides build/bin/atoll)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-30}
atoll=${ATOLL_BIN:-build/bin/atoll}
[[ -x $atoll ]] || { echo "bench_train: $atoll not found; run scripts/build.sh first" >&2; exit 1; }
[[ -s data/brown/train.bin ]] || bash examples/brown/prepare.sh data/brown "$atoll"
run_dir=runs/bench-train
rm -rf "$run_dir"

echo "== Atoll (DP=2, 1 thread per rank)"
OMP_NUM_THREADS=1 "$atoll" launch bench/train_dp2.yaml --set train.steps="$steps" --set run.dir="$run_dir" \
  | grep -E '^(model|step)'
echo "== Atoll (TP=2, 1 thread per rank)"
OMP_NUM_THREADS=1 "$atoll" launch bench/train_dp2.yaml --set train.steps="$steps" --set run.dir="$run_dir-tp2" \
  --set parallel.dp=1 --set parallel.tp=2 | grep -E '^step'
echo "== PyTorch DDP (gloo, 1 thread per rank), as is"
torch_plain=$(/usr/bin/python3 bench/pytorch_llama_ddp.py --steps "$steps" --data data/brown/train.bin | tail -1)
echo "$torch_plain"
echo "== PyTorch DDP with glibc malloc keeping freed memory (what Atoll does itself)"
torch_tuned=$(MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824 \
  /usr/bin/python3 bench/pytorch_llama_ddp.py --steps "$steps" --data data/brown/train.bin | tail -1)
echo "$torch_tuned"

/usr/bin/python3 - "$run_dir/metrics.jsonl" "$torch_plain" "$torch_tuned" "$run_dir-tp2/metrics.jsonl" <<'PY'
import json, statistics, sys
def steady_records(path):
    records = [json.loads(l) for l in open(path) if '"tokens_per_s"' in l]
    return records[5:] or records
records = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_s"' in l]
steady = records[5:] or records
atoll_tps = statistics.median(r["tokens_per_s"] for r in steady)
atoll_mfu = statistics.median(r["mfu"] for r in steady)
# MFU = tokens/s * FLOPs per token / (peak per rank * ranks); recover the denominator from Atoll's own figures.
flops_per_token = 6 * (4 * (4 * 256 * 256 + 3 * 256 * 688 + 2 * 256) + 256 + 256 * 256) + 12 * 4 * 256 * 256
peak = atoll_tps * flops_per_token / atoll_mfu
def parse(line):
    return float(dict(kv.split("=") for kv in line.split()[1:])["tokens_per_s"])
print()
print(f"{'':34s} {'tokens/s':>10s} {'MFU':>7s} {'Atoll/this':>11s}")
print(f"{'Atoll':34s} {atoll_tps:10.0f} {100 * atoll_mfu:6.1f}% {1.0:11.2f}")
for name, line in (("PyTorch DDP (as is)", sys.argv[2]), ("PyTorch DDP (malloc tuned)", sys.argv[3])):
    tps = parse(line)
    print(f"{name:34s} {tps:10.0f} {100 * tps * flops_per_token / peak:6.1f}% {atoll_tps / tps:11.2f}")
print(f"peak (measured matmul, all ranks): {peak / 1e9:.1f} GFLOP/s; targets: Atoll >= 1.25x PyTorch, MFU >= 70%")
# TP=2: the bytes each rank sends per step against Megatron's analytic figure: per layer 4 all-reduces
# of batch*seq*dim fp32 activations (2 forward, 2 backward), plus the embedding's forward and the LM
# head's backward all-reduce; a ring all-reduce of n bytes sends 2(p-1)/p*n = n bytes at p = 2.
tp = steady_records(sys.argv[4])
tp_tps = statistics.median(r["tokens_per_s"] for r in tp)
measured = statistics.median(r["comm_bytes"] for r in tp)
activation = 16 * 256 * 256 * 4
analytic = (4 * 4 + 2) * activation
wait = statistics.median(r["comm_wait_s"] for r in tp)
step = statistics.median(r["step_s"] for r in tp)
print(f"TP=2: time blocked in communication {1e3 * wait:.0f} ms of a {1e3 * step:.0f} ms step ({100 * wait / step:.0f}%)")
print(f"TP=2: {tp_tps:.0f} tokens/s ({tp_tps / atoll_tps:.2f}x DP=2); all-reduce bytes sent per rank per step "
      f"{measured / 2**20:.1f} MiB vs analytic {analytic / 2**20:.1f} MiB (18 x batch*seq*dim*4 B; the rest is the "
      f"cross-entropy's three [tokens] all-reduces and the grad-norm scalar)")
PY
