#!/usr/bin/env bash
# The test command: installs dependencies, builds, and runs the whole suite (unit tests and
# multi-rank tests under mpirun) through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
export OMP_NUM_THREADS=1
cd build && ctest --output-on-failure --timeout 900 "$@"
