#!/usr/bin/env bash
# The main job, from a fresh machine: install dependencies, build Atoll, fetch and prepare the
# Python documentation corpus, and train a small Llama with 4 data-parallel ranks.
# Usage: bash examples/pydocs/run.sh [--set key=value]...
set -euo pipefail
cd "$(dirname "$0")/../.."

bash scripts/install-deps.sh
bash scripts/build.sh atoll
bash examples/pydocs/prepare.sh data/pydocs build/bin/atoll
# One OpenMP/BLAS thread per rank unless the config says otherwise (run.threads).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec build/bin/atoll launch examples/pydocs/llama_dp4.yaml "$@"
