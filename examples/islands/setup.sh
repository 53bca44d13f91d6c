# Sourced by the islands experiments (run.sh, sweep.sh, simulated.sh): stops on the first error,
# moves to the repository root, installs what is missing, builds `atoll`, prepares the corpus and
# gives every rank one thread.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bash scripts/install-deps.sh
bash scripts/build.sh atoll
bash examples/pydocs/prepare.sh data/pydocs build/bin/atoll
export OMP_NUM_THREADS=1
