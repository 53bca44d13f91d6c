#!/usr/bin/env bash
# The low-communication quality experiment at the papers' scale (issue 55): a 10.06M-parameter Llama
# trained to 20 tokens per parameter on the Debian documentation corpus (data/debdocs, 8,192
# SentencePiece pieces: examples/debdocs/prepare.sh), one warmup + cosine schedule and the same
# tokens for every method, phi evaluated right after the last sync, for
#   sync             synchronous training at the same global batch: one rank, the mean gradient of
#                    the whole batch every step (what M data-parallel islands compute, without the
#                    per-step exchange that ranks sharing one GPU would pay through host copies)
#   diloco           DiLoCo, M = 4, the papers' outer step (Nesterov 0.9, outer lr 0.6), int4
#   diloco_default   DiLoCo, M = 4, Atoll's default outer step (plain averaging: lr 1, no momentum), int4
#   diloco_m2        DiLoCo, M = 2, the papers' outer step, int4
#   streaming_m2     Streaming DiLoCo, M = 2, 2 fragments, delay 1, mix 0.5, the papers' outer step, int4
#   noloco           NoLoCo, M = 4, gossip pairs, its paper's outer step (Atoll's default: lr 0.7,
#                    momentum 0.5, gamma = lr)
#   sparseloco       SparseLoCo, M = 4, top-8 of every 256 in int4 with error feedback, outer lr 2
# all at H = 30 (the scaling-law paper's; ISLANDS_H changes it). Every island is one rank; all ranks
# share the one GPU (no NCCL between ranks: runtime/device.h), several runs at once under CUDA MPS
# when the caller started it (scripts/gpu_islands.sh does).
#
# Usage: bash examples/islands/gpu/run.sh SEED...    e.g. `run.sh 1 2`
# Runs every (method, seed) of ISLANDS_PLAN (default: the methods above with seed 1, then sync and
# diloco with the other seeds) into $ISLANDS_RUNS/$SIZE/METHOD/seed-S, up to ISLANDS_RANKS ranks at
# once (default 1 run at a time on the CPU, 13 ranks on a GPU: sync, DiLoCo M=4 and M=2 and Streaming M=2 together, then the next as one ends). A finished run (its DONE file) is
# skipped, an unfinished one resumes from its last checkpoint (checkpoint.resume auto). When
# ISLANDS_BUDGET_S is spent, the runs in flight are preempted (SIGTERM to `atoll launch`: every rank
# finishes its step and commits a checkpoint) and no further run starts: running it again resumes.
# Then the tables (examples/islands/quality.py --targets issue55) and a figures file:
# $ISLANDS_RUNS/$SIZE/{quality.md,quality.svg,figures.md}.
#
# Environment:
#   ISLANDS_SIZE      m10 (default: 10.06M parameters), s (0.62M: the CPU's), or tiny (0.29M, 60 steps: a
#                     pipeline check, not 20 tokens per parameter)
#   ISLANDS_STEPS     the steps instead of 20 tokens per parameter (a rehearsal; a multiple of H)
#   ISLANDS_DEVICE    cuda (default) or cpu
#   ISLANDS_BUDGET_S  seconds for the whole call, tables included (default 480)
#   ISLANDS_RUNS      where the runs go (default runs/islands-gpu)
#   ISLANDS_METHODS   the methods run with the first seed (default: all seven, in the order above)
#   ISLANDS_RANKS     the most ranks running at once (default 13 on cuda, 1 on cpu: one run at a time)
#   ISLANDS_H         inner steps between syncs (default 30)
#   ISLANDS_PRECISION bf16 on cuda, fp32 on cpu (default)
#   ATOLL             the binary (default build/bin/atoll)
#   ISLANDS_CORPUS    the corpus folder (default data/debdocs: bash examples/debdocs/prepare.sh makes it)
set -uo pipefail
cd "$(dirname "$0")/../../.."
started=$SECONDS
budget=${ISLANDS_BUDGET_S:-480}
size=${ISLANDS_SIZE:-m10}
device=${ISLANDS_DEVICE:-cuda}
runs=${ISLANDS_RUNS:-runs/islands-gpu}/$size
atoll=${ATOLL:-build/bin/atoll}
corpus=${ISLANDS_CORPUS:-data/debdocs}
first_methods=(${ISLANDS_METHODS:-sync diloco diloco_m2 streaming_m2 sparseloco noloco diloco_default})
max_ranks=${ISLANDS_RANKS:-$([[ $device == cpu ]] && echo 1 || echo 13)}
H=${ISLANDS_H:-30}
python=$(command -v python3)
export OMP_NUM_THREADS=1
(($# > 0)) || { echo "usage: bash examples/islands/gpu/run.sh SEED..." >&2; exit 2; }
[[ -s $corpus/train.bin ]] || { echo "run.sh: no $corpus/train.bin; run: bash examples/debdocs/prepare.sh" >&2; exit 1; }
mkdir -p "$runs"

# The sizes: model shape (dim layers heads ffn seq), global batch in sequences.
case $size in
  tiny) shape=(32 2 2 86 64); batch=16 ;;
  s) shape=(64 2 4 172 256); batch=64 ;;
  m10) shape=(320 6 5 864 512); batch=256 ;;
  *) echo "run.sh: ISLANDS_SIZE is tiny, s or m10, not $size" >&2; exit 2 ;;
