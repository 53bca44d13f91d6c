#!/usr/bin/env bash
# The islands quality experiment on a lent GPU machine (issue 41), one part per call:
#
#   bash scripts/gpu_islands.sh prepare          here (the CPU machine, with build/bin/atoll): the
#       subword corpus (an 8,192-piece SentencePiece model trained on the Python documentation, and
#       its token shards, as examples/pydocs/run_subword.sh makes them) into data/pydocs-sp8k and a
#       copy in .gpu-deps/pydocs-sp8k/ (git-ignored, 6 MB), which travels with `carry: [".gpu-deps"]`
#       beside scripts/gpu_deps.sh's 18 MB; then checks the carried whole against the 64 MiB limit.
#   bash scripts/gpu_islands.sh OUT_DIR [SEED...]   there (default SEED 1): builds `atoll` with
#       scripts/gpu_check.sh's own steps (ATOLL_GPU_CHECK_PARTS=build: the machine's lines, the
#       carried dependencies, the build against the machine's PyTorch and NCCL), or takes the binary
#       an earlier call on the same warm machine built from the same sources; puts the corpus in
#       place; runs examples/islands/gpu/run.sh SEED... (five methods per seed, resumable) inside
#       ISLANDS_GPU_S seconds in all (default 540: give the device call timeout_s 600); and writes
#       to OUT_DIR (at most 8 files, flat):
#         results.txt        date, device (nvidia-smi), build, the size, every run's figures, the
#                            quality table with issue 41's targets, the part's timings
#         quality.md, quality.svg, figures.md   the tables and the loss-against-tokens plot
#         runs.tar.gz        every run's metrics.jsonl, config.yaml, launch.log, DONE/RUNNING (no
#                            checkpoints): carry it back as .gpu-deps/islands-runs.tar.gz and a call on
#                            a fresh machine skips the runs it holds as finished
#         build-logs.tar.gz  gpu_check.sh's logs of the build (when this call built)
#         run.log            run.sh's output
#         islands-scale.svg  the gap against model size, the CPU points and this size's GPU points
#   ISLANDS_TINY=1 bash scripts/gpu_islands.sh OUT_DIR [SEED...]   the same here on the CPU with the
#       build that is here and the tiny size (a pipeline check: every method, 64 steps each).
# ISLANDS_SIZE (default m) and ISLANDS_METHODS pass through to run.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
corpus=data/pydocs-sp8k
carried=.gpu-deps/pydocs-sp8k

if [[ ${1:-} == prepare ]]; then
  set -e
  atoll=${ATOLL:-build/bin/atoll}
  [[ -x $atoll ]] || { echo "gpu_islands: no $atoll; build it first (bash scripts/build.sh atoll)" >&2; exit 1; }
  if [[ ! -s $corpus/train.bin ]]; then
    [[ -s data/pydocs/pydocs.txt ]] || bash examples/pydocs/prepare.sh data/pydocs "$atoll"
    mkdir -p "$corpus"
    "$atoll" tokenizer train --vocab 8192 --out "$corpus/tokenizer.model" data/pydocs/pydocs.txt
    "$atoll" data prepare --out "$corpus" --tokenizer "$corpus/tokenizer.model" data/pydocs/pydocs.txt
  fi
  mkdir -p "$carried"
  cp "$corpus/tokenizer.model" "$corpus/train.bin" "$corpus/val.bin" "$carried/"
  cp data/pydocs/SOURCE data/pydocs/COPYRIGHT "$carried/" 2>/dev/null || true
  (cd "$carried" && sha256sum tokenizer.model train.bin val.bin >SHA256SUMS)
  [[ -d .gpu-deps/pydocs ]] || echo "gpu_islands: note: no .gpu-deps/pydocs; run: bash scripts/gpu_deps.sh fetch"
  tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  deps=$(du -sb .gpu-deps | cut -f1)
  echo "gpu_islands: $carried holds $(du -sh "$carried" | cut -f1); .gpu-deps $((deps / 1048576)) MiB +" \
    "the working tree $((tree / 1048576)) MiB = $(((deps + tree) / 1048576)) MiB of the 64 MiB a call carries"
  (((deps + tree) < 60 * 1048576)) || { echo "gpu_islands: over 60 MiB: it would not travel" >&2; exit 1; }
  exit 0
fi

