#!/usr/bin/env bash
# Atoll's tests under the sanitizers (see the README's Reliability section).
#   bash scripts/sanitize.sh address [CTEST_ARGS...]
#       AddressSanitizer + UndefinedBehaviorSanitizer over the whole CPU suite: unit tests, the
#       multi-rank tests under mpirun, the CLI and island-job scripts, interop, the fuzz replays.
#       The developer's check before landing.
#   bash scripts/sanitize.sh unit [CTEST_ARGS...]
#       The same over the unit tests and the fuzz replays only: what scripts/test.sh runs every time.
#   bash scripts/sanitize.sh thread [CTEST_ARGS...]
#       ThreadSanitizer over the tests of the threaded parts: the async checkpoint saver, the
#       watchdog, the pipeline's background MPI progress, the delayed outer exchange, the island
#       lease's heartbeat, the data preparation pool.
# The clang builds are scripts/sanitizer_build.sh's: build-asan/ for address and unit (shared with
# the fuzz targets), build-tsan/ for thread. Every report is also written to build-*/reports/ (log_path),
# and the run fails if any was written: a report in a process whose failure a test expects (a rank
# killed on purpose, an exit 2 on bad input) still counts. CTEST_ARGS narrow the run, e.g. -R unit.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true
source scripts/sanitizer_build.sh
select=(-LE gpu)  # address: the whole CPU suite
build_targets=()
case $mode in
  address) ;;
  unit)
    select=(-R '^(unit|fuzz_replay_.*)$')
    build_targets=("${sanitizer_unit_targets[@]}")
    ;;
  thread)
    # The tests that run Atoll's threads: unit (the data preparation pool, the flight recorder,
    # the outer optimizers' delayed exchange), checkpoints (async saver, and the watchdog in every
    # trainer run), pipeline parity (background progress), islands in one world (delayed exchange)
    # and as processes (lease heartbeat, Gloo), and cli_operations* (the watchdog catching a hang).
    select=(-R '^(unit|test_checkpoint_np2|test_pipeline_parity_np2|test_islands_np2|test_island_lease|test_gloo_communicator|test_island_rendezvous|cli_operations.*)$')
    build_targets=(--target atoll --target atoll_unit_tests --target test_checkpoint --target test_pipeline_parity
      --target test_islands --target test_island_lease --target test_gloo_communicator --target test_island_rendezvous)
    ;;
  *)
    echo "sanitize.sh: the mode must be 'address', 'unit' or 'thread', not '$mode'; e.g. bash scripts/sanitize.sh address" >&2
    exit 2
    ;;
esac
build_mode=$mode
[[ $mode == unit ]] && build_mode=address
dir=$(sanitizer_build_dir "$build_mode")
bash scripts/install-deps.sh
configure_sanitizer_build "$build_mode"
cmake --build "$dir" -j "${ATOLL_BUILD_JOBS:-2}" "${build_targets[@]}"

reports=$PWD/$dir/reports
rm -rf "$reports"
mkdir -p "$reports"
export_sanitizer_options "$reports"
status=0
(cd "$dir" && ctest --output-on-failure --timeout 1800 "${select[@]}" "$@") || status=$?
found=$(find "$reports" -type f | sort)
if [[ -n $found ]]; then
  for report in $found; do
    echo "=== $report"
    head -n 80 "$report"
  done
  echo "sanitize.sh: $(wc -l <<<"$found") sanitizer report(s) in $reports (above)" >&2
  exit 1
fi
((status == 0)) || { echo "sanitize.sh: tests failed under $mode sanitizers (no report written)" >&2; exit "$status"; }
echo "sanitize.sh: $mode: every selected test passed, no sanitizer report"
