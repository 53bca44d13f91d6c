#!/usr/bin/env bash
# Configures and builds Atoll into build/ (Release, Ninja, -j2). Re-running only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "${ATOLL_BUILD_JOBS:-2}"
