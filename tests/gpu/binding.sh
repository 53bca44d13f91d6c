#!/usr/bin/env bash
# Which GPU each rank takes, on a real GPU node, with a CUDA_VISIBLE_DEVICES set per rank (as a
# wrapper script or Slurm's --gpus-per-task sets it): each rank sees its list renumbered from 0, and
# the ranks tell each other by UUID what they see. Each rank's row of the rank table names the UUID
# of the GPU it bound, compared here with nvidia-smi's: the device index alone is cuda:0 on every
# rank whatever GPU it is.
#   - one GPU: two ranks each told CUDA_VISIBLE_DEVICES=0 see the same GPU. run.device auto asked
#     for GPUs (the variable names one), so it stops with one line (exit 2) instead of training on
#     the CPU; with run.share_gpu both train on cuda:0, both on GPU 0's UUID, and the start-up says
#     they share it.
#   - two or more GPUs: rank r told CUDA_VISIBLE_DEVICES=r trains on device 0 of what it sees, its
#     own GPU: rank 0 on GPU 0's UUID, rank 1 on GPU 1's, two different ones, with no sharing note.
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
export CUDA_DEVICE_ORDER=PCI_BUS_ID  # CUDA's indices as nvidia-smi's, which uuid_of reads
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
# bound NAME: each rank's device and the UUID of its GPU from the run's rank table ("cuda:0=GPU-...").
bound() { awk '/^rank  host/ { on = 1; next } on && NF == 9 { print $4 "=" $9 }' "$work/$1/ranks.txt" 2>/dev/null | paste -sd' '; }
uuid_of() { nvidia-smi --query-gpu=uuid --format=csv,noheader -i "$1" | tr -d ' '; }  # uuid_of INDEX

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
gpu0=$(uuid_of 0)
if [[ $status -eq 0 && $gpu0 == GPU-* && $(bound shared) == "cuda:0=$gpu0 cuda:0=$gpu0" ]] &&
   grep -q "run.share_gpu: 2 ranks on this node share 1 GPU" "$work/shared.log"; then
  check ok "with run.share_gpu both ranks train on cuda:0 of their one GPU, the same UUID ($gpu0)"
else
  check fail "two ranks sharing one GPU (exit $status, bound '$(bound shared)', GPU 0 $gpu0)" "$work/shared.log"
fi
if ((gpus >= 2)); then
  config own false
  run_two own "0;1"
  status=$?
  gpu1=$(uuid_of 1)
  if [[ $status -eq 0 && $gpu1 == GPU-* && $gpu1 != "$gpu0" && $(bound own) == "cuda:0=$gpu0 cuda:0=$gpu1" ]] &&
     ! grep -q "share" "$work/own.log"; then
    check ok "CUDA_VISIBLE_DEVICES=0 and =1: each rank trains on device 0 of what it sees, two different GPUs by UUID"
  else
    check fail "a GPU per rank through CUDA_VISIBLE_DEVICES (exit $status, bound '$(bound own)', GPUs 0 and 1: $gpu0 $gpu1)" "$work/own.log"
  fi
else
  echo "note: one GPU here; the case of a GPU per rank through CUDA_VISIBLE_DEVICES needs two"
fi
finish
