#!/usr/bin/env bash
# The islands quality experiment on a lent GPU machine (issue 55), one call:
#
#   bash scripts/gpu_islands.sh prepare          here (the CPU machine): the corpus (data/debdocs, made
#       by examples/debdocs/prepare.sh when missing) xz-compressed into .gpu-deps/debdocs/ (git-ignored),
#       which travels with `carry: [".gpu-deps"]` beside scripts/gpu_deps.sh's build dependencies;
#       then checks the carried whole against the 64 MiB a call takes.
#   bash scripts/gpu_islands.sh OUT_DIR [SEED...]   there (default SEEDs 1 2): builds `atoll` with
#       scripts/gpu_check.sh's own steps (ATOLL_GPU_CHECK_PARTS=build: the machine's lines, the
#       carried dependencies, the build against the machine's PyTorch and NCCL), or takes the binary
#       an earlier call on the same warm machine built from the same sources; puts the corpus in
#       place; starts CUDA MPS (a daemon of this script's own, so that several runs' kernels share the
#       GPU side by side; ISLANDS_MPS=0: without); runs examples/islands/gpu/run.sh SEED... (every
#       method, resumable) inside ISLANDS_GPU_S seconds in all (default 540: give the device call
#       timeout_s 600); and writes to OUT_DIR (at most 8 files, flat):
#         results.txt        date, device (nvidia-smi), build, the size, every run's figures, the
#                            quality table with issue 55's targets, the part's timings, GPU use
#         quality.md, quality.svg, figures.md   the tables and the loss-against-tokens plot
#         runs.tar.gz        every run's metrics.jsonl, config.yaml, launch.log, DONE/RUNNING (no
#                            checkpoints): carry it back as .gpu-deps/islands-runs.tar.gz and a call on
#                            a fresh machine skips the runs it holds as finished
#         build-logs.tar.gz  gpu_check.sh's logs of the build (when this call built)
#         run.log            run.sh's output
#   ISLANDS_TINY=1 bash scripts/gpu_islands.sh OUT_DIR [SEED...]   the same here on the CPU with the
#       build that is here and the tiny size (a pipeline check: every method, 60 steps each).
# ISLANDS_SIZE (default m10), ISLANDS_METHODS, ISLANDS_RANKS and ISLANDS_H pass through to run.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
corpus=data/debdocs
carried=.gpu-deps/debdocs

if [[ ${1:-} == prepare ]]; then
  set -e
  [[ -s $corpus/train.bin ]] || bash examples/debdocs/prepare.sh "$corpus"
  mkdir -p "$carried"
  for f in train.bin val.bin; do
    [[ $carried/$f.xz -nt $corpus/$f ]] || xz -9 -T2 -c "$corpus/$f" >"$carried/$f.xz"
  done
  cp "$corpus/tokenizer.model" "$corpus/MANIFEST.txt" "$corpus/SOURCES.txt" "$carried/"
  (cd "$corpus" && sha256sum tokenizer.model train.bin val.bin) >"$carried/SHA256SUMS"
  [[ -d .gpu-deps/pydocs ]] || echo "gpu_islands: note: no .gpu-deps/pydocs; run: bash scripts/gpu_deps.sh fetch"
  tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  deps=$(du -sb .gpu-deps | cut -f1)
  echo "gpu_islands: $carried holds $(du -sh "$carried" | cut -f1); .gpu-deps $((deps / 1048576)) MiB +" \
    "the working tree $((tree / 1048576)) MiB = $(((deps + tree) / 1048576)) MiB of the 64 MiB a call carries"
  (((deps + tree) < 63 * 1048576)) || { echo "gpu_islands: over 63 MiB: it would not travel" >&2; exit 1; }
  exit 0
fi

