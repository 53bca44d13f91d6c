#!/usr/bin/env bash
# An island job restarts itself and rejoins (issue 19, item 3): three elastic island jobs
# (outer.min_islands: 2), island 2's under `atoll launch --max-restarts 1`. Its `atoll train` dies
# by SIGKILL at the start of step 10, inside round 3's inner phase (ATOLL_FAULT=sigkill@10: a test
# polling for step 10 could kill it only once it had reached round 3's meeting, a race with the
# others' group); the launcher names the kill and relaunches it from its step-8 checkpoint (a new
# job token; its island id, held by the dead process, taken over once that heartbeat stood still),
# it meets the others again, and all three finish at step 24 with the same phi, bit for bit.
# Usage: island_restart.sh ATOLL_BIN
set -uo pipefail
atoll=$1
source "$(dirname "$0")/lib.sh"

island_config "$work/islands.yaml"
# step and phi's validation loss of the last validation record.
final_phi() { grep '"val_loss_outer"' "$1" | tail -1 | sed 's/^{"step":\([0-9]*\),.*"val_loss_outer":\([^,}]*\).*/\1 \2/'; }

start_rendezvous "$atoll" "$work/rendezvous.log"
jobs=()
for island in 0 1 2; do
  restarts=() fault=
  [[ $island == 2 ]] && restarts=(--max-restarts 1) fault=sigkill@10
  ATOLL_FAULT=$fault timeout 300 "$atoll" launch "$work/islands.yaml" "${restarts[@]}" --set run.dir="$work/restart-$island" \
    --set outer.rendezvous="127.0.0.1:$port" --set outer.island=$island --set outer.min_islands=2 \
    --set outer.grace_s=3 >"$work/restart-$island.log" 2>&1 &
  jobs+=($!)
done
wait_for_jobs
kill -TERM $rendezvous
wait $rendezvous

# (The hook's own line may die with the process before mpirun forwards it; the launcher's is certain.)
if [[ ${statuses[*]} == "0 0 0" ]] && grep -q "was killed by signal 9 (SIGKILL)" "$work/restart-2.log" &&
    grep -q "restart 1 of 1" "$work/restart-2.log" && grep -q '"event":"restart"' "$work/restart-2/metrics.jsonl"; then
  check ok "island 2's train process killed (SIGKILL) at step 10: its launcher relaunched it, and all three finished (exit 0 0 0)"
else
  check fail "island 2's restart (exit ${statuses[*]})" "$work/restart-2.log"
fi
if grep -q "checkpoint: resumed from .*step-8" "$work/restart-2.log"; then
  check ok "the relaunched island 2 resumed from its step-8 checkpoint"
else
  check fail "island 2's resume" "$work/restart-2.log"
fi
if grep -q '"event":"island_joined","step":[0-9]*,"island":2' "$work/restart-0/metrics.jsonl" &&
    grep -q "islands: the others are past this island's step 8" "$work/restart-2.log"; then
  check ok "island 0 logged island 2's return; island 2 found the others past its step 8 and took their state"
else
  check fail "island 2's rejoining" "$work/restart-2.log"
fi
phi0=$(final_phi "$work/restart-0/metrics.jsonl")
if [[ $phi0 == 24\ * && $phi0 == "$(final_phi "$work/restart-1/metrics.jsonl")" && $phi0 == "$(final_phi "$work/restart-2/metrics.jsonl")" ]]; then
  check ok "all three islands end at step 24 with the same phi, bit for bit: $phi0"
else
  check fail "the islands' final phi: $phi0 / $(final_phi "$work/restart-1/metrics.jsonl") / $(final_phi "$work/restart-2/metrics.jsonl")"
fi
finish
