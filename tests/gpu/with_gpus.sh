#!/usr/bin/env bash
# with_gpus.sh NP COMMAND...: runs COMMAND where this node has at least NP GPUs (one per rank, as
# NCCL needs); elsewhere says why in one line and exits 77, which CTest reports as Skipped -- never
# as passed.
set -uo pipefail
need=$1
shift
have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if ((have == 0)); then
  echo "skipped: no GPU (nvidia-smi lists none)"
  exit 77
fi
if ((have < need)); then
  echo "skipped: needs $need GPUs (one per rank), this node has $have"
  exit 77
fi
exec "$@"