esac
read -r dim layers heads ffn seq <<<"${shape[*]}"
# Parameters as Atoll counts them (tied embeddings, no biases, RMSNorm weights) -- checked against the
# start-up line "model: N parameters" in figures.md.
params=$((8192 * dim + layers * (2 * dim + 4 * dim * dim + 3 * dim * ffn) + dim))
tokens_per_step=$((batch * seq))
if [[ -n ${ISLANDS_STEPS:-} ]]; then
  steps=$ISLANDS_STEPS
elif [[ $size == tiny ]]; then
  steps=60
else
  steps=$(((20 * params + tokens_per_step * H - 1) / (tokens_per_step * H) * H))
fi
# Evaluations, warmup and checkpoints fall on sync steps (multiples of H).
eval_every=$(((steps / 8 + H - 1) / H * H))
warmup=$((2 * H))
checkpoint_every=$(((steps / 4 + H - 1) / H * H))
eval_sequences=$([[ $size == tiny ]] && echo 16 || echo 128)
precision=${ISLANDS_PRECISION:-$([[ $device == cpu ]] && echo fp32 || echo bf16)}
train_tokens=$(od -An -t d4 -j 8 -N 4 "$corpus/train.bin" | tr -d ' ')
common=(--set run.device="$device"
  --set model.dim="$dim" --set model.layers="$layers" --set model.heads="$heads" --set model.kv_heads="$heads"
  --set model.ffn="$ffn" --set model.seq="$seq" --set train.global_batch="$batch"
  --set train.steps="$steps" --set train.eval_every="$eval_every" --set train.eval_sequences="$eval_sequences"
  --set train.log_every="$((H / 2))" --set optim.warmup="$warmup" --set checkpoint.every="$checkpoint_every"
  --set outer.inner_steps="$H" --set train.precision="$precision")
cat >"$runs/size.txt" <<EOF
size $size: dim $dim, layers $layers, heads $heads, ffn $ffn, seq $seq, vocab 8192 (tied)
parameters $params; $steps steps of $batch x $seq = $tokens_per_step tokens: $((steps * tokens_per_step)) tokens, $(awk -v t=$((steps * tokens_per_step)) -v p=$params 'BEGIN{printf "%.1f", t/p}') per parameter
corpus: $train_tokens training tokens: $(awk -v t=$((steps * tokens_per_step)) -v c="$train_tokens" 'BEGIN{printf "%.2f", t/c}') epochs
precision $precision, H $H, warmup $warmup, evaluations every $eval_every steps ($eval_sequences sequences) and after the last sync, checkpoints every $checkpoint_every
EOF
cat "$runs/size.txt"

# The papers' outer step: outer SGD with Nesterov momentum 0.9 and outer lr 0.6 (Charles et al. 2025
# for M = 2 to 4; Douillard et al. 2025 for Streaming DiLoCo's).
papers="--set outer.lr=0.6 --set outer.momentum=0.9 --set outer.nesterov=true"
# METHOD -> its islands and settings.
islands_of() {
  case $1 in sync) echo 1 ;; diloco_m2 | streaming_m2) echo 2 ;; *) echo 4 ;; esac
}
settings() {
  case $1 in
    sync) echo "--set parallel.islands=1 --set outer.algorithm=none" ;;
    diloco) echo "--set outer.compression=int4 $papers" ;;
    diloco_default) echo "--set outer.compression=int4" ;;
    diloco_m2) echo "--set parallel.islands=2 --set outer.compression=int4 $papers" ;;
    streaming_m2) echo "--set parallel.islands=2 --set outer.algorithm=streaming_diloco --set outer.fragments=2" \
      "--set outer.delay=1 --set outer.mix=0.5 --set outer.compression=int4 $papers" ;;
    noloco) echo "--set outer.algorithm=noloco" ;;
    sparseloco) echo "--set outer.topk=8 --set outer.compression=int4 --set outer.lr=2" ;;
    *) echo "run.sh: unknown method $1" >&2; return 1 ;;
  esac
}

# The plan: every method with the first seed, then sync and diloco with each further seed.
plan=()
for method in "${first_methods[@]}"; do plan+=("$method $1"); done
for seed in "${@:2}"; do plan+=("sync $seed" "diloco $seed"); done

