#!/usr/bin/env bash
# TensorBoard itself reads Atoll's event files: a short 2-rank training run (two DiLoCo islands, with
# evaluations and checkpoints, so every kind of scalar is written), then tensorboard_readback.py checks with
# TensorBoard's own reader that every scalar of metrics.jsonl is in tb/ at the same step and value.
# Usage: tensorboard.sh ATOLL_BIN PYTHON (PYTHON: one with the tensorboard package, e.g. .venv/bin/python)
set -uo pipefail
atoll=$1
python=$2
here=$(dirname "$0")
source "$here/../cli/lib.sh"

make_corpus "$atoll" "$work/data"
cat >"$work/tb.yaml" <<YAML
run:        { dir: $work/run, seed: 7, threads: 1, mfu_peak_tflops: 1 }
model:      { vocab: 256, dim: 32, layers: 2, heads: 2, kv_heads: 2, ffn: 64, seq: 16 }
parallel:   { islands: 2, dp: 1 }
train:      { steps: 30, global_batch: 4, log_every: 5, eval_every: 10, eval_sequences: 4, sample_every: 15 }
optim:      { lr: 1.0e-3, min_lr: 1.0e-4, warmup: 5 }
data:       { train: $work/data/train.bin, val: $work/data/val.bin }
checkpoint: { every: 15 }
outer:      { algorithm: diloco, inner_steps: 5 }
YAML

timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS=1 \
  "$atoll" train "$work/tb.yaml" >"$work/train.log" 2>&1
[[ $? -eq 0 && -f $work/run/metrics.jsonl ]] && check ok "train: 30 steps on 2 ranks" || check fail "train" "$work/train.log"

"$python" "$here/tensorboard_readback.py" "$work/run" >"$work/readback.log" 2>&1
status=$?
cat "$work/readback.log"
[[ $status -eq 0 ]] && check ok "TensorBoard reads back metrics.jsonl" || check fail "TensorBoard readback (exit $status)"
finish
