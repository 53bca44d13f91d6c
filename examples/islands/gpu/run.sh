#!/usr/bin/env bash
# The low-communication quality experiment on one GPU (issue 41): issue 20's anchor-faithful protocol
# (20 tokens per parameter, one warmup + cosine schedule, the same tokens for every method, phi
# evaluated right after the last sync, paired seeds) on the subword corpus, for
#   sync        synchronous data parallelism over 4 islands (the baseline: the mean gradient every step)
#   diloco      DiLoCo, 4 islands, plain averaging (outer lr 1, no momentum), int4 exchange
#   sparseloco  DiLoCo with a top-8/256 int4 exchange and error feedback, 4 islands, outer lr 2
#   diloco_m2   DiLoCo, 2 islands (32 sequences each), Nesterov 0.5, outer lr 0.6, int4
#   streaming   Streaming DiLoCo, 4 islands, 2 fragments, delay 1, int4
# all at H = 16 with issue 20's tuned outer steps (docs/islands.md, "Choosing H, codec and outer LR").
# Every island is one rank; all ranks share the one GPU (no NCCL between ranks: runtime/device.h).
#
# Usage: bash examples/islands/gpu/run.sh SEED...    e.g. `run.sh 1` (a part), `run.sh 1 2`
# Each SEED runs the five methods in the order above, one run at a time, into
# $ISLANDS_RUNS/$SIZE/METHOD/seed-S. A finished run (its DONE file) is skipped, an unfinished one
# resumes from its last checkpoint (checkpoint.resume auto), so a part cut off by its time budget
# resumes where it stopped when it is run again. When ISLANDS_BUDGET_S is spent, the run in flight is
# preempted (SIGTERM to `atoll launch`: every rank finishes its step and commits a checkpoint) and no
# further run starts. Then the tables (examples/islands/quality.py, issue 41's targets) over every
# method's finished seeds, and a figures file: $ISLANDS_RUNS/$SIZE/{quality.md,quality.svg,figures.md}.
#
# Environment:
#   ISLANDS_SIZE      m (default: 1.84M parameters), s (0.62M), l (6.85M), or tiny (a pipeline check:
#                     ISLANDS_TINY_STEPS steps, default 64, not 20 tokens per parameter)
#   ISLANDS_DEVICE    cuda (default) or cpu
#   ISLANDS_BUDGET_S  seconds for the whole call, tables included (default 480)
#   ISLANDS_RUNS      where the runs go (default runs/islands-gpu)
#   ISLANDS_METHODS   the methods to run (default: the five above, in that order)
#   ISLANDS_PRECISION bf16 on cuda, fp32 on cpu (default)
#   ATOLL             the binary (default build/bin/atoll)
# Needs the subword corpus in data/pydocs-sp8k (scripts/gpu_islands.sh prepare makes it).
set -uo pipefail
cd "$(dirname "$0")/../../.."
started=$SECONDS
budget=${ISLANDS_BUDGET_S:-480}
size=${ISLANDS_SIZE:-m}
device=${ISLANDS_DEVICE:-cuda}
runs=${ISLANDS_RUNS:-runs/islands-gpu}/$size
atoll=${ATOLL:-build/bin/atoll}
methods=(${ISLANDS_METHODS:-sync diloco sparseloco diloco_m2 streaming})
python=$(command -v python3)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
(($# > 0)) || { echo "usage: bash examples/islands/gpu/run.sh SEED..." >&2; exit 2; }
[[ -s data/pydocs-sp8k/train.bin ]] || { echo "run.sh: no data/pydocs-sp8k/train.bin; run: bash scripts/gpu_islands.sh prepare" >&2; exit 1; }
mkdir -p "$runs"

# The sizes: model shape, then the run's length for 20 tokens per parameter (global batch 64 x 256).
# H = 16: steps, evaluations and checkpoints fall on sync steps.
H=16
case $size in
  tiny) shape=(32 2 2 86 64); batch=16 ;;
  s) shape=(64 2 4 172 256); batch=64 ;;
  m) shape=(128 4 4 344 256); batch=64 ;;
  l) shape=(256 6 8 688 256); batch=64 ;;
  *) echo "run.sh: ISLANDS_SIZE is tiny, s, m or l, not $size" >&2; exit 2 ;;
esac
read -r dim layers heads ffn seq <<<"${shape[*]}"
# Parameters as Atoll counts them (tied embeddings, no biases, RMSNorm weights) -- checked against the
# start-up line "model: N parameters" in figures.md.
params=$((8192 * dim + layers * (2 * dim + 4 * dim * dim + 3 * dim * ffn) + dim))
tokens_per_step=$((batch * seq))
if [[ $size == tiny ]]; then
  steps=${ISLANDS_TINY_STEPS:-64}
else
  steps=$(((20 * params + tokens_per_step * H - 1) / (tokens_per_step * H) * H))
