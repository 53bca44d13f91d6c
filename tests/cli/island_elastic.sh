#!/usr/bin/env bash
# Elastic islands (issue 19; outer.min_islands below parallel.islands): three `atoll launch` jobs of
# one island each whose membership is a quorum per outer round.
# With every island there, they train bit for bit as the single-world run of the same config, also
# when one alters a chunk in flight (caught by its HMAC) and, on real links, when one's link is cut
# for 3 s mid-run and restored.
# Island 2 dies (SIGKILL, as a machine losing power) in the middle of an inner phase: islands 0 and 1
# go on averaging between the two of them, logging island 2's drop, and finish. Island 2 restarted
# from its last checkpoint finds the others past its step, meets their next round, takes their phi
# and outer momentum and continues at their step: at the end all three islands hold the same phi,
# bit for bit. After the run a job with another model or codec is refused at the rendezvous, exit 2,
# and a second job for an island id a running job holds is refused, exit 2.
# Island 2 dies inside an exchange, its first phase sent: the others' exchange fails, the round is
# settled as failed everywhere (nothing of it applied), and they meet it again as two.
# What the survivors train is held to a reference where island 2 sat the rounds out (killed before
# round 3 and never back): the same losses, bit for bit -- all of them after a death mid-exchange,
# those up to a round after its return after a death between rounds.
# Every island holds the job secret (a restarted island's tags must match the others').
# With ISLAND_LINK_MBIT=R each island job runs in a network namespace of its own on a link shaped to
# R Mbit/s, the rendezvous in a hub namespace (tests/cli/netns.sh): the same cases on real links.
# ISLAND_OUTER="KEY=VALUE ..." sets the outer algorithm's settings of every run (the single world's
# too), e.g. outer.delayed=true: the same cases for each elastic outer algorithm.
# Usage: [ISLAND_LINK_MBIT=R] [ISLAND_OUTER=...] [ISLAND_SCENARIOS="every churn midway"] island_elastic.sh ATOLL_BIN
set -uo pipefail
atoll=$1
source "$(dirname "$0")/lib.sh"
if [[ -n ${ISLAND_LINK_MBIT:-} ]]; then
  source "$(dirname "$0")/netns.sh"
  use_island_links 3 "$ISLAND_LINK_MBIT" && check ok "3 islands' namespaces on $ISLAND_LINK_MBIT Mbit/s links (tc tbf)" ||
    { check fail "network namespaces with tc tbf (root, iproute2)"; finish; exit; }
fi

island_config "$work/islands.yaml"
outer_sets=()
for setting in ${ISLAND_OUTER:-}; do outer_sets+=(--set "$setting"); done
# One-step-delayed DiLoCo's round r exchange runs during round r+1: a death in it is met at the next
# boundary, and the round counts (and is recorded at the rendezvous) only there.
delayed=false
[[ " ${ISLAND_OUTER:-} " == *" outer.delayed=true "* ]] && delayed=true
od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$work/secret"
chmod 600 "$work/secret"

# What same_run compares besides the losses: theta's and phi's validation.
validation() { theta_and_phi "$1"; }
# The island events (island_dropped, ...) named $2 of a metrics.jsonl.
island_events() { grep -o "\"event\":\"$2\",\"step\":[0-9]*,\"island\":[0-9]*" "$1"; }
# The step of the last step record of a metrics.jsonl.
last_step() { sed -n 's/^{"step":\([0-9]*\),"loss".*/\1/p' "$1" | tail -1; }
# The validation record of step 24, the last.
final() { validation "$1" | awk '$1 == 24'; }
# island_job LABEL ISLAND OVERRIDES...: one elastic `atoll launch` of island ISLAND in $work/LABEL-ISLAND.
island_job() {
  local label=$1 island=$2
  shift 2
  island_exec "$island" timeout 300 "$atoll" launch "$work/islands.yaml" --set run.dir="$work/$label-$island" \
    --set outer.rendezvous="$rendezvous_host:$port" --set outer.island="$island" --set outer.min_islands=2 \
    --set outer.secret_file="$work/secret" "${outer_sets[@]}" "$@" >"$work/$label-$island.log" 2>&1
}
# The losses (step, loss, grad norm) of a metrics.jsonl up to step $2.
# start_islands LABEL FAULTY FAULT GRACE_S: a rendezvous of its own and LABEL's three island jobs in
# the background (their pids in $jobs), island FAULTY with ATOLL_FAULT=FAULT, rounds waiting GRACE_S.
start_islands() {
  local label=$1 faulty=$2 fault=$3 grace=$4 island hook
  start_rendezvous "$atoll" "$work/rendezvous-$label.log" --secret-file "$work/secret"
  jobs=()
  for island in 0 1 2; do
    [[ $island == "$faulty" ]] && hook=$fault || hook=
    ATOLL_FAULT=$hook island_job "$label" $island --set outer.grace_s="$grace" &
    jobs+=($!)
  done
}
losses_through() { losses "$1" | awk -v last="$2" '$1 <= last'; }
# The reference: islands 0 and 1 with island 2 killed at the start of step 11 (before round 3) and
# never back -- island 2 sat out every round from 3 on. Run once, by the first case that needs it.
# (A short grace: the rounds without island 2 wait it out; the check below sees rounds 1 and 2 met as
# three.)
satout_reference() {
  [[ -s $work/satout-0/metrics.jsonl ]] && return
  start_islands satout 2 sigkill@11 1
  wait_for_jobs
  if [[ ${statuses[*]} == "0 0 $EXIT_SIGKILL" ]] && grep -q '"step":8,.*"outer_islands":3' "$work/satout-0/metrics.jsonl" &&
      grep -q '"step":4,.*"outer_islands":3' "$work/satout-0/metrics.jsonl" &&
      grep -q '"step":12,.*"outer_islands":2' "$work/satout-0/metrics.jsonl"; then
    check ok "reference: rounds 1 and 2 as three, island 2 killed at step 11 and never back, islands 0 and 1 met rounds 3 to 6 as two (exit ${statuses[*]})"
  else
    check fail "the reference without island 2 (exit ${statuses[*]})" "$work/satout-0.log"
  fi
  kill -TERM $rendezvous
  wait $rendezvous
}

