# Sourced by scripts/sanitize.sh and tests/fuzz/run.sh: the clang builds with the
# sanitizers (Atoll's code instrumented; LibTorch, MPI and the system libraries not) and the
# options their runs share.
#   address: build-asan/, ASan + UBSan and libFuzzer's coverage instrumentation (-DATOLL_FUZZ=ON):
#            the fuzz targets and the whole test suite come from this one build.
#   thread:  build-tsan/, ThreadSanitizer.

# What `sanitize.sh unit` runs needs built: the unit tests, every fuzz target's replay, and the atoll
# binary a unit test runs (`atoll data prepare`'s bad flags).
sanitizer_unit_targets=(--target atoll_unit_tests --target fuzz_replays --target atoll)

# sanitizer_build_dir MODE: the build directory of MODE (address or thread).
sanitizer_build_dir() {
  case $1 in
    address) echo build-asan ;;
    thread) echo build-tsan ;;
    *) return 1 ;;
  esac
}

# configure_sanitizer_build MODE: configures that build. The arguments are the same on every call,
# so fuzzing and running the suite share one build and never reconfigure each other's.
configure_sanitizer_build() {
  local mode=$1 dir
  dir=$(sanitizer_build_dir "$mode")
  local options=(-DATOLL_SANITIZE="$mode")
  [[ $mode == address ]] && options+=(-DATOLL_FUZZ=ON)
  mkdir -p "$dir"
  # -O1 with line tables: reports name file:line, and it compiles about a third faster than -O2 -g.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER="${ATOLL_SANITIZE_CLANG:-clang++-16}" \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" "${options[@]}" \
    -DATOLL_WITH_CUDA=OFF -DATOLL_BUILD_BENCH=OFF >"$dir/configure.log" 2>&1 ||
    { grep -E "^Atoll: " "$dir/configure.log" >&2 || cat "$dir/configure.log" >&2; return 1; }
}

# export_sanitizer_options [REPORT_DIR]: the runtime options of every sanitized run; with
# REPORT_DIR, each report is also written there (log_path) so a caller can fail on any report,
# even one from a process whose failure a test expected.
export_sanitizer_options() {
  # One log_path for all three: a sanitizer's runtime also reads the others' options (TSan reads
  # UBSAN_OPTIONS), and the last log_path read would win. Files are REPORT_DIR/report.PID.
  local log=""
  (($# > 0)) && log=:log_path=$1/report
  # Leaks are not checked: LibTorch keeps allocations alive until exit by design (its caching
  # allocators and registries), which LeakSanitizer reports from uninstrumented code.
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1$log
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1$log
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-16/bin/llvm-symbolizer
  export TSAN_OPTIONS=halt_on_error=0:second_deadlock_stack=1:suppressions=$PWD/tests/sanitize/tsan.supp:external_symbolizer_path=$ASAN_SYMBOLIZER_PATH$log
  export OMP_NUM_THREADS=1
}
