# Sourced by the example scripts (pydocs/run.sh, pydocs/run_subword.sh, the islands experiments):
# stops on the first error, moves to the repository root, installs what is missing, builds `atoll`,
# prepares the byte-level corpus and gives every rank one OpenMP/BLAS thread unless told otherwise
# (or the config's run.threads says so).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-deps.sh
bash scripts/build.sh atoll
bash examples/pydocs/prepare.sh data/pydocs build/bin/atoll
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