left() { echo $((budget - (SECONDS - started))); }
declare -A pid_of=() t0_of=() ranks_of=()
running_ranks() {
  local n=0 key
  for key in "${!ranks_of[@]}"; do n=$((n + ranks_of[$key])); done
  echo $n
}
# start METHOD SEED: launches one run (or its resumption) in a process group of its own.
start() {
  local method=$1 seed=$2 dir=$runs/$1/seed-$2 overrides
  overrides=$(settings "$method") || return 1
  # One thread a rank on a GPU (the host only launches kernels); on the CPU the cores are shared out.
  local threads=1
  [[ $device == cpu ]] && threads=$(($(nproc) / $(islands_of "$method")))
  ((threads >= 1)) || threads=1
  mkdir -p "$dir"
  touch "$dir/RUNNING"
  # shellcheck disable=SC2086  # $overrides is a list of options
  setsid "$atoll" launch examples/islands/gpu/quality.yaml --set run.dir="$dir" --set run.seed="$seed" \
    --set data.train="$corpus/train.bin" --set data.val="$corpus/val.bin" \
    --set data.tokenizer="$corpus/tokenizer.model" --set run.threads="$threads" "${common[@]}" $overrides \
    >>"$dir/launch.log" 2>&1 &
  pid_of["$method $seed"]=$!
  t0_of["$method $seed"]=$SECONDS
  ranks_of["$method $seed"]=$(islands_of "$method")
  echo "$method seed $seed: started ($(islands_of "$method") ranks; $(running_ranks) running) at $((SECONDS - started)) s"
}
# finish KEY: reaps a run that exited and reports it.
finish() {
  local key=$1 rc dir method seed
  read -r method seed <<<"$key"
  dir=$runs/$method/seed-$seed
  wait "${pid_of[$key]}"
  rc=$?
  local took=$((SECONDS - t0_of[$key]))
  unset "pid_of[$key]" "t0_of[$key]" "ranks_of[$key]"
  if ((rc != 0)); then
    echo "$method seed $seed: FAILED (exit $rc) after $took s; the end of $dir/launch.log:"
    tail -n 15 "$dir/launch.log" | sed 's/^/    /'
    return
  fi
  rm -f "$dir/RUNNING"
  echo "$took" >"$dir/DONE"
  echo "$method seed $seed: $(grep -E "step +$steps/$steps .*val loss" "$dir/launch.log" | tail -1 | sed 's/^ *//') ($took s)"
}
# preempt_all: SIGTERM to every run in flight (each commits a checkpoint), then reaps them.
preempt_all() {
  local key pid waited
  for key in "${!pid_of[@]}"; do kill -TERM "${pid_of[$key]}" 2>/dev/null; done
  for key in "${!pid_of[@]}"; do
    pid=${pid_of[$key]}
    waited=0
    while kill -0 "$pid" 2>/dev/null && ((waited < 25)); do sleep 1; waited=$((waited + 1)); done
    kill -0 "$pid" 2>/dev/null && kill -KILL -- "-$pid"
    wait "$pid"
    echo "$key: CUT OFF after $((SECONDS - t0_of[$key])) s (budget spent); run again to resume it"
    unset "pid_of[$key]" "t0_of[$key]" "ranks_of[$key]"
  done
}

next=0
while :; do
  for key in "${!pid_of[@]}"; do kill -0 "${pid_of[$key]}" 2>/dev/null || finish "$key"; done
  if (($(left) < 30)); then  # 30 s kept for the preemption's checkpoints and the tables
    preempt_all
    break
  fi
  # Start what fits, in the plan's order (a run that does not fit waits: the order is the priority).
  while ((next < ${#plan[@]})); do
    read -r method seed <<<"${plan[$next]}"
    if [[ -f $runs/$method/seed-$seed/DONE ]]; then
      echo "$method seed $seed: done earlier"
      next=$((next + 1))
      continue
    fi
    (($(running_ranks) == 0 || $(running_ranks) + $(islands_of "$method") <= max_ranks)) || break
    start "$method" "$seed" || exit 1
    next=$((next + 1))
  done
  ((next >= ${#plan[@]} && ${#pid_of[@]} == 0)) && break
  sleep 1
done

# The tables over every method's finished seeds (quality.py leaves out RUNNING ones), and the figures.
methods=()
for method in sync diloco diloco_default diloco_m2 streaming_m2 noloco sparseloco; do
  compgen -G "$runs/$method/seed-*/DONE" >/dev/null && methods+=("$method")
done
if [[ ${methods[0]:-} == sync ]]; then
  "$python" examples/islands/quality.py --targets issue55 "$runs" "${methods[@]}"
else
  echo "run.sh: no finished sync run yet: no table"
fi
"$python" examples/islands/gpu/figures.py "$runs" sync diloco diloco_default diloco_m2 streaming_m2 noloco sparseloco |
  tee "$runs/figures.md"
echo "run.sh: $((SECONDS - started)) s"
