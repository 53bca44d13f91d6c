#!/usr/bin/env bash
# Islands of different layouts (issue 19, test f): island 0 a job of tp=2 x dp=2 with ZeRO-1 (four
# ranks), island 1 a job of one rank, meet at atoll rendezvous and train DiLoCo; they average in the
# canonical parameter space, each rank exchanging its own slice (optim/outer/sliced_average.h).
# After every outer round (checkpoints at steps 4, 8, 12) both islands hold bit-identical phi, the
# same bits as through each island's rank 0 (outer.through_leader, optim/outer/canonical_average.h),
# and within 1e-5 of the phi two one-rank islands hold after the same rounds; the four-rank island
# carries the model once per round, like the one-rank island. Streaming DiLoCo between an island of
# pp=2 x tp=2 and one of one rank ends with bit-identical phi too.
# ISLAND_LAYOUTS_SCENARIOS picks what runs (default both, one CTest entry each): diloco, streaming.
# Usage: island_layouts.sh ATOLL_BIN
set -uo pipefail
atoll=$1
source "$(dirname "$0")/lib.sh"
wants() { [[ " ${ISLAND_LAYOUTS_SCENARIOS:-diloco streaming} " == *" $1 "* ]]; }
compare="$(dirname "$0")/compare_safetensors.py"

make_corpus "$atoll" "$work/data"
cat >"$work/islands.yaml" <<YAML
run:        { seed: 5, threads: 1, mfu_peak_tflops: 1 }
model:      { vocab: 256, dim: 32, layers: 2, heads: 2, kv_heads: 2, ffn: 64, seq: 16 }
parallel:   { islands: 2 }
train:      { steps: 12, global_batch: 8, log_every: 1 }
optim:      { lr: 3.0e-3, min_lr: 3.0e-4, warmup: 2 }
data:       { train: $work/data/train.bin, val: $work/data/val.bin }
checkpoint: { every: 4, keep: 3 }
outer:      { algorithm: diloco, inner_steps: 4, timeout_s: 120 }
YAML

# islands LABEL "ISLAND_0_OVERRIDES" "ISLAND_1_OVERRIDES": two island jobs in $work/LABEL-I; $statuses.
islands() {
  local label=$1 island layout
  local -a layouts=("$2" "$3")
  start_rendezvous "$atoll" "$work/rendezvous-$label.log"
  jobs=()
  for island in 0 1; do
    read -ra layout <<<"${layouts[$island]}"
    timeout 400 "$atoll" launch "$work/islands.yaml" --set run.dir="$work/$label-$island" \
      --set outer.rendezvous="127.0.0.1:$port" --set outer.island=$island "${layout[@]}" \
      >"$work/$label-$island.log" 2>&1 &
    jobs+=($!)
  done
  wait_for_jobs
  kill -TERM $rendezvous
  wait $rendezvous
}
# phi LABEL ISLAND STEP: island ISLAND's phi at STEP, exported to a safetensors file; prints its path.
phi() {
  local out="$work/phi/$1-$2-step-$3.safetensors"
  "$atoll" ckpt export "$work/$1-$2/checkpoints/step-$3" --out "$out" >"$work/export.log" 2>&1 || return 1
  echo "$out"
}

# What island I sent between islands by step 12 ("outer X in all" of its last progress line).
outer_bytes() { grep "^step    12/12 | loss" "$work/$1-$2.log" | sed -n 's/.*| outer \([^|]*\) in all.*/\1/p'; }

if wants diloco; then
  islands mixed "--set parallel.tp=2 --set parallel.dp=2 --set parallel.zero=1" ""
  # Island 0's rank table (run.dir/ranks.txt) ends with its rank 3 (the fourth of four on this host)
  # at island 0, pp 0, dp 1, tp 1; the four ranks' link carried the model once per round, as the
  # one-rank island's did.
  if [[ ${statuses[*]} == "0 0" ]] && grep -qE "^ +3 +[^ ]+ +3/4 +[^ ]+ +0 +0 +1 +1$" "$work/mixed-0/ranks.txt" &&
      [[ -n $(outer_bytes mixed 1) && $(outer_bytes mixed 0) == "$(outer_bytes mixed 1)" ]]; then
    check ok "an island of tp=2 x dp=2 with ZeRO-1 and an island of one rank trained 12 steps together, each sending $(outer_bytes mixed 0)"
  else
    check fail "islands of different layouts (exit ${statuses[*]}; sent $(outer_bytes mixed 0) and $(outer_bytes mixed 1))" "$work/mixed-0.log"
  fi
  islands leader "--set parallel.tp=2 --set parallel.dp=2 --set parallel.zero=1 --set outer.through_leader=true" \
    "--set outer.through_leader=true"
  [[ ${statuses[*]} == "0 0" ]] && check ok "reference: the same islands exchanging through each island's rank 0" ||
    check fail "islands through their rank 0 (exit ${statuses[*]})" "$work/leader-0.log"
  islands alike "" ""
  [[ ${statuses[*]} == "0 0" ]] && check ok "reference: two islands of one rank each" ||
    check fail "two one-rank islands (exit ${statuses[*]})" "$work/alike-0.log"

  for step in 4 8 12; do
    a=$(phi mixed 0 $step) && b=$(phi mixed 1 $step) && reference=$(phi alike 0 $step)
    if [[ -n ${reference:-} ]] && cmp -s "$a" "$b"; then
      check ok "step $step: the tp=2 x dp=2 ZeRO-1 island's phi and the one-rank island's are bit-identical"
    else
      check fail "step $step: the islands' phi differ" "$work/export.log"
    fi
    if [[ -n ${reference:-} ]] && leader=$(phi leader 0 $step) && cmp -s "$a" "$leader"; then
      check ok "step $step: rank by rank, the same phi bits as through each island's rank 0"
    else
      check fail "step $step: phi rank by rank against through rank 0" "$work/export.log"
    fi
    if [[ -n ${reference:-} ]] && python3 "$compare" "$a" "$reference" 1e-5 >"$work/compare-$step.log" 2>&1; then
      check ok "step $step: phi within 1e-5 of two one-rank islands' ($(cat "$work/compare-$step.log"))"
    else
      check fail "step $step: phi against two one-rank islands" "$work/compare-$step.log"
    fi
  done
fi
# Streaming DiLoCo (two fragments of strided layers) between an island of pp=2 x tp=2 (each stage
# its own layers, norms replicated over tp) and one of one rank: bit-identical phi at the end.
if wants streaming; then
  islands streaming "--set parallel.pp=2 --set parallel.tp=2 --set outer.algorithm=streaming_diloco --set outer.fragments=2" \
    "--set outer.algorithm=streaming_diloco --set outer.fragments=2"
  if [[ ${statuses[*]} == "0 0" ]] && a=$(phi streaming 0 12) && b=$(phi streaming 1 12) && cmp -s "$a" "$b"; then
    check ok "streaming DiLoCo: an island of pp=2 x tp=2 and an island of one rank end with bit-identical phi"
  else
    check fail "streaming DiLoCo between layouts (exit ${statuses[*]})" "$work/streaming-0.log"
  fi
fi
finish
