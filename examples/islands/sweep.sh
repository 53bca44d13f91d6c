#!/usr/bin/env bash
# The outer optimizer's learning rate and momentum per (M islands, H inner steps) on the quality
# experiment's model and tokens (quality.yaml), one seed: for each (M, H), Nesterov momentum 0.9
# with outer lr 0.2 to 0.7 (1.0 is worse still), momentum 0.5 with lr 0.6 and 1.0, and plain
# averaging (lr 1, no momentum);
# NoLoCo around its defaults; synchronous training as the baseline. Then the table
# (examples/islands/quality.py --sweep). About 30 minutes on 2 cores.
# Usage: bash examples/islands/sweep.sh [--set key=value]...   (applied to every run)
# Environment (defaults: issue 20's sweep): SWEEP_OUT (runs/islands-sweep), SWEEP_STEPS (640; a
# multiple of every H, so that phi is evaluated right after the last sync), SWEEP_CELLS ("1:16 2:16
# 4:8 4:16 4:32", M:H), SWEEP_NESTEROV_LRS (the outer lrs with momentum 0.9: "0.2 0.4 0.7"),
# SWEEP_NOLOCO (1: NoLoCo's runs too; 0: none).
source "$(dirname "$0")/../setup.sh"
out=${SWEEP_OUT:-runs/islands-sweep}
steps=${SWEEP_STEPS:-640}
mkdir -p "$out"
extra=(--set train.steps="$steps" "$@")

run() {  # name, then --set overrides
  local name=$1
  shift
  [[ -f $out/$name/metrics.jsonl ]] && grep -q "\"step\":$steps,\"val_loss\"" "$out/$name/metrics.jsonl" && return 0
  rm -rf "${out:?}/$name"
  "$atoll" launch examples/islands/quality.yaml --set run.dir="$out/$name" "$@" "${extra[@]}" |
    grep -E "step +$steps/$steps \| val loss|error" | sed "s|^|$name: |" || true
}

run sync --set outer.algorithm=none
for cell in ${SWEEP_CELLS:-1:16 2:16 4:8 4:16 4:32}; do
  m=${cell%%:*} h=${cell#*:}
  layout=(--set parallel.islands="$m" --set parallel.dp=$((4 / m)) --set outer.inner_steps="$h")
  for lr in ${SWEEP_NESTEROV_LRS:-0.2 0.4 0.7}; do
    run "m${m}_h${h}_mu0.9_lr$lr" "${layout[@]}" --set outer.lr="$lr" --set outer.momentum=0.9
  done
  for lr in 0.6 1.0; do
    run "m${m}_h${h}_mu0.5_lr$lr" "${layout[@]}" --set outer.lr="$lr" --set outer.momentum=0.5
  done
  run "m${m}_h${h}_mu0_lr1.0" "${layout[@]}" --set outer.lr=1.0 --set outer.momentum=0 --set outer.nesterov=false
done
# NoLoCo (pairs, H = 16): its defaults (lr = gamma 0.7, momentum 0.5) and around them.
[[ ${SWEEP_NOLOCO:-1} == 1 ]] && for setting in "0.7 0.5" "0.5 0.5" "1.0 0.5" "1.0 0"; do
  read -r lr mu <<<"$setting"
  run "noloco_lr${lr}_mu$mu" --set outer.algorithm=noloco --set outer.lr="$lr" --set outer.momentum="$mu" \
    --set outer.gamma="$lr"
done

.venv/bin/python examples/islands/quality.py --sweep "$out"
