#!/usr/bin/env bash
# The low-communication quality experiment (issue 20): every method trains the same small Llama
# (quality.yaml: 0.13M parameters, 20 tokens per parameter, one warmup + cosine schedule, 8
# sequences per island per step) on the same tokens, three seeds each, in one MPI world:
#   sync        synchronous data parallelism over 4 islands (the baseline)
#   lookahead   DiLoCo with one island (dp = 4): the Lookahead optimizer, the control
#   diloco_m2   DiLoCo, 2 islands of dp = 2
#   diloco      DiLoCo, 4 islands
#   streaming   Streaming DiLoCo, 4 islands, 2 fragments
#   sparseloco  DiLoCo with a top-k exchange and error feedback, 4 islands
#   noloco      NoLoCo, 4 islands in pairs
# all at H = 16 (40 outer steps) with the outer step the sweep (sweep.sh) chose; int4 exchange for
# the dense ones (no loss against fp32 in the sweep's runs, 7.5x fewer bytes); then the same at a
# second model size (0.27M parameters, one seed) for sync, diloco and sparseloco, to see how the
# gap moves with size. Tables: runs/islands-quality/{small,large}/quality.md (quality.py).
# About 30 minutes on 2 cores. Usage: bash examples/islands/run.sh [--set key=value]...
source "$(dirname "$0")/../setup.sh"
out=runs/islands-quality
extra=("$@")

# method SIZE NAME SEEDS OVERRIDES...: one run per seed in $out/SIZE/NAME/seed-S.
method() {
  local size=$1 name=$2 seeds=$3 seed
  shift 3
  for seed in $(seq 1 "$seeds"); do
    local dir=$out/$size/$name/seed-$seed
    rm -rf "$dir"
    build/bin/atoll launch examples/islands/quality.yaml --set run.dir="$dir" --set run.seed="$seed" \
      "${size_overrides[@]}" "$@" "${extra[@]}" | grep -E 'val loss|error' | tail -1 | sed "s|^|$size $name seed $seed: |" || true
  done
}
one_island=(--set parallel.islands=1 --set parallel.dp=4)
two_islands=(--set parallel.islands=2 --set parallel.dp=2)
# 8 of every 256 elements (3.1%), values in 4 bits; outer lr 2 (with top-k of 4 islands most
# entries come from one island and the mean divides them by 4; lr 2 beat 1 at k = 16).
sparse=(--set outer.topk=8 --set outer.compression=int4 --set outer.lr=2)

size_overrides=()
method small sync 3 --set outer.algorithm=none
method small lookahead 3 "${one_island[@]}"
# The sweep's best for M = 2 (Nesterov 0.5, lr 0.6); M = 1 and 4 take the default (lr 1, no momentum).
method small diloco_m2 3 "${two_islands[@]}" --set outer.compression=int4 --set outer.lr=0.6 --set outer.momentum=0.5
method small diloco 3 --set outer.compression=int4
method small streaming 3 --set outer.algorithm=streaming_diloco --set outer.fragments=2 --set outer.delay=1 \
  --set outer.compression=int4
method small sparseloco 3 "${sparse[@]}"
method small noloco 3 --set outer.algorithm=noloco

# Twice the parameters, still about 20 tokens per parameter: 1312 steps (82 rounds of 16).
size_overrides=(--set model.dim=96 --set model.ffn=256 --set train.steps=1312 --set train.eval_every=328)
method large sync 1 --set outer.algorithm=none
method large diloco 1 --set outer.compression=int4
method large sparseloco 1 "${sparse[@]}"

.venv/bin/python examples/islands/quality.py "$out/small" sync lookahead diloco_m2 diloco streaming sparseloco noloco
echo
.venv/bin/python examples/islands/quality.py "$out/large" sync diloco sparseloco
