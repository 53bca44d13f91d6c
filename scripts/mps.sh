# CUDA's multi-process service (MPS) for processes sharing one GPU: a daemon of the caller's own, its
# pipe and log under /tmp/atoll-mps (no setting of the card changes). Without it, processes sharing a
# GPU take turns on it one context at a time; under it their kernels run side by side. Sourced by
# scripts/gpu_check.sh and scripts/gpu_islands.sh.

# mps_daemon_start: starts the daemon and exports CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY
# for the processes started after it; returns 1, exporting nothing, where the machine has no
# nvidia-cuda-mps-control or the daemon does not start.
mps_daemon_start() {
  command -v nvidia-cuda-mps-control >/dev/null || return 1
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/atoll-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/atoll-mps/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && return 0
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  return 1
}

# mps_daemon_stop: stops the daemon mps_daemon_start started, if it did.
mps_daemon_stop() {
  [[ -n ${CUDA_MPS_PIPE_DIRECTORY:-} ]] || return 0
  echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
  sleep 1
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
