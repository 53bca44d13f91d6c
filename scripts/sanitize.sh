#!/usr/bin/env bash
# The unit tests under AddressSanitizer + UndefinedBehaviorSanitizer: a build of Atoll's own code
# with -fsanitize=address,undefined (LibTorch, MPI and the other libraries are not instrumented) into
# build-asan/, then atoll_unit_tests with every report fatal. A developer's check before landing
# (it is not part of scripts/test.sh: the instrumented build takes ~15 minutes on 2 cores).
# Usage: bash scripts/sanitize.sh [GTEST_FILTER]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
mkdir -p build-asan
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATOLL_SANITIZE=address \
  -DATOLL_WITH_CUDA=OFF -DATOLL_BUILD_BENCH=OFF >build-asan/configure.log 2>&1 ||
  { cat build-asan/configure.log >&2; exit 1; }
cmake --build build-asan -j "${ATOLL_BUILD_JOBS:-2}" --target atoll_unit_tests
# Leaks are not checked: LibTorch keeps allocations alive until exit by design (its caching
# allocators and registries), which LeakSanitizer reports from uninstrumented code.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OMP_NUM_THREADS=1
build-asan/tests/atoll_unit_tests --gtest_filter="${1:-*}"
