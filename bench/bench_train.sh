#!/usr/bin/env bash
# Training benchmark: the reference model (dim 256, 4 layers, seq 256, global batch 16) at DP=2,
# one thread per rank, in Atoll and in PyTorch (eager, DistributedDataParallel over gloo, the same
# torch wheel Atoll links), in fp32 and in bf16 mixed precision (PyTorch: autocast), measured in the
# same run. Prints tokens/s, MFU and the ratios against targets; never fails for being slow.
# Usage: bash bench/bench_train.sh [STEPS=30]   (ATOLL_BIN overrides build/bin/atoll)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-30}
atoll=${ATOLL_BIN:-build/bin/atoll}
# The venv of scripts/install-deps.sh: the torch whose LibTorch Atoll is built against.
python=${ATOLL_PYTHON_BIN:-.venv/bin/python}
warmup=5  # steps left out of both figures: allocator warm-up, DDP's bucket building
[[ -x $atoll ]] || { echo "bench_train: $atoll not found; run scripts/build.sh first (or set ATOLL_BIN)" >&2; exit 1; }
if ! [[ $steps =~ ^[0-9]+$ ]] || ((steps <= warmup)); then
  echo "bench_train: STEPS must be a number above $warmup (the warm-up steps), got '$steps'" >&2
  exit 1
fi

# The shape of bench/train_dp2.yaml, handed to the PyTorch peer and to the FLOP count below.
shape=(--dim 256 --layers 4 --heads 8 --kv-heads 8 --ffn 688 --seq 256 --vocab 256 --global-batch 16)

# Data: the Python documentation corpus shards when prepared (examples/pydocs/prepare.sh), else a synthetic shard.
# Throughput does not depend on which tokens are trained on.
if [[ -s data/pydocs/train.bin && -s data/pydocs/val.bin ]]; then
  train=data/pydocs/train.bin val=data/pydocs/val.bin
else
  train=data/synthetic/train.bin val=data/synthetic/val.bin
  [[ -s $train && -s $val ]] || "$python" - "$train" "$val" <<'PY'
# llm.c token shard: 256 int32 header (magic 20240520, version 1 = uint16 tokens, [2] = token
# count), then the tokens. Uniform random bytes-as-tokens, vocab 256.
import array, os, random, sys
rng = random.Random(1234)
for path, count in ((sys.argv[1], 1 << 20), (sys.argv[2], 1 << 16)):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    header = array.array("i", [0] * 256)
    header[0:3] = array.array("i", [20240520, 1, count])
    with open(path, "wb") as f:
        header.tofile(f)
        array.array("H", (rng.randrange(256) for _ in range(count))).tofile(f)
PY
  echo "bench_train: data/pydocs not prepared; training on synthetic tokens in data/synthetic"
fi

# Both frameworks get the same two cores; anything else running skews the figures (not the checks).
busy_share() {  # share of CPU time not idle over one second, from /proc/stat
  local a b
  read -ra a < <(head -1 /proc/stat); sleep 1; read -ra b < <(head -1 /proc/stat)
  local total=0 i
  for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
  echo $((100 - 100 * (b[4] - a[4]) / (total > 0 ? total : 1)))
}
busy=$(busy_share)
((busy < 20)) || echo "bench_train: warning: the CPUs are ${busy}% busy before the run; figures will be low and noisy" >&2

run_dir=runs/bench-train
rm -rf "$run_dir" "$run_dir-bf16" "$run_dir-tp2"
atoll_run() {  # atoll_run RUN_DIR [--set ...]: the reference model, progress lines only
  local dir=$1
  shift
  OMP_NUM_THREADS=1 "$atoll" launch bench/train_dp2.yaml --set train.steps="$steps" --set run.dir="$dir" \
    --set data.train="$train" --set data.val="$val" "$@" | { grep -E '^(model|step)' || true; }
}
echo "== Atoll (DP=2, 1 thread per rank)"
atoll_run "$run_dir"
echo "== Atoll (DP=2, bf16 mixed precision, 1 thread per rank)"
atoll_run "$run_dir-bf16" --set train.precision=bf16
echo "== Atoll (TP=2, 1 thread per rank)"
atoll_run "$run_dir-tp2" --set parallel.dp=1 --set parallel.tp=2

torch_run() {  # torch_run fp32|bf16
  "$python" bench/pytorch_llama_ddp.py "${shape[@]}" --world 2 --steps "$steps" --warmup-steps "$warmup" \
    --precision "$1" --data "$train" | tail -1
}
# Atoll keeps freed memory in glibc's heap (runtime/host_memory.h); offer PyTorch the same through
# glibc's environment, and compare against whichever PyTorch run is faster.
declare -A torch_result
for precision in fp32 bf16; do
  echo "== PyTorch DDP (gloo, 1 thread per rank, $precision), as is"
  torch_result[$precision-plain]=$(torch_run "$precision")
  echo "${torch_result[$precision-plain]}"
  echo "== PyTorch DDP ($precision) with glibc keeping freed memory (what Atoll does itself)"
  torch_result[$precision-tuned]=$(MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824 torch_run "$precision")
  echo "${torch_result[$precision-tuned]}"
