#!/usr/bin/env bash
# A restartable rendezvous (issue 63): two elastic island jobs (parallel.islands: 2,
# outer.min_islands: 1, a grace long enough that every round closes with both) meet at
# `atoll rendezvous --state FILE`. Once island 0 has logged step 9 (round 2 done) the rendezvous is
# killed (SIGKILL, as a machine losing power); when both islands have noticed it in their round and
# their heartbeat, it is started again on the same port with the same state file. Both islands
# reconnect without a relaunch, carry on with the round they were in, meet all 6 rounds as two and
# finish -- island 0 bit for bit the single-world run's losses, grad norms and validation, both with
# the same final phi.
# Usage: island_rendezvous_restart.sh ATOLL_BIN
set -uo pipefail
atoll=$1
source "$(dirname "$0")/lib.sh"

island_config "$work/islands.yaml"
od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$work/secret"
chmod 600 "$work/secret"
validation() { theta_and_phi "$1"; }
final_phi() { theta_and_phi "$1" | awk '$1 == 24 { print $3 }'; }
# wait_for_grep COUNT PATTERN FILE...: whether every FILE holds COUNT lines matching PATTERN within 30 s.
wait_for_grep() {
  local count=$1 pattern=$2 file all found
  shift 2
  for _ in $(seq 1 600); do
    all=1
    for file in "$@"; do
      found=$(grep -c -e "$pattern" "$file" 2>/dev/null)
      ((${found:-0} >= count)) || all=0
    done
    ((all)) && return 0
    sleep 0.05
  done
  return 1
}

timeout 300 "$atoll" launch "$work/islands.yaml" --set parallel.islands=2 >"$work/single.log" 2>&1 &&
  check ok "single-world reference: 2 islands in one mpirun, 24 steps" ||
  check fail "single-world reference" "$work/single.log"

state=$work/rendezvous.state
start_rendezvous "$atoll" "$work/rendezvous-1.log" --secret-file "$work/secret" --state "$state"
jobs=()
for island in 0 1; do
  timeout 300 "$atoll" launch "$work/islands.yaml" --set parallel.islands=2 --set run.dir="$work/island-$island" \
    --set outer.rendezvous="127.0.0.1:$port" --set outer.island=$island --set outer.min_islands=1 \
    --set outer.grace_s=60 --set outer.reconnect_s=60 --set outer.secret_file="$work/secret" \
    >"$work/island-$island.log" 2>&1 &
  jobs+=($!)
done

wait_for_grep 1 '"step":9,' "$work/island-0/metrics.jsonl" || check fail "island 0 never reached step 9" "$work/island-0.log"
kill -KILL $rendezvous
wait $rendezvous 2>/dev/null
# Each island's rank 0 has two connections (its round's and its id's heartbeat): both noticed.
if wait_for_grep 2 "outer.rendezvous 127.0.0.1:$port lost (" "$work/island-0.log" "$work/island-1.log"; then
  check ok "the rendezvous killed (SIGKILL) after island 0's step 9; both islands noticed it and are reconnecting"
else
  check fail "the islands did not notice the killed rendezvous" "$work/island-0.log"
fi
"$atoll" rendezvous --port "$port" --secret-file "$work/secret" --state "$state" >"$work/rendezvous-2.log" 2>&1 &
rendezvous=$!
wait_for_jobs
downtime=$(grep -h "is back after" "$work/island-0.log" | tail -1 | sed 's/.*is back after \([0-9.]*\) s.*/\1/')
kill -TERM $rendezvous
wait $rendezvous

if grep -q "keeping the run's rounds in $state (resumed: [0-9]* records, the newest round that counted [2-9])" \
    "$work/rendezvous-2.log"; then
  check ok "the restarted rendezvous resumed from $state: $(sed -n 's/.*(resumed: \(.*\))$/\1/p' "$work/rendezvous-2.log")"
else
  check fail "the restarted rendezvous's resume" "$work/rendezvous-2.log"
fi
if [[ ${statuses[*]} == "0 0" ]] && grep -q "is back after" "$work/island-0.log" && grep -q "is back after" "$work/island-1.log" &&
    [[ $(grep -c '"outer_islands":2' "$work/island-0/metrics.jsonl") == 6 ]] && ! grep -q '"event":"restart"' "$work/island-0/metrics.jsonl"; then
  check ok "both island jobs reconnected (island 0 after ${downtime} s) without a relaunch, met all 6 rounds as two and finished (exit 0 0)"
else
  check fail "the islands across the restart (exit ${statuses[*]})" "$work/island-0.log"
fi
if same_run "$work/single/metrics.jsonl" "$work/island-0/metrics.jsonl" "$work/island-0.diff"; then
  check ok "island 0's losses, grad norms, theta's and phi's validation bitwise the single world's (a rendezvous that never died)"
else
  check fail "island 0 differs from the single-world run" "$work/island-0.diff"
fi
phi0=$(final_phi "$work/island-0/metrics.jsonl")
if [[ -n $phi0 && $phi0 == "$(final_phi "$work/island-1/metrics.jsonl")" && $phi0 == "$(final_phi "$work/single/metrics.jsonl")" ]]; then
  check ok "both islands end at step 24 with the single world's phi, bit for bit: $phi0"
else
  check fail "the final phi: $phi0 / $(final_phi "$work/island-1/metrics.jsonl") / $(final_phi "$work/single/metrics.jsonl")"
fi
finish