out=$(realpath -m "${1:-${OUT:-runs/gpu-islands}}")
shift || true
seeds=("$@")
((${#seeds[@]} > 0)) || seeds=(1 2)
mkdir -p "$out"
results=$out/results.txt
: >"$results"
budget=${ISLANDS_GPU_S:-540}
started=$SECONDS
note() { echo "$*" | tee -a "$results"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
note "islands experiment (issue 55), seeds ${seeds[*]}; date: $(date -u +%Y-%m-%dT%H:%MZ)"

if [[ ${ISLANDS_TINY:-0} == 1 ]]; then
  export ISLANDS_SIZE=tiny ISLANDS_DEVICE=cpu
  note "device: the CPU ($(nproc) cores), tiny size: a check of the pipeline, not a measurement"
  atoll=build/bin/atoll
else
  export ISLANDS_DEVICE=cuda
  # The same settings gpu_check.sh makes for its own runs: Open MPI's shared memory and TCP, no UCX.
  export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no
  note "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
  # The copied tree is newer than any earlier build, so ninja would rebuild it all (~140 s): a warm
  # machine's earlier call leaves its binary in /tmp with the hash of the sources it was built from.
  stash=/tmp/atoll-islands-bin
  # Every file the atoll binary is built from: each room's sources, the CUDA kernels, the build files.
  sources=$(find CMakeLists.txt cmake text comm runtime parallel optim checkpoint launcher -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.txt' -o -name '*.cmake' -o -name '*.proto' -o -name '*.in' \) \
    2>/dev/null | sort | xargs sha1sum | sha1sum | cut -c1-16)
  if [[ -x $stash/atoll && -x $stash/atoll-supervise && $(cat "$stash/SOURCES" 2>/dev/null) == "$sources" && -s /tmp/atoll-gpu-deps/env.sh ]]; then
    note "build: taken from this machine's earlier call (sources $sources)"
  else
    t0=$SECONDS
    ATOLL_GPU_CHECK_PARTS=build ATOLL_GPU_CHECK_BINARIES=atoll ATOLL_GPU_CHECK_S=300 \
      bash scripts/gpu_check.sh "$out/build" >/dev/null 2>&1
    sed 's/^/  /' "$out/build/results.txt" >>"$results"
    mv "$out/build/logs.tar.gz" "$out/build-logs.tar.gz" 2>/dev/null
    rm -rf "$out/build"
    [[ -x build/bin/atoll ]] || { note "build: FAILED; see build-logs.tar.gz"; exit 1; }
    mkdir -p "$stash" && cp build/bin/atoll build/bin/atoll-supervise "$stash/" && echo "$sources" >"$stash/SOURCES"
    note "build: $((SECONDS - t0)) s (sources $sources)"
  fi
  # shellcheck disable=SC1091  # written by gpu_deps.sh unpack (inside gpu_check.sh)
  source /tmp/atoll-gpu-deps/env.sh
  atoll=$stash/atoll
fi
export ATOLL=$atoll

# The corpus: the carried one (made here by `prepare`), checked against the sums made here.
if [[ ! -s $corpus/train.bin ]]; then
  mkdir -p "$corpus"
  for f in train.bin val.bin; do [[ -s $carried/$f.xz ]] && xz -dc "$carried/$f.xz" >"$corpus/$f"; done
  cp "$carried/tokenizer.model" "$corpus/" 2>/dev/null
  (cd "$corpus" && sha256sum -c --quiet "../../$carried/SHA256SUMS") ||
    { note "corpus: the carried shards do not match SHA256SUMS; run here: bash scripts/gpu_islands.sh prepare"; exit 1; }
fi
[[ -s $corpus/train.bin ]] || { note "corpus: none; run here first: bash scripts/gpu_islands.sh prepare"; exit 1; }
note "corpus: $corpus, train.bin sha256 $(sha256sum "$corpus/train.bin" | cut -c1-16), $(grep -m1 -i "tokens" "$carried/MANIFEST.txt" 2>/dev/null || true)"

# Finished runs of an earlier call on another machine (its runs.tar.gz, carried back): kept, skipped.
runs=runs/islands-gpu
if [[ -s .gpu-deps/islands-runs.tar.gz ]]; then
  mkdir -p "$runs"
  tar -xzf .gpu-deps/islands-runs.tar.gz -C "$runs" --skip-old-files
  # Unfinished ones came without checkpoints: they start again (one cut off on this warm machine
  # keeps its checkpoints and resumes).
  while IFS= read -r marker; do
    [[ -f $(dirname "$marker")/checkpoints/LATEST ]] || rm -rf "$(dirname "$marker")"
  done < <(find "$runs" -name RUNNING)
  note "earlier runs: $(find "$runs" -name DONE | wc -l) finished runs taken from .gpu-deps/islands-runs.tar.gz"
fi

# CUDA's multi-process service: the runs' kernels side by side on the GPU (scripts/mps.sh; the
# daemon stops at the end).
if [[ ${ISLANDS_TINY:-0} != 1 && ${ISLANDS_MPS:-1} == 1 ]]; then
  # shellcheck source=scripts/mps.sh
  source scripts/mps.sh
  if mps_daemon_start; then
    note "mps: on"
    trap mps_daemon_stop EXIT
  else
    note "mps: could not start; the runs take turns on the GPU"
  fi
fi
# GPU use while the runs go: utilisation and memory every 10 s, into the run log's folder.
if [[ ${ISLANDS_TINY:-0} != 1 ]]; then
  nvidia-smi --query-gpu=utilization.gpu,memory.used,power.draw --format=csv,noheader -l 10 >"$out/gpu-use.log" 2>&1 &
  smi=$!
fi
size=${ISLANDS_SIZE:-m10}
t0=$SECONDS
ISLANDS_BUDGET_S=$((budget - (SECONDS - started) - 25)) ISLANDS_RUNS=$runs \
  bash examples/islands/gpu/run.sh "${seeds[@]}" >"$out/run.log" 2>&1
note "runs: $((SECONDS - t0)) s"
[[ -n ${smi:-} ]] && kill "$smi" 2>/dev/null
[[ -s $out/gpu-use.log ]] && note "gpu use (utilisation %, memory, power every 10 s): $(cut -d, -f1 "$out/gpu-use.log" | tr -d ' %' | tr '\n' ' ')" && rm -f "$out/gpu-use.log"
grep -E "^[a-z_0-9]+ seed [0-9]+: |^run.sh" "$out/run.log" | sed 's/^/  /' | tee -a "$results"
for f in quality.md quality.svg figures.md; do [[ -f $runs/$size/$f ]] && cp "$runs/$size/$f" "$out/"; done
{
  echo
  [[ -f $out/figures.md ]] && cat "$out/figures.md"
  echo
  [[ -f $out/quality.md ]] && cat "$out/quality.md"
} >>"$results"
tar -czf "$out/runs.tar.gz" -C "$runs" --exclude=checkpoints --exclude=tb --exclude=flight . 2>/dev/null
note "part: $((SECONDS - started)) s in all"
