#!/usr/bin/env bash
# GPU benchmark: a 1.04B-parameter Llama (bench/train_gpu_1b.yaml: dim 2048, 16 layers, GQA 32/8
# heads, seq 2048, bf16 mixed precision) on 1 GPU and on every GPU of the node (pure data
# parallelism with ZeRO-1), in Atoll and in PyTorch (bench/pytorch_llama_gpu.py: the same model, eager,
# bf16 autocast, SDPA, DDP over NCCL, fused AdamW), measured in the same run, with the same global
# batch (SEQS_PER_GPU sequences per GPU). Prints tokens/s, MFU against the bf16 matmul peak measured
# at start-up and against the datasheet peak, peak GPU memory, the Atoll/PyTorch ratio and the
# targets (MFU >= 50% of the datasheet peak, tokens/s >= 1.15x eager PyTorch and >= 1.0x torch.compile);
# never fails for being slow.
# Usage: bash bench/bench_gpu.sh [STEPS=30] [SEQS_PER_GPU=8]   (ATOLL_BIN overrides build/bin/atoll;
#        BENCH_GPU_COMPILE=0 leaves out the torch.compile peer, BENCH_GPU_PEER=0 both peers; extra Atoll overrides in ATOLL_BENCH_SET,
#        e.g. ATOLL_BENCH_SET="optim.fused=false", to measure a lever against its baseline)
#        BENCH_GPU_FP8=1: the FP8 benchmark instead (bench/bench_gpu_fp8.sh: Atoll bf16 and fp8 against
#        torchao float8 + torch.compile, on the 1.04B shape and on four Llama 3 8B layers; STEPS default 20)
# Exit status: 0 measured; 77 skipped, with one line and no figure, where torch sees no GPU;
# 1 a run failed (the others are still measured and reported; logs in runs/bench-gpu/).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${ATOLL_PYTHON_BIN:-.venv/bin/python}
warmup=5  # steps left out of every figure: cuBLAS/flash kernel selection, allocator growth, DDP buckets

# GPUs: torch's count decides (Atoll's LibTorch and the peer see what it sees); nvidia-smi's is
# said beside it, so a driver that lists GPUs torch cannot use is visible in the skip line.
if command -v nvidia-smi >/dev/null 2>&1; then
  smi_count=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  smi_note="nvidia-smi -L lists $smi_count"
else
  smi_count=0 smi_note="nvidia-smi: not found"
fi
gpus=$("$python" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null) || gpus=""
if ! [[ $gpus =~ ^[1-9][0-9]*$ ]]; then
  if [[ -z $gpus ]] && ((smi_count > 0)); then
    echo "bench_gpu: $smi_note GPUs, but $python cannot import torch to use them;" \
      "run scripts/install-deps.sh (or set ATOLL_PYTHON_BIN)" >&2
    exit 1
  fi
  echo "bench_gpu: skipped: no GPU ($smi_note;" \
    "torch.cuda.device_count() = ${gpus:-unknown: $python cannot import torch})"
  exit 77
fi

source bench/common.sh
if [[ ${BENCH_GPU_FP8:-0} == 1 ]]; then
  bench_start bench_gpu 20 $warmup "$@"
  ATOLL_BIN=$atoll ATOLL_PYTHON_BIN=$python exec bash bench/bench_gpu_fp8.sh "$steps"
fi
bench_start bench_gpu 30 $warmup "$@"
seqs=${2:-8}
compile=${BENCH_GPU_COMPILE:-1}  # 0 leaves out the torch.compile peer (its compilation takes a minute or two)
peer=${BENCH_GPU_PEER:-1}        # 0 runs Atoll alone (a lever measured against Atoll's own default)
if ! [[ $seqs =~ ^[1-9][0-9]*$ ]]; then
  echo "bench_gpu: SEQS_PER_GPU must be a positive number, got '$seqs'" >&2
  exit 1
fi

# The model of bench/train_gpu_1b.yaml, for the PyTorch peer (the summary checks it against the
# config Atoll resolved, so the two cannot drift apart unnoticed).
shape=(--vocab 32000 --dim 2048 --layers 16 --heads 32 --kv-heads 8 --ffn 8192 --seq 2048
  --rope-theta 500000 --tie-embeddings)
out=runs/bench-gpu
rm -rf "$out"
mkdir -p "$out"

failed=0
source bench/gpu_run_logged.sh

