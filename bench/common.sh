# Shared start of the training benchmarks, sourced from the repository root: checks the atoll
# binary (ATOLL_BIN overrides build/bin/atoll) and STEPS against the warm-up steps, and prepares the
# Python documentation corpus if needed. Sets $atoll and $steps.
# Usage: bench_start NAME DEFAULT_STEPS WARMUP [STEPS]
bench_start() {
  local name=$1 default_steps=$2 warmup=$3
  steps=${4:-$default_steps}
  atoll=${ATOLL_BIN:-build/bin/atoll}
  [[ -x $atoll ]] || { echo "$name: $atoll not found; run scripts/build.sh first (or set ATOLL_BIN)" >&2; exit 1; }
  if ! [[ $steps =~ ^[0-9]+$ ]] || ((steps <= warmup)); then
    echo "$name: STEPS must be a number above $warmup (the warm-up steps), got '$steps'" >&2
    exit 1
  fi
  [[ -s data/pydocs/train.bin ]] || bash examples/pydocs/prepare.sh data/pydocs "$atoll" >/dev/null
}
