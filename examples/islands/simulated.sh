#!/usr/bin/env bash
# The islands experiment in one MPI world (no root needed): synchronous data parallelism, DiLoCo,
# DiLoCo with int8 exchange, Streaming DiLoCo and NoLoCo on the same tokens, 4 islands of 1 rank
# over the in-process link simulator (100 Mbit/s, 10 ms per message); then a table (validation
# loss, bytes between islands, wall-clock) and a plot. examples/islands/links.sh runs the same methods
# as island jobs on real shaped links.
# Usage: bash examples/islands/simulated.sh [--set key=value]...   (applied to every method)
source "$(dirname "$0")/../setup.sh"
out=runs/islands-simulated
mkdir -p "$out"

method() {  # name, then --set overrides
  local name=$1
  shift
  echo "== $name"
  rm -rf "${out:?}/$name"
  build/bin/atoll launch examples/islands/islands.yaml --set run.dir="$out/$name" "$@" "${extra[@]}" |
    grep -E 'val loss|error' || true
}
extra=("$@")
source examples/islands/methods.sh
every_method ""

.venv/bin/python examples/islands/report.py "$out" "${methods[@]}"