counts=(1)
if ((gpus > 1)); then counts+=("$gpus"); fi
for n in "${counts[@]}"; do
  # ZeRO-1 shards AdamW's state over the GPUs; one GPU has nothing to shard it over (stage 1 would
  # only add its second gradient buffer).
  zero=$((n > 1 ? 1 : 0))
  echo "== Atoll, $n GPU(s): DP=$n, ZeRO-$zero, global batch $((n * seqs))"
  run_logged "$out/atoll-${n}gpu.log" "$atoll" launch bench/train_gpu_1b.yaml --set run.dir="$out/atoll-${n}gpu" \
    --set train.steps="$steps" --set parallel.dp="$n" --set parallel.zero="$zero" --set train.global_batch=$((n * seqs)) \
    ${ATOLL_BENCH_SET:+$(printf -- '--set %s ' $ATOLL_BENCH_SET)}
  ((peer == 1)) || continue
  reduction="DDP over NCCL"
  ((n > 1)) || reduction="no DDP: one GPU has no gradients to reduce"
  echo "== PyTorch, $n GPU(s): $reduction, global batch $((n * seqs))"
  run_logged "$out/pytorch-${n}gpu.log" "$python" -m torch.distributed.run --standalone --nproc-per-node "$n" \
    bench/pytorch_llama_gpu.py "${shape[@]}" --global-batch $((n * seqs)) --steps "$steps" \
    --warmup-steps "$warmup" --data data/pydocs/train.bin
  if [[ $compile == 1 ]]; then
    echo "== PyTorch compiled (torch.compile), $n GPU(s): $reduction, global batch $((n * seqs))"
    run_logged "$out/pytorch-compiled-${n}gpu.log" "$python" -m torch.distributed.run --standalone \
      --nproc-per-node "$n" bench/pytorch_llama_gpu.py "${shape[@]}" --global-batch $((n * seqs)) \
      --steps "$steps" --warmup-steps "$warmup" --data data/pydocs/train.bin --compile
  fi
done

"$python" - "$out" "$warmup" "${counts[*]}" "${shape[@]}" <<'PY'
import json, os, statistics, sys
from types import SimpleNamespace
sys.path.insert(0, "bench")
import torch
from model_flags import peer_model, resolved_model, value
from pytorch_llama_gpu import training_flops_per_token

out, warmup, counts, flags = sys.argv[1], int(sys.argv[2]), [int(n) for n in sys.argv[3].split()], sys.argv[4:]

peer = peer_model(flags)
flops = training_flops_per_token(SimpleNamespace(**peer))

def atoll_figures(n):
    """Median tokens/s and MFU of the steps after warm-up, the start record's peaks, the peak memory."""
    run_dir = f"{out}/atoll-{n}gpu"
    if not os.path.exists(f"{run_dir}/metrics.jsonl"):
        return None
    records = [json.loads(line) for line in open(f"{run_dir}/metrics.jsonl")]
    start = next((r for r in records if r.get("event") == "start"), {})
    steps = [r for r in records if "tokens_per_s" in r][warmup:]
    if not steps:
        return None
    model = resolved_model(run_dir)
    peaks = [r["gpu_peak_bytes"] for r in records if "gpu_peak_bytes" in r]
    return {"tps": statistics.median(r["tokens_per_s"] for r in steps),
            "mfu": statistics.median(r["mfu"] for r in steps),
            "measured": start.get("peak_flops_measured"), "datasheet": start.get("peak_flops_datasheet"),
            "peak_bytes": max(peaks) if peaks else None,
            "mismatch": [f"{k} {model[k]} vs {v}" for k, v in peer.items() if k in model and value(model[k]) != v]}

def peer_figures(n, compiled=False):
    path = f"{out}/pytorch-{'compiled-' if compiled else ''}{n}gpu.log"
    lines = [line for line in open(path) if line.startswith("pytorch_gpu ")] if os.path.exists(path) else []
    if not lines:
        return None
    f = {k: float(v) for k, v in (kv.split("=") for kv in lines[-1].split()[1:])}
    return {"tps": f["tokens_per_s"], "measured": f["peak_flops_measured"],
            "datasheet": f["peak_flops_datasheet"] or None, "peak_bytes": f["peak_bytes"]}

def pct(x):
    return f"{100 * x:.1f}%" if x is not None else "n/a"

print(f"\n{torch.cuda.get_device_name(0)}; median of steps {warmup + 1}+; MFU = tokens/s x "
      f"{flops / 1e9:.2f} GFLOP/token (Atoll's count, for both systems) / (GPUs x peak per GPU)")
print(f"{'system':16s} {'GPUs':>4s} {'tokens/s':>10s} {'MFU measured':>13s} {'MFU datasheet':>14s} "
      f"{'peak GiB':>9s} {'Atoll/PyTorch':>14s} {'Atoll/compiled':>15s}")
