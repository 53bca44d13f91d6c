# Sourced by the example scripts (pydocs/run.sh, pydocs/run_subword.sh, mixture/run.sh, the islands
# experiments): stops on the first error, moves to the repository root, installs what is missing,
# builds `atoll`, prepares the byte-level corpus (unless the script set ATOLL_SETUP_PYDOCS=no: it
# prepares its own) and gives every rank one OpenMP/BLAS thread unless told otherwise (or the
# config's run.threads says so). ATOLL_BIN names a built binary to run instead (nothing is installed
# or built; e.g. a copy kept while the tree is rebuilt); the scripts run "$atoll".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ -n ${ATOLL_BIN:-} ]]; then
  atoll=$ATOLL_BIN
else
  bash scripts/install-deps.sh
  bash scripts/build.sh atoll
  atoll=build/bin/atoll
fi
[[ ${ATOLL_SETUP_PYDOCS:-yes} == no ]] || bash examples/pydocs/prepare.sh data/pydocs "$atoll"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
