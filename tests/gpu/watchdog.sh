#!/usr/bin/env bash
# A hung rank on GPUs: rank 1 of 2 skips the collectives of step 4 while rank 0's NCCL operations
# wait on the device. The watchdog, polling the NCCL planes, sees the operation exceed
# comm.timeout_s = 3, aborts the communicators and the job: exit 4, both ranks' flight records
# dumped, rank 1 named as the one behind. The MFU peak is given (run.mfu_peak_tflops): the start-up
# matmul probe, on a GPU the other tests share, could itself keep rank 1 waiting past 3 s.
# Usage: watchdog.sh ATOLL_BIN (run through with_gpus.sh 2)
set -uo pipefail
atoll=$1
source "$(dirname "$0")/../cli/lib.sh"
make_corpus "$atoll" "$work/data"
# On a one-GPU node with_gpus.sh asks the two ranks to share it.
share_gpu=false
[[ ${ATOLL_TEST_SHARE_GPU:-0} == 1 ]] && share_gpu=true
cat >"$work/hang.yaml" <<YAML
run:      { dir: $work/hang, seed: 3, threads: 1, device: cuda, share_gpu: $share_gpu, mfu_peak_tflops: 1 }
model:    { vocab: 256, dim: 64, layers: 2, heads: 4, kv_heads: 2, ffn: 128, seq: 32 }
parallel: { dp: 2 }
train:    { steps: 20, global_batch: 4, log_every: 1, eval_every: 0 }
comm:     { timeout_s: 3 }
data:     { train: $work/data/train.bin, val: $work/data/val.bin }
YAML
ATOLL_FAULT=skip_collective@1:4 timeout 60 mpirun --oversubscribe -np 2 -x ATOLL_FAULT "$atoll" train "$work/hang.yaml" \
  >"$work/hang.log" 2>&1
status=$?
dumps=$(ls "$work/hang/flight" 2>/dev/null | grep -c '^rank-[01].json$')
if [[ $status -eq $EXIT_HANG && $dumps -eq 2 ]] && grep -q "rank 1 is behind: it issued" "$work/hang.log"; then
  check ok "watchdog on GPUs: exit 4, 2 dumps, rank 1 named"
else
  check fail "watchdog on GPUs (exit $status, $dumps dumps)" "$work/hang.log"
fi
finish