results, peaks, warnings = {}, [], []
for n in counts:
    a, p, pc = atoll_figures(n), peer_figures(n), peer_figures(n, compiled=True)
    # One denominator per column for both systems: Atoll's start-up probe and datasheet figure, the
    # peer's where Atoll gave none.
    measured = (a and a["measured"]) or (p and p["measured"])
    datasheet = (a and a["datasheet"]) or (p and p["datasheet"])
    probes = ", ".join(f"{name}'s probe {f['measured'] / 1e12:.0f}" for name, f in (("Atoll", a), ("PyTorch", p))
                       if f and f["measured"])
    peaks.append(f"{n} GPU(s): {probes or 'none measured'}"
                 + (f", datasheet {datasheet / 1e12:.0f}" if datasheet else ", datasheet unknown"))
    # Both probes time the same GPUs: figures far apart mean a unit slip (a total for a per-GPU peak).
    for what in ("measured", "datasheet"):
        if a and p and a[what] and p[what] and not 0.67 < a[what] / p[what] < 1.5:
            warnings.append(f"warning: at {n} GPU(s) Atoll's peak_flops_{what} ({a[what] / 1e12:.0f} TFLOP/s) and "
                            f"PyTorch's ({p[what] / 1e12:.0f}) disagree: is Atoll's a figure per GPU?")
    for name, f in (("Atoll", a), ("PyTorch", p), ("PyTorch+compile", pc)):
        if f is None:
            # A peer that was not run (BENCH_GPU_PEER=0, BENCH_GPU_COMPILE=0) has no log and no row.
            log = {"Atoll": f"atoll-{n}gpu.log", "PyTorch": f"pytorch-{n}gpu.log",
                   "PyTorch+compile": f"pytorch-compiled-{n}gpu.log"}[name]
            if os.path.exists(f"{out}/{log}"):
                print(f"{name:16s} {n:4d} failed or wrote no figures: see {out}/{log}")
            continue
        mfu_m = f["tps"] * flops / (measured * n) if measured else None
        mfu_d = f["tps"] * flops / (datasheet * n) if datasheet else None
        memory = f"{f['peak_bytes'] / 2**30:.1f}" if f["peak_bytes"] is not None else "n/a"
        ratio = f"{a['tps'] / p['tps']:.2f}x" if name == "Atoll" and p else ""
        ratio_compiled = f"{a['tps'] / pc['tps']:.2f}x" if name == "Atoll" and pc else ""
        print(f"{name:16s} {n:4d} {f['tps']:10.0f} {pct(mfu_m):>13s} {pct(mfu_d):>14s} {memory:>9s} {ratio:>14s} "
              f"{ratio_compiled:>15s}")
        results[(name, n)] = {"tps": f["tps"], "mfu_m": mfu_m, "mfu_d": mfu_d}
        # Atoll's own mfu field against this count with its own peak: equal unless the FLOP counts differ.
        own = f["tps"] * flops / (f["measured"] * n) if name == "Atoll" and f["measured"] else None
        if own and abs(f["mfu"] / own - 1) > 0.01:
            warnings.append(f"warning: at {n} GPU(s) Atoll's own mfu ({pct(f['mfu'])}) differs from this count "
                            f"with its peak ({pct(own)}): the two FLOP counts differ")
        if name == "Atoll" and f["mismatch"]:
            warnings.append(f"warning: NOT the same model at {n} GPU(s) (Atoll vs PyTorch): "
                            + "; ".join(f["mismatch"]))
print("peak per GPU, TFLOP/s bf16: " + "; ".join(peaks))
print("peak GiB: Atoll's gpu_peak_bytes (metrics.jsonl, rank 0); "
      "PyTorch's torch.cuda.max_memory_allocated (largest rank)")
if warnings or any(("Atoll", n) in results for n in counts):
    print("\n".join(warnings) or "same model in both systems (checked against the config Atoll resolved)")

def check(what, value, target, fmt):
    print(f"target: {what} = {fmt(value)} (>= {fmt(target)}): {'met' if value >= target else 'NOT met'}")
for n in counts:
    a = results.get(("Atoll", n))
    if a is None:
        continue
    key, label = ("mfu_d", "datasheet") if a["mfu_d"] is not None else ("mfu_m", "measured")
    if a[key] is not None:
        check(f"Atoll MFU against the {label} peak, {n} GPU(s)", a[key], 0.50, pct)
    if ("PyTorch", n) in results:
        r = a["tps"] / results[("PyTorch", n)]["tps"]
        check(f"Atoll / PyTorch eager tokens/s, {n} GPU(s)", r, 1.15, lambda x: f"{x:.2f}x")
    if ("PyTorch+compile", n) in results:
        r = a["tps"] / results[("PyTorch+compile", n)]["tps"]
        check(f"Atoll / PyTorch compiled tokens/s, {n} GPU(s)", r, 1.0, lambda x: f"{x:.2f}x")
n = counts[-1]
for name in ("Atoll", "PyTorch"):
    if n > 1 and (name, 1) in results and (name, n) in results:
        speedup = results[(name, n)]["tps"] / results[(name, 1)]["tps"]
        print(f"{name}: {n} GPUs give {speedup:.2f}x the tokens/s of 1 ({speedup / n:.2f} of linear scaling)")
PY
exit $failed
