#!/usr/bin/env bash
# The main job, from a fresh machine: install dependencies, build Atoll, fetch and prepare the
# Brown corpus, and train a small Llama with 4 data-parallel ranks.
# Usage: bash examples/brown/run.sh [--set key=value]...
set -euo pipefail
cd "$(dirname "$0")/../.."

bash scripts/install-deps.sh
bash scripts/build.sh
bash examples/brown/prepare.sh data/brown build/bin/atoll
# One OpenMP/BLAS thread per rank unless the config says otherwise (run.threads).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec build/bin/atoll launch examples/brown/llama_dp4.yaml "$@"