# ISLAND_SCENARIOS picks what runs (CTest runs them as entries of their own, each within a minute):
# every (every island there; on real links also the cut), churn (island 2 killed and restarted, then
# the refused jobs), midway (island 1 killed inside an exchange). Default: all three.
scenarios=" ${ISLAND_SCENARIOS:-every churn midway} "
wants() { [[ $scenarios == *" $1 "* ]]; }
for name in $scenarios; do
  [[ $name =~ ^(every|churn|midway)$ ]] ||
    { echo "island_elastic.sh: ISLAND_SCENARIOS names '$name'; use every, churn and/or midway" >&2; exit 2; }
done

if wants every; then
  timeout 300 "$atoll" launch "$work/islands.yaml" "${outer_sets[@]}" >"$work/single.log" 2>&1 &&
    check ok "single-world reference: 3 islands in one mpirun, 24 steps" ||
    check fail "single-world reference" "$work/single.log"

  # every_island LABEL [DURING]: three elastic island jobs with every island there (a grace long enough
  # for the slowest to start or come back), island 1 altering a chunk of its second exchange in flight
  # (its receiver's HMAC catches it, the exchange runs again); DURING (a function) runs meanwhile.
  # They meet every round as three, and island 0 logs the single world's run, bit for bit.
  every_island() {
    local label=$1 during=${2:-true}
    start_islands "$label" 1 corrupt_chunk@2:1 20
    "$during"
    wait_for_jobs
    if [[ ${statuses[*]} == "0 0 0" ]] && [[ $(grep -c '"outer_islands":3' "$work/$label-0/metrics.jsonl") == 6 ]] &&
        grep -q "a chunk island 1 sent to island 0 failed its HMAC check" "$work/$label-0.log"; then
      check ok "$label: three elastic island jobs met all 6 rounds as three; island 1's altered chunk was caught at island 0"
    else
      check fail "$label: elastic island jobs (exit ${statuses[*]})" "$work/$label-0.log"
    fi
    if same_run "$work/single/metrics.jsonl" "$work/$label-0/metrics.jsonl" "$work/$label.diff"; then
      check ok "$label: island 0's losses, grad norms, theta's and phi's validation bitwise the single world's"
    else
      check fail "$label: the elastic islands differ from the single-world run" "$work/$label.diff"
    fi
    kill -TERM $rendezvous
    wait $rendezvous
  }
  every_island whole

  # On real links: island 2's link is cut for 3 s once it has logged step 6, and restored (TCP
  # retransmits; the others wait for it at the round).
  cut_island_2() {
    for _ in $(seq 1 600); do grep -q '"step":6,' "$work/cut-2/metrics.jsonl" 2>/dev/null && break; sleep 0.05; done
    cut_link 2
    sleep 3
    grep -c '"loss"' "$work/cut-2/metrics.jsonl" >"$work/steps-at-restore"
    restore_link 2
  }
  if [[ -n ${ISLAND_LINK_MBIT:-} ]]; then
    every_island cut cut_island_2
    (($(cat "$work/steps-at-restore") < 24)) &&
      check ok "island 2's link was cut for 3 s mid-run (restored at its step $(cat "$work/steps-at-restore")) and the islands finished as above" ||
      check fail "the cut came after island 2 had finished"
  fi
fi

