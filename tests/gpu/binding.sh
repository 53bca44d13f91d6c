#!/usr/bin/env bash
# Which GPU each rank takes, on a real GPU node, with a CUDA_VISIBLE_DEVICES set per rank (as a
# wrapper script or Slurm's --gpus-per-task sets it): each rank sees its list renumbered from 0, and
# the ranks tell each other by UUID what they see.
#   - one GPU: two ranks each told CUDA_VISIBLE_DEVICES=0 see the same GPU. run.device auto asked
#     for GPUs (the variable names one), so it stops with one line (exit 2) instead of training on
#     the CPU; with run.share_gpu both train on cuda:0, and the start-up says they share it.
#   - two or more GPUs: rank r told CUDA_VISIBLE_DEVICES=r trains on device 0 of what it sees, its
#     own GPU, with no sharing note.
# Usage: binding.sh ATOLL_BIN (through with_gpus.sh 1: a node with at least one GPU)
set -uo pipefail
atoll=$1
source "$(dirname "$0")/../cli/lib.sh"
make_corpus "$atoll" "$work/data"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
# per_rank.sh VALUE_OF_RANK...: runs the rank with CUDA_VISIBLE_DEVICES from the list, by local rank.
cat >"$work/per_rank.sh" <<'SH'
#!/usr/bin/env bash
lists=(${ATOLL_TEST_VISIBLE//;/ })
export CUDA_VISIBLE_DEVICES=${lists[$OMPI_COMM_WORLD_LOCAL_RANK]}
exec "$@"
SH
chmod +x "$work/per_rank.sh"
config() {  # config NAME SHARE
  cat >"$work/$1.yaml" <<YAML
run:      { dir: $work/$1, seed: 3, threads: 1, device: auto, share_gpu: $2, mfu_peak_tflops: 1 }
model:    { vocab: 256, dim: 64, layers: 2, heads: 4, kv_heads: 2, ffn: 128, seq: 32 }
parallel: { dp: 2 }
train:    { steps: 4, global_batch: 4, log_every: 1, eval_every: 0 }
data:     { train: $work/data/train.bin, val: $work/data/val.bin }
YAML
}
run_two() {  # run_two NAME LISTS: 2 ranks, rank r with the r-th of LISTS (';'-separated)
  ATOLL_TEST_VISIBLE=$2 timeout 120 mpirun --oversubscribe -np 2 -x ATOLL_TEST_VISIBLE \
    "$work/per_rank.sh" "$atoll" train "$work/$1.yaml" >"$work/$1.log" 2>&1
}
devices() { awk '/^rank  host/ { on = 1; next } on && NF == 8 { print $4 }' "$work/$1/ranks.txt" 2>/dev/null | paste -sd' '; }

config same false
run_two same "0;0"
status=$?
if [[ $status -eq $EXIT_BAD_INPUT ]] &&
   grep -q "run.device = auto and the job asked for GPUs (CUDA_VISIBLE_DEVICES=0), but 2 ranks on this node share 1 GPU" "$work/same.log"; then
  check ok "CUDA_VISIBLE_DEVICES=0 for both ranks: one GPU seen twice under auto is refused in one line (exit 2), not trained on the CPU"
else
  check fail "two ranks on one GPU under auto (exit $status)" "$work/same.log"
fi
config shared true
run_two shared "0;0"
status=$?
if [[ $status -eq 0 && $(devices shared) == "cuda:0 cuda:0" ]] && grep -q "run.share_gpu: 2 ranks on this node share 1 GPU" "$work/shared.log"; then
  check ok "with run.share_gpu both ranks train on cuda:0 of their one GPU"
else
  check fail "two ranks sharing one GPU (exit $status, devices '$(devices shared)')" "$work/shared.log"
fi
if ((gpus >= 2)); then
  config own false
  run_two own "0;1"
  status=$?
  if [[ $status -eq 0 && $(devices own) == "cuda:0 cuda:0" ]] && ! grep -q "share" "$work/own.log"; then
    check ok "CUDA_VISIBLE_DEVICES=0 and =1: each rank trains on device 0 of what it sees, its own GPU"
  else
    check fail "a GPU per rank through CUDA_VISIBLE_DEVICES (exit $status, devices '$(devices own)')" "$work/own.log"
  fi
else
  echo "note: one GPU here; the case of a GPU per rank through CUDA_VISIBLE_DEVICES needs two"
fi
finish