fi
eval_every=$(((steps / 4 + H - 1) / H * H))
warmup=$((steps / 32 > 20 ? steps / 32 : 20))
checkpoint_every=$(((steps / 6 + H - 1) / H * H))
eval_sequences=$([[ $size == tiny ]] && echo 16 || echo 128)
threads=$([[ $device == cpu ]] && echo 1 || echo 0)
# bf16 on the GPU (tensor cores; fp32 master weights, AdamW and outer state); fp32 on the CPU.
precision=${ISLANDS_PRECISION:-$([[ $device == cpu ]] && echo fp32 || echo bf16)}
train_tokens=$(od -An -t d4 -j 8 -N 4 data/pydocs-sp8k/train.bin | tr -d ' ')
common=(--set run.device="$device" --set run.threads="$threads"
  --set model.dim="$dim" --set model.layers="$layers" --set model.heads="$heads" --set model.kv_heads="$heads"
  --set model.ffn="$ffn" --set model.seq="$seq" --set train.global_batch="$batch"
  --set train.steps="$steps" --set train.eval_every="$eval_every" --set train.eval_sequences="$eval_sequences"
  --set train.log_every="$H" --set optim.warmup="$warmup" --set checkpoint.every="$checkpoint_every"
  --set outer.inner_steps="$H" --set train.precision="$precision")
cat >"$runs/size.txt" <<EOF
size $size: dim $dim, layers $layers, heads $heads, ffn $ffn, seq $seq, vocab 8192 (tied)
parameters $params; $steps steps of $batch x $seq = $tokens_per_step tokens: $((steps * tokens_per_step)) tokens, $(awk -v t=$((steps * tokens_per_step)) -v p=$params 'BEGIN{printf "%.1f", t/p}') per parameter
corpus: $train_tokens training tokens: $(awk -v t=$((steps * tokens_per_step)) -v c="$train_tokens" 'BEGIN{printf "%.2f", t/c}') epochs
precision $precision, H $H, warmup $warmup, evaluations every $eval_every steps ($eval_sequences sequences) and after the last sync, checkpoints every $checkpoint_every
EOF
cat "$runs/size.txt"

# The methods' own settings (issue 20's tuned outer steps).
settings() {
  case $1 in
    sync) echo "--set outer.algorithm=none" ;;
    diloco) echo "--set outer.compression=int4" ;;
    sparseloco) echo "--set outer.topk=8 --set outer.compression=int4 --set outer.lr=2" ;;
    diloco_m2) echo "--set parallel.islands=2 --set outer.compression=int4 --set outer.lr=0.6 --set outer.momentum=0.5" ;;
    streaming) echo "--set outer.algorithm=streaming_diloco --set outer.fragments=2 --set outer.delay=1 --set outer.compression=int4" ;;
    *) echo "run.sh: unknown method $1" >&2; return 1 ;;
  esac
}

left() { echo $((budget - (SECONDS - started))); }
cut_off=0
# one METHOD SEED: runs (or resumes) one run; returns 1 when the budget ran out during it.
one() {
  local method=$1 seed=$2 dir=$runs/$1/seed-$2 overrides
  [[ -f $dir/DONE ]] && { echo "$method seed $seed: done earlier"; return 0; }
  overrides=$(settings "$method") || return 1
  local limit=$(($(left) - 30))  # 30 s kept for the preemption's checkpoint and the tables
  if ((limit < 20)); then
    echo "$method seed $seed: not started (the budget of $budget s is spent)"
    return 1
  fi
  mkdir -p "$dir"
  touch "$dir/RUNNING"
  local t0=$SECONDS rc
  # A process group of its own, so that nothing of the run outlives a preemption.
  # shellcheck disable=SC2086  # $overrides is a list of options
  setsid "$atoll" launch examples/islands/gpu/quality.yaml --set run.dir="$dir" --set run.seed="$seed" \
    "${common[@]}" $overrides >>"$dir/launch.log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null && ((SECONDS - t0 < limit)); do sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"  # preempt: every rank finishes its step and commits a checkpoint
    local waited=0
    while kill -0 "$pid" 2>/dev/null && ((waited < 25)); do sleep 1; waited=$((waited + 1)); done
    kill -0 "$pid" 2>/dev/null && kill -KILL -- "-$pid"
    wait "$pid"
    echo "$method seed $seed: CUT OFF after $((SECONDS - t0)) s (budget spent); run the part again to resume it"
    cut_off=1
    return 1
  fi
  wait "$pid"
  rc=$?
  if ((rc != 0)); then
    echo "$method seed $seed: FAILED (exit $rc) after $((SECONDS - t0)) s; the end of $dir/launch.log:"
    tail -n 15 "$dir/launch.log" | sed 's/^/    /'
    return 1
  fi
  rm -f "$dir/RUNNING"
  echo "$((SECONDS - t0))" >"$dir/DONE"
  echo "$method seed $seed: $(grep -E "step +$steps/$steps .*val loss" "$dir/launch.log" | tail -1 | sed 's/^ *//') ($((SECONDS - t0)) s)"
}

for seed in "$@"; do
  for method in "${methods[@]}"; do
    one "$method" "$seed" || { ((cut_off)) || (($(left) < 50)) && break 2; }
  done
done

# The tables over every method's finished seeds (quality.py leaves out RUNNING ones), and the figures.
finished=()
for method in "${methods[@]}"; do compgen -G "$runs/$method/seed-*/DONE" >/dev/null && finished+=("$method"); done
if [[ ${finished[0]:-} == sync ]]; then
  "$python" examples/islands/quality.py --targets issue41 "$runs" "${finished[@]}"
else
  echo "run.sh: no finished sync run yet: no table"
fi
"$python" examples/islands/gpu/figures.py "$runs" "${methods[@]}" | tee "$runs/figures.md"
echo "run.sh: $((SECONDS - started)) s"