if wants churn; then
  # Island 2 dies at the start of step 11 (after its step-8 checkpoint, inside round 3's inner phase).
  # A new rendezvous: one per training run (the store keeps the newest round the islands completed).
  start_rendezvous "$atoll" "$work/rendezvous-churn.log" --secret-file "$work/secret"
  jobs=()
  for island in 0 1; do
    island_job churn $island --set outer.grace_s=3 &
    jobs+=($!)
  done
  ATOLL_FAULT=sigkill@11 island_job churn 2 --set outer.grace_s=3
  killed=$?
  # Exit 137 (SIGKILL) and a last step record of step 10: the hook's kill at step 11. (Its own line
  # is not checked: mpirun need not pass on what a rank wrote just before it was killed.)
  if [[ $killed -eq $EXIT_SIGKILL && $(last_step "$work/churn-2/metrics.jsonl") == 10 ]]; then
    check ok "island 2's job died at step 11 (exit $killed)"
  else
    check fail "island 2's death (exit $killed)" "$work/churn-2.log"
  fi
  mv "$work/churn-2.log" "$work/churn-2-killed.log"
  # It restarts once islands 0 and 1 have met round 3 without it: it is behind them then.
  for _ in $(seq 1 600); do grep -q '"step":12,.*"outer_islands":2' "$work/churn-0/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
  island_job churn 2 --set outer.grace_s=3 &
  jobs+=($!)
  wait_for_jobs
  if [[ ${statuses[*]} == "0 0 0" ]] && island_events "$work/churn-0/metrics.jsonl" island_dropped | grep -q '"step":12,"island":2' &&
      grep -q '"step":12,.*"outer_islands":2' "$work/churn-1/metrics.jsonl"; then
    check ok "islands 0 and 1 met round 3 (step 12) without island 2, logged its drop, and finished with it back: exit ${statuses[*]}"
  else
    check fail "the survivors of island 2 (exit ${statuses[*]})" "$work/churn-0.log"
  fi
  # (Delayed DiLoCo records round 3 only at step 16: island 2 may find the others' newest round its
  # own, train on, sit out the closed round 3 and catch up at the next.)
  if { grep -qE "islands: the others are past this island's step (4|8); meeting round [0-9]+ to take their state" "$work/churn-2.log" ||
      { $delayed && [[ -n $(island_events "$work/churn-2/metrics.jsonl" sat_out) ]]; }; } &&
      [[ -n $(island_events "$work/churn-2/metrics.jsonl" caught_up) ]] &&
      [[ -n $(island_events "$work/churn-0/metrics.jsonl" island_joined) ]]; then
    check ok "island 2 restarted from its checkpoint, found the others past it and caught up at $(island_events "$work/churn-2/metrics.jsonl" caught_up | sed 's/.*"step":\([0-9]*\).*/step \1/')"
  else
    check fail "island 2's catching up" "$work/churn-2.log"
  fi
  if [[ -n $(final "$work/churn-0/metrics.jsonl") ]] &&
      diff <(final "$work/churn-0/metrics.jsonl") <(final "$work/churn-1/metrics.jsonl") >"$work/churn.diff" &&
      diff <(final "$work/churn-0/metrics.jsonl") <(final "$work/churn-2/metrics.jsonl") >>"$work/churn.diff"; then
    check ok "after the churn all three islands end at step 24 with the same theta and phi, bit for bit: $(final "$work/churn-0/metrics.jsonl")"
  else
    check fail "the islands' final state differs" "$work/churn.diff"
  fi

  # The rendezvous's refusals depend neither on the outer algorithm nor on the links: checked once,
  # with plain DiLoCo on loopback (the reference run below keeps each entry under a minute).
  if [[ -z ${ISLAND_OUTER:-} && -z ${ISLAND_LINK_MBIT:-} ]]; then
    # After the run, a job for island 0 with another model.dim, or another codec, is refused at the
    # rendezvous (held to the settings of the run's last completed round) with one line, exit 2, before
    # it trains.
    refused_setting() {  # refused_setting LABEL KEY VALUE RECORDED: a job with KEY=VALUE against the run's RECORDED
      local label=$1 key=$2 value=$3 recorded=$4 status
      island_job "$label" 0 --set outer.grace_s=3 --set "$key=$value"
      status=$?
      if [[ $status -eq 2 ]] && grep -q "outer.rendezvous $rendezvous_host:$port refused island 0: its $key: $value differs from the run's (its islands' at round [0-9]*) $recorded; every island job of a run needs the same model, outer settings" "$work/$label-0.log" &&
          ! grep -q '"loss"' "$work/$label-0/metrics.jsonl" 2>/dev/null; then
        check ok "an island job with another $key ($value, the run's $recorded) is refused at the rendezvous with one line, exit 2, before it trains"
      else
        check fail "an island with another $key (exit $status)" "$work/$label-0.log"
      fi
    }
    refused_setting other-model model.dim 64 32
    refused_setting other-codec outer.compression int8 none
    # A job for island 0 waits at the rendezvous for a round the others will never hold (they are done),
    # holding island 0; meanwhile a second job for island 0 is refused with one line, exit 2, and the
    # first waits on untouched.
    island_job holder 0 --set outer.grace_s=3 &
    holder=$!
    for _ in $(seq 1 600); do grep -q "islands: the others are past" "$work/holder-0.log" 2>/dev/null && break; sleep 0.1; done
    island_job duplicate 0 --set outer.grace_s=3
    status=$?
    if [[ $status -eq 2 ]] && grep -q "outer.rendezvous $rendezvous_host:$port refused island 0: another running job holds island 0 (its heartbeat moved within the last 3 s); give each island job its own outer.island" "$work/duplicate-0.log" &&
        kill -0 $holder 2>/dev/null; then
      check ok "a second job for island 0 while another holds island 0 is refused with one line, exit 2; the holder runs on"
    else
      check fail "a duplicate island id (exit $status)" "$work/duplicate-0.log"
    fi
    pkill -TERM -f "run.dir=$work/holder-0 "
    wait $holder
  fi
  kill -TERM $rendezvous
  wait $rendezvous

  # Island 0's losses equal the reference's up to a round after island 2's return: its zero
  # pseudo-gradient was left out of the round it caught up in (delayed DiLoCo applies that round's
  # mean a round later).
  satout_reference
  back=$(island_events "$work/churn-2/metrics.jsonl" caught_up | sed 's/.*"step":\([0-9]*\).*/\1/' | head -1)
  if [[ -n $back ]] && diff <(losses_through "$work/satout-0/metrics.jsonl" $((back + 4))) \
      <(losses_through "$work/churn-0/metrics.jsonl" $((back + 4))) >"$work/churn-satout.diff"; then
    check ok "island 0's losses up to step $((back + 4)) (island 2 back at step $back) are those of the run where island 2 sat the rounds out, bit for bit"
  else
    check fail "island 0's losses against the run without island 2 (back at step ${back:-?})" "$work/churn-satout.diff"
  fi
