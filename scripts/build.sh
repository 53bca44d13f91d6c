#!/usr/bin/env bash
# Configures and builds Atoll into build/ (Release, Ninja, -j2). Re-running only rebuilds what changed.
# Usage: bash scripts/build.sh [TARGET...]   (no target: everything, tests and benchmarks included;
#        `atoll` alone is what the examples need). ATOLL_CMAKE_ARGS adds configure options,
#        e.g. ATOLL_CMAKE_ARGS="-DATOLL_TORCH_PYTHON=/usr/bin/python3".
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC2086  # ATOLL_CMAKE_ARGS is a list of options
mkdir -p build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${ATOLL_CMAKE_ARGS:-} >build/configure.log 2>&1 || {
  # The configure log is long: show Atoll's own one-line reason when there is one, else the log.
  grep -E "^Atoll: " build/configure.log >&2 || cat build/configure.log >&2
  exit 1
}
grep -E "^-- Atoll:" build/configure.log || true
targets=()
for target in "$@"; do targets+=(--target "$target"); done
cmake --build build -j "${ATOLL_BUILD_JOBS:-2}" "${targets[@]}"
