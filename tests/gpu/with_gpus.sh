#!/usr/bin/env bash
# with_gpus.sh NP COMMAND...: runs COMMAND, a test of NP ranks on GPUs. Where the node has a GPU per
# rank, as it is; where it has fewer (one GPU machines), with the ranks sharing them: it exports
# ATOLL_TEST_SHARE_GPU=1 (the test binaries then give each rank a NCCL host id of its own and set
# run.share_gpu, so NCCL joins them over sockets) and says so in one line. Where the node has no GPU,
# or ATOLL_TEST_NO_SHARE=1 forbids sharing and it has too few, it says why in one line and exits 77,
# which CTest reports as Skipped -- never as passed.
set -uo pipefail
need=$1
shift
have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if ((have == 0)); then
  echo "skipped: no GPU (nvidia-smi lists none)"
  exit 77
fi
export ATOLL_TEST_SHARE_GPU=0
if ((have < need)); then
  if [[ ${ATOLL_TEST_NO_SHARE:-0} == 1 ]]; then
    echo "skipped: needs $need GPUs (one per rank), this node has $have and ATOLL_TEST_NO_SHARE=1"
    exit 77
  fi
  echo "with_gpus: $need ranks share this node's $have GPU(s): a NCCL host id per rank, NCCL over sockets"
  ATOLL_TEST_SHARE_GPU=1
fi
exec "$@"