fi

if wants midway; then
  # Island 2 dies in its third exchange (round 3, step 12) once its first phase is sent.
  start_islands midway 2 sigkill_in_exchange@3 3
  wait_for_jobs
  # Island 2: exit 137 (SIGKILL) with step 11 its last record, killed in round 3's exchange (step
  # 12); delayed DiLoCo's runs behind steps 13-16, so island 2 dies at step 12 to 15 and the others
  # find the round failed at step 16, where they meet it again.
  died=$(last_step "$work/midway-2/metrics.jsonl")
  if $delayed; then [[ $died =~ ^1[2-5]$ ]]; else [[ $died == 11 ]]; fi
  died_in_round_3=$?
  if [[ ${statuses[*]} == "0 0 $EXIT_SIGKILL" && $died_in_round_3 == 0 ]] &&
      grep -q "outer round 3: outer exchange: the round did not count: Gloo group island: .*; meeting again (attempt 2)" "$work/midway-0.log" &&
      island_events "$work/midway-1/metrics.jsonl" island_dropped | grep -q '"step":12,"island":2' &&
      grep -q '"step":16,.*"outer_islands":2' "$work/midway-0/metrics.jsonl"; then
    check ok "island 2 died mid-exchange (its last step $died): islands 0 and 1 settled round 3 as failed, met it again as two and finished (exit ${statuses[*]})"
  else
    check fail "an island dying mid-exchange (exit ${statuses[*]}, island 2's last step ${died:-none})" "$work/midway-0.log"
  fi
  if [[ -n $(final "$work/midway-0/metrics.jsonl") ]] &&
      diff <(final "$work/midway-0/metrics.jsonl") <(final "$work/midway-1/metrics.jsonl") >"$work/midway.diff"; then
    check ok "islands 0 and 1 end with the same theta and phi, bit for bit: $(final "$work/midway-0/metrics.jsonl")"
  else
    check fail "the survivors' final state differs" "$work/midway.diff"
  fi
  kill -TERM $rendezvous
  wait $rendezvous
  # Nothing of the failed round was applied: the survivors trained as where island 2 sat out round 3 on.
  satout_reference
  if same_run "$work/satout-0/metrics.jsonl" "$work/midway-0/metrics.jsonl" "$work/midway-satout.diff" &&
      same_run "$work/satout-1/metrics.jsonl" "$work/midway-1/metrics.jsonl" "$work/midway-satout.diff"; then
    check ok "islands 0 and 1's losses, grad norms and validation are those of the run where island 2 sat out rounds 3 to 6, bit for bit"
  else
    check fail "the survivors against the run without island 2" "$work/midway-satout.diff"
  fi
fi

finish