out=$(realpath -m "${1:-${OUT:-runs/gpu-islands}}")
shift || true
seeds=("$@")
((${#seeds[@]} > 0)) || seeds=(1)
mkdir -p "$out"
results=$out/results.txt
: >"$results"
budget=${ISLANDS_GPU_S:-540}
started=$SECONDS
note() { echo "$*" | tee -a "$results"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
note "islands experiment (issue 41), part: seeds ${seeds[*]}; date: $(date -u +%Y-%m-%dT%H:%MZ)"

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
  sources=$(find CMakeLists.txt cmake comm runtime parallel optim checkpoint launcher -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.txt' -o -name '*.cmake' -o -name '*.proto' -o -name '*.in' \) \
    2>/dev/null | sort | xargs sha1sum | sha1sum | cut -c1-16)
  if [[ -x $stash/atoll && $(cat "$stash/SOURCES" 2>/dev/null) == "$sources" && -s /tmp/atoll-gpu-deps/env.sh ]]; then
    note "build: taken from this machine's earlier call (sources $sources)"
  else
    t0=$SECONDS
    ATOLL_GPU_CHECK_PARTS=build ATOLL_GPU_CHECK_BINARIES=atoll ATOLL_GPU_CHECK_S=300 \
      bash scripts/gpu_check.sh "$out/build" >/dev/null 2>&1
    sed 's/^/  /' "$out/build/results.txt" >>"$results"
    mv "$out/build/logs.tar.gz" "$out/build-logs.tar.gz" 2>/dev/null
    rm -rf "$out/build"
    [[ -x build/bin/atoll ]] || { note "build: FAILED; see build-logs.tar.gz"; exit 1; }
    mkdir -p "$stash" && cp build/bin/atoll "$stash/atoll" && echo "$sources" >"$stash/SOURCES"
    note "build: $((SECONDS - t0)) s (sources $sources)"
  fi
  # shellcheck disable=SC1091  # written by gpu_deps.sh unpack (inside gpu_check.sh)
  source /tmp/atoll-gpu-deps/env.sh
  atoll=$stash/atoll
fi
export ATOLL=$atoll

# The corpus: the carried one (made here by `prepare`), or made there from the carried text.
if [[ ! -s $corpus/train.bin ]]; then
  mkdir -p "$corpus"
  if [[ -s $carried/train.bin ]]; then
    cp "$carried"/{tokenizer.model,train.bin,val.bin} "$corpus/"
  elif [[ -s .gpu-deps/pydocs/pydocs.txt.gz ]]; then
    note "corpus: no $carried; training the tokenizer here (its pieces may differ from the CPU machine's)"
    mkdir -p data/pydocs && gzip -dc .gpu-deps/pydocs/pydocs.txt.gz >data/pydocs/pydocs.txt
    "$atoll" tokenizer train --vocab 8192 --out "$corpus/tokenizer.model" data/pydocs/pydocs.txt >/dev/null &&
      "$atoll" data prepare --out "$corpus" --tokenizer "$corpus/tokenizer.model" data/pydocs/pydocs.txt >/dev/null
  fi
fi
[[ -s $corpus/train.bin ]] || { note "corpus: none; run here first: bash scripts/gpu_islands.sh prepare"; exit 1; }
note "corpus: $corpus, train.bin sha256 $(sha256sum "$corpus/train.bin" | cut -c1-16)"

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

size=${ISLANDS_SIZE:-m}
t0=$SECONDS
ISLANDS_BUDGET_S=$((budget - (SECONDS - started) - 25)) ISLANDS_RUNS=$runs \
  bash examples/islands/gpu/run.sh "${seeds[@]}" >"$out/run.log" 2>&1
note "runs: $((SECONDS - t0)) s"
grep -E "^(sync|diloco|sparseloco|diloco_m2|streaming) seed|^run.sh" "$out/run.log" | sed 's/^/  /' | tee -a "$results"
for f in quality.md quality.svg figures.md; do [[ -f $runs/$size/$f ]] && cp "$runs/$size/$f" "$out/"; done
# The gap against model size: issue 20's CPU points beside this size's GPU points (when it has any).
python3 examples/islands/scale.py "$out/islands-scale.svg" --gpu "$runs/$size" >>"$out/run.log" 2>&1 ||
  python3 examples/islands/scale.py "$out/islands-scale.svg" >>"$out/run.log" 2>&1
{
  echo
  [[ -f $out/figures.md ]] && cat "$out/figures.md"
  echo
  [[ -f $out/quality.md ]] && cat "$out/quality.md"
} >>"$results"
tar -czf "$out/runs.tar.gz" -C "$runs" --exclude=checkpoints --exclude=tb --exclude=flight . 2>/dev/null
note "part: $((SECONDS - started)) s in all"
