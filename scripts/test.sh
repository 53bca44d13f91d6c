#!/usr/bin/env bash
# The test command: installs dependencies, builds, and runs the whole suite (unit tests and
# multi-rank tests under mpirun) through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# The CUDA path must compile and link on every run, GPU or not: ON fails the configure without it.
ATOLL_CMAKE_ARGS="-DATOLL_WITH_CUDA=ON ${ATOLL_CMAKE_ARGS:-}" bash scripts/build.sh
export OMP_NUM_THREADS=1
cd build && ctest --output-on-failure --timeout 900 "$@"
