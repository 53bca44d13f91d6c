#!/usr/bin/env bash
# The test command: installs dependencies, builds, and runs the whole suite (unit tests and
# multi-rank tests under mpirun) through CTest, ATOLL_TEST_JOBS (default 2) entries at a time, then
# fuzzes every file reader for ATOLL_FUZZ_SECONDS (default 20) each and runs the unit tests under
# ASan + UBSan (their clang build compiles beside CTest).
#   bash scripts/test.sh [CTEST_ARGS...]   the whole suite (CI's command); CTEST_ARGS narrow CTest
#                                          and then skip the sanitizer steps
#   bash scripts/test.sh --quick           the edit-test loop: the build, the unit tests and one
#                                          multi-rank test per capability (DP/TP, PP, ZeRO, bf16,
#                                          recomputation, checkpoints, islands, the command end to
#                                          end), in about 3 minutes after a build
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [[ ${1:-} == --quick ]]; then
  quick=1
  shift
fi
# Each phase's wall time, so that a slow run says where its time went.
phase_start=$SECONDS
phase_done() { echo "test.sh: $1 took $((SECONDS - phase_start)) s (total $SECONDS s)"; phase_start=$SECONDS; }
bash scripts/install-deps.sh
phase_done "install-deps"
# The CUDA path must compile and link on every run, GPU or not: ON fails the configure without it.
ATOLL_CMAKE_ARGS="-DATOLL_WITH_CUDA=ON ${ATOLL_CMAKE_ARGS:-}" bash scripts/build.sh
phase_done "the release build"
export OMP_NUM_THREADS=1
cd build
if ((quick)); then
  ctest --output-on-failure --timeout 900 -j "${ATOLL_TEST_JOBS:-2}" -R '^(unit|test_layout_parity_np2|test_pipeline_parity_np2|test_zero_parity_np2|test_mixed_precision_np2|test_recompute_np2|test_checkpoint_np2|test_islands_np2|cli_runs|fuzz_replay_.*)$' "$@"
  phase_done "CTest, the quick selection"
  exit 0
fi
# While CTest runs, the sanitizer build the steps after it need (the fuzz targets, the unit tests and
# the replays under ASan + UBSan) compiles at the lowest CPU priority: the CLI tests spend much of
# their time waiting (on launches, deadlines, links), which leaves about a third of the two cores
# idle, and at nice 19 the build gets ~1/70 of the CPU a test's process gets (it still slows CTest
# some, through the caches, memory and disk it shares: 658 s against 496 s alone on a built tree, but
# saves ~250 s after it). Its own session, so that an exit kills the whole build with it; a session
# is also its own scheduling group where the kernel groups by session (sched_autogroup), which
# weighs groups by the group's nice value alone, so that is set to 19 too (left at 0, CTest took
# 741 s).
prebuild=""
if (($# == 0)); then
  setsid bash -c 'renice -n 19 -p $$ >/dev/null; { echo 19 >/proc/self/autogroup; } 2>/dev/null
    cd .. && source scripts/sanitizer_build.sh &&
    configure_sanitizer_build address &&
    cmake --build build-asan -j "${ATOLL_BUILD_JOBS:-2}" --target fuzz_targets "${sanitizer_unit_targets[@]}"' \
    >sanitizer-prebuild.log 2>&1 &
  prebuild=$!
  trap 'kill -- -$prebuild 2>/dev/null || true' EXIT
fi
# -j: tests of one process (the CLI scenarios) run two at a time; a multi-rank test (PROCESSORS = its
# ranks) runs alone.
ctest --output-on-failure --timeout 900 -j "${ATOLL_TEST_JOBS:-2}" -LE gpu "$@"
phase_done "CTest"
if [[ -n $prebuild ]]; then
  wait "$prebuild" || echo "test.sh: the sanitizer build beside CTest failed (build/sanitizer-prebuild.log);" \
    "the steps below build again and stop on its error"
  trap - EXIT
  phase_done "the rest of the sanitizer build begun beside CTest"
fi
cd ..
# The sanitizers, from one clang build (build-asan/, scripts/sanitizer_build.sh): every reader
# fuzzed briefly under ASan + UBSan (tests/fuzz/run.sh), beyond the replays of its seeds and
# regression inputs above, then the unit tests and those replays under ASan + UBSan
# (scripts/sanitize.sh unit; the multi-rank tests and TSan are `sanitize.sh address` / `thread`).
# Skipped when ctest was given arguments (a partial run); ATOLL_FUZZ_SECONDS=0 skips the fuzzing.
if (($# == 0)); then
  fuzz_seconds=${ATOLL_FUZZ_SECONDS:-20}
  ((fuzz_seconds == 0)) || bash tests/fuzz/run.sh "$fuzz_seconds"
  phase_done "fuzzing (its build included)"
  bash scripts/sanitize.sh unit
  phase_done "the unit tests under ASan + UBSan (their build included)"
fi
cd build
# The GPU suite (label gpu) runs where this node has a GPU; each of its tests also checks that there
# are enough GPUs for its ranks and otherwise exits 77 (CTest: Skipped, never passed). On a node
# without a GPU the suite is not started at all, and this says so.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
registered=$(ctest -N -L gpu | sed -n 's/^Total Tests: //p')
if ((gpus == 0)); then
  echo "test.sh: GPU suite not run: no GPU on this node (nvidia-smi lists none); its ${registered:-0}" \
    "tests run with \`ctest -L gpu\` in build/ on a GPU node"
  exit 0
fi
ctest --output-on-failure --timeout 900 -L gpu "$@" | tee gpu-tests.log
skipped=$(grep -c '(Skipped)$' gpu-tests.log || true)
total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' gpu-tests.log)
echo "test.sh: GPU suite: $((${total:-0} - skipped)) of ${total:-0} tests ran on $gpus GPU(s)," \
  "$skipped skipped (not passed; \`ctest -L gpu -V\` in build/ says why)"