done

"$python" - "$run_dir/metrics.jsonl" "$run_dir-bf16/metrics.jsonl" "$run_dir-tp2/metrics.jsonl" \
  "${torch_result[fp32-plain]}" "${torch_result[fp32-tuned]}" "${torch_result[bf16-plain]}" "${torch_result[bf16-tuned]}" \
  "$warmup" "${shape[@]}" <<'PY'
import json, statistics, sys
dp_path, bf16_path, tp_path, fp32_plain, fp32_tuned, bf16_plain, bf16_tuned, warmup = sys.argv[1:9]
flags = sys.argv[9:]
s = {flags[i].lstrip("-").replace("-", "_"): int(flags[i + 1]) for i in range(0, len(flags), 2)}
warmup = int(warmup)

def steady_records(path):
    records = [json.loads(line) for line in open(path) if '"tokens_per_s"' in line]
    return records[warmup:] or records

# MFU numerator, the formula of runtime/llama.cpp training_flops_per_token: 6 x non-embedding
# parameters (LM head included) + 12 x layers x seq x dim for attention.
head_dim = s["dim"] // s["heads"]
per_layer = s["dim"] * head_dim * 2 * (s["heads"] + s["kv_heads"]) + 3 * s["dim"] * s["ffn"] + 2 * s["dim"]
non_embedding = s["layers"] * per_layer + s["dim"] + s["vocab"] * s["dim"]
flops_per_token = 6 * non_embedding + 12 * s["layers"] * s["seq"] * s["dim"]

dp = steady_records(dp_path)
atoll_tps = statistics.median(r["tokens_per_s"] for r in dp)
atoll_mfu = statistics.median(r["mfu"] for r in dp)
# The denominator Atoll measured at start-up (matmul peak per rank x ranks), from its own figures.
peak = dp[0]["tokens_per_s"] * flops_per_token / dp[0]["mfu"]

def tokens_per_s(line):
    fields = dict(kv.split("=") for kv in line.split()[1:])
    return float(fields["tokens_per_s"])

bf16 = steady_records(bf16_path)
atoll_bf16_tps = statistics.median(r["tokens_per_s"] for r in bf16)
print()
print(f"median of steps {warmup + 1}+; MFU = tokens/s x {flops_per_token / 1e6:.2f} MFLOP/token "
      f"/ {peak / 1e9:.1f} GFLOP/s (Atoll's measured fp32 matmul peak, all ranks)")
for precision, atoll_tps_p, plain, tuned in (("fp32", atoll_tps, fp32_plain, fp32_tuned),
                                               ("bf16", atoll_bf16_tps, bf16_plain, bf16_tuned)):
    torch = {f"PyTorch DDP {precision} (as is)": tokens_per_s(plain),
             f"PyTorch DDP {precision} (malloc tuned)": tokens_per_s(tuned)}
    print(f"{'':34s} {'tokens/s':>10s} {'MFU':>7s} {'Atoll/this':>11s}")
    print(f"{'Atoll (DP=2, ' + precision + ')':34s} {atoll_tps_p:10.0f} {100 * atoll_tps_p * flops_per_token / peak:6.1f}% {1.0:11.2f}")
    for name, tps in torch.items():
        print(f"{name:34s} {tps:10.0f} {100 * tps * flops_per_token / peak:6.1f}% {atoll_tps_p / tps:11.2f}")
    best = max(torch.values())
    print(f"{precision}: Atoll / fastest PyTorch: {atoll_tps_p / best:.2f}x (target >= 1.25x)")
print(f"Atoll fp32 MFU {100 * atoll_mfu:.1f}% of the measured fp32 matmul peak (target >= 70%); "
      f"bf16 / fp32 tokens/s {atoll_bf16_tps / atoll_tps:.2f}x")

# TP=2: the bytes each rank sends per step against Megatron's analytic figure: per layer 4 all-reduces
# of batch*seq*dim fp32 activations (2 forward, 2 backward), plus the embedding's forward and the LM
# head's backward all-reduce; a ring all-reduce of n bytes sends 2(p-1)/p*n = n bytes at p = 2.
tp = steady_records(tp_path)
tp_tps = statistics.median(r["tokens_per_s"] for r in tp)
measured = statistics.median(r["comm_bytes"] for r in tp)
analytic = (4 * s["layers"] + 2) * s["global_batch"] * s["seq"] * s["dim"] * 4
wait = statistics.median(r["comm_wait_s"] for r in tp)
step = statistics.median(r["step_s"] for r in tp)
print(f"TP=2: time blocked in communication {1e3 * wait:.0f} ms of a {1e3 * step:.0f} ms step ({100 * wait / step:.0f}%)")
print(f"TP=2: {tp_tps:.0f} tokens/s ({tp_tps / atoll_tps:.2f}x DP=2); all-reduce bytes sent per rank per step "
      f"{measured / 2**20:.1f} MiB vs analytic {analytic / 2**20:.1f} MiB ((4 x layers + 2) x batch*seq*dim*4 B; "
      f"the rest is the cross-entropy's three [tokens] all-reduces and the grad-norm scalar)")
PY
