#!/usr/bin/env bash
# Fuzzes every reader of a file Atoll is handed (tests/fuzz/fuzz_*.cpp) with libFuzzer, under
# AddressSanitizer + UndefinedBehaviorSanitizer.
#   bash tests/fuzz/run.sh [SECONDS] [TARGET...]     (default: 20 s per target, every target)
# Builds the targets in build-asan/ with clang (scripts/sanitizer_build.sh: Atoll's code instrumented;
# LibTorch and the system libraries not; scripts/sanitize.sh address runs the suite from the same
# build), then runs them ATOLL_FUZZ_JOBS (default 2) at a time, each for SECONDS over a working copy
# of its corpus (build-asan/corpus/NAME, kept between runs) seeded from tests/fuzz/corpus/NAME and
# tests/fuzz/regressions/NAME. A finding is any crash, sanitizer report, uncaught or undocumented
# exception (fuzz_input.h), input slower than 10 s, or single allocation over 512 MiB (no input here
# is more than a few hundred KiB, so nothing a reader allocates from it should come near that); its
# input is kept in build-asan/findings/NAME/. Prints executions and coverage per target; exits 1 if
# any target found something.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-20}
shift || true
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "run.sh: SECONDS must be a whole number >= 1, not '$seconds'; e.g. bash tests/fuzz/run.sh 600" >&2
  exit 2
fi
targets=("$@")
if ((${#targets[@]} == 0)); then
  for source in tests/fuzz/fuzz_*.cpp; do
    name=$(basename "$source" .cpp)
    [[ $name == fuzz_input ]] || targets+=("${name#fuzz_}")
  done
fi
for name in "${targets[@]}"; do
  [[ -f tests/fuzz/fuzz_$name.cpp ]] || { echo "run.sh: no fuzz target '$name' (tests/fuzz/fuzz_$name.cpp)" >&2; exit 2; }
done

bash scripts/install-deps.sh
source scripts/sanitizer_build.sh
build=$(sanitizer_build_dir address)
configure_sanitizer_build address
build_targets=()
for name in "${targets[@]}"; do build_targets+=(--target "fuzz_$name"); done
cmake --build "$build" -j "${ATOLL_BUILD_JOBS:-2}" "${build_targets[@]}"

# Without log_path: libFuzzer keeps each report in the target's log beside its input.
export_sanitizer_options
fuzz_one() {
  local name=$1 out=$build/logs/$1.log
  local work=$build/corpus/$name findings=$build/findings/$name/
  mkdir -p "$work" "$findings" "$build/logs"
  local inputs=("$work" "tests/fuzz/corpus/$name")
  [[ -d tests/fuzz/regressions/$name ]] && inputs+=("tests/fuzz/regressions/$name")
  if "$build/fuzz/fuzz_$name" "${inputs[@]}" -max_total_time="$seconds" -timeout=10 \
    -malloc_limit_mb=512 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$findings" >"$out" 2>&1; then
    echo ok >"$out.result"
  else
    echo FOUND >"$out.result"
  fi
}
jobs_at_once=${ATOLL_FUZZ_JOBS:-2}
for name in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs_at_once)); do wait -n || true; done
  fuzz_one "$name" &
done
wait

failed=0
found=0
printf "%-16s %12s %9s %7s %8s %7s  %s\n" target executions "exec/s" cov features corpus result
for name in "${targets[@]}"; do
  log=$build/logs/$name.log
  result=$(cat "$log.result")
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  # The last status line ("#N DONE cov: C ft: F corp: K/..." or the last "#N ... cov:" line).
  status=$(grep -E "^#[0-9]+.*cov: " "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$status")
  printf "%-16s %12s %9s %7s %8s %7s  %s\n" "$name" "${runs:--}" "${rate:--}" "${cov:--}" "${ft:--}" "${corp:--}" "$result"
  if [[ $result != ok ]]; then
    failed=1
    found=$((found + 1))
    echo "  $name: see $log; the input is in $build/findings/$name/" >&2
    { grep -E "^fuzz: |SUMMARY|ERROR: " "$log" || true; } | head -5 | sed 's/^/  /' >&2
  fi
done
echo "run.sh: ${#targets[@]} targets, $seconds s each"
echo "fuzz: $((${#targets[@]} - found)) passed, $found failed"
exit $failed
