#!/usr/bin/env bash
# Islands as separate jobs (issue 19): three `atoll launch` jobs of one island each meet at
# `atoll rendezvous` on loopback and train DiLoCo with no MPI world among them. They log the same
# training losses, gradient norms and validation (each island's theta, phi) as the single-world run
# of the same config, bit for bit: the island-ordered fp32 mean is the same over TCP as over MPI.
# The island jobs stop at step 16 and resume from their own checkpoints: still bit for bit, and island
# jobs that would resume from different steps stop with one line, exit 2, before training.
# A job whose island never comes fails at outer.timeout_s with one line, exit 1, not a hang.
# With the job secret (atoll rendezvous --secret-file, outer.secret_file): the islands train bit for
# bit the same although one alters a chunk in flight (its receiver's HMAC check catches it, the
# exchange runs again); an island with another secret, or none, is refused with one line, exit 2;
# so is an island pointed at a rendezvous nobody serves.
# ISLAND_JOBS_SCENARIOS picks what runs (default both, one CTest entry each): resume (the jobs, their
# resume and the island that never comes) and secret (the job secret and the unreachable rendezvous).
# Usage: island_jobs.sh ATOLL_BIN
set -uo pipefail
atoll=$1
source "$(dirname "$0")/lib.sh"
scenarios=" ${ISLAND_JOBS_SCENARIOS:-resume secret} "

island_config "$work/islands.yaml"

# Every validation record; its islands' part (each island's theta, phi).
validation() { grep '"val_loss' "$1"; }
islands_validation() { sed -n 's/^{"step":\([0-9]*\),"val_loss":[^,]*,\(.*\)}$/\1 \2/p' "$1"; }

# Every run stops at step 16 and resumes to 24 (the schedule's length is part of the config); the
# secret's jobs run the first 16 steps.
timeout 300 "$atoll" launch "$work/islands.yaml" --set train.steps=16 >"$work/single.log" 2>&1 &&
  { [[ $scenarios != *" resume "* ]] || timeout 300 "$atoll" launch "$work/islands.yaml" >>"$work/single.log" 2>&1; }
[[ $? -eq 0 ]] && check ok "single-world reference: 3 islands in one mpirun, 16 steps (and resumed to 24)" ||
  check fail "single-world reference" "$work/single.log"

start_rendezvous "$atoll" "$work/rendezvous.log"
open_rendezvous=$rendezvous
# island_jobs LABEL ISLAND_2_OVERRIDE OVERRIDES...: one `atoll launch` per island (run directories
# $work/$run_dirs-ISLAND), island 2 with one more override ("" for none); $statuses: their exit codes.
run_dirs=island
island_jobs() {
  local label=$1 island_2_override=$2 island jobs=() extra
  shift 2
  for island in 0 1 2; do
    extra=()
    [[ $island == 2 && -n $island_2_override ]] && extra=(--set "$island_2_override")
    timeout 300 "$atoll" launch "$work/islands.yaml" --set run.dir="$work/$run_dirs-$island" \
      --set outer.rendezvous="127.0.0.1:$port" --set outer.island=$island "$@" "${extra[@]}" \
      >"$work/$label-$island.log" 2>&1 &
    jobs+=($!)
  done
  wait_for_jobs
}
if [[ $scenarios == *" resume "* ]]; then
  island_jobs first "" --set train.steps=16
  if [[ ${statuses[*]} == "0 0 0" ]] && grep -q "^rank .*island" "$work/$run_dirs-1/ranks.txt"; then
    check ok "three island jobs (one mpirun each) met at atoll rendezvous on port $port and ran 16 steps"
  else
    check fail "island jobs (exit ${statuses[*]})" "$work/first-1.log"
  fi

  # Island 2 is pointed at its step-8 checkpoint, the others take their newest (step 16).
  island_jobs mixed "checkpoint.resume=$work/island-2/checkpoints/step-8"
  if [[ ${statuses[*]} == "2 2 2" ]] && grep -q "checkpoint: the island jobs resumed from different steps (island 0 at step 16, island 1 at step 16, island 2 at step 8); resume every island from the same step" "$work/mixed-0.log"; then
    check ok "island jobs resuming from different steps (16, 16, 8) stop before training with one line, exit 2"
  else
    check fail "islands at different steps (exit ${statuses[*]})" "$work/mixed-0.log"
  fi
  island_jobs resumed ""
  if [[ ${statuses[*]} == "0 0 0" ]] && grep -q "checkpoint: resumed from .*step-16 at step 16" "$work/resumed-2.log"; then
    check ok "the three island jobs resumed from their own step-16 checkpoints and finished step 24"
  else
    check fail "island jobs' resume (exit ${statuses[*]})" "$work/resumed-2.log"
  fi
  if same_run "$work/single/metrics.jsonl" "$work/island-0/metrics.jsonl" "$work/loss.diff"; then
    check ok "island 0's job, stopped and resumed: $(losses "$work/single/metrics.jsonl" | wc -l) losses and grad norms, and every validation (theta, each island's, phi), bitwise those of the single-world run"
  else
    check fail "island 0's job differs from the single-world run" "$work/loss.diff"
  fi
  same=ok
  for island in 1 2; do
    diff <(islands_validation "$work/single/metrics.jsonl") <(islands_validation "$work/island-$island/metrics.jsonl") \
      >"$work/islands.diff" || same="island $island"
  done
  [[ $same == ok && -n $(islands_validation "$work/single/metrics.jsonl") ]] &&
    check ok "islands 1 and 2 log the same validation of every island's theta and of phi as the single-world run" ||
    check fail "validation of $same differs" "$work/islands.diff"

  # Islands 0 and 1 come, island 2 never does: both fail at outer.timeout_s (3 s) with one line.
  jobs=()
  for island in 0 1; do
    timeout 120 "$atoll" launch "$work/islands.yaml" --set run.dir="$work/alone-$island" --set outer.timeout_s=3 \
      --set outer.rendezvous="127.0.0.1:$port" --set outer.island=$island >"$work/alone-$island.log" 2>&1 &
    jobs+=($!)
  done
  wait_for_jobs
  if [[ ${statuses[*]} == "1 1" ]] && grep -q "outer rendezvous: round 0: 2 of the minimum 3 islands arrived within 3 s" "$work/alone-0.log"; then
    check ok "an island that never comes: the others stop at outer.timeout_s with one line, exit 1"
  else
    check fail "missing island (exit ${statuses[*]})" "$work/alone-0.log"
  fi
fi

if [[ $scenarios == *" secret "* ]]; then

  # The job secret: a rendezvous that admits only islands proving it. Three island jobs holding it, one
  # of which alters a byte of its first chunk in flight (ATOLL_FAULT corrupt_chunk@1:1): the receiver's
  # HMAC check catches it, the exchange runs again, and the islands train bit for bit as the single world.
  od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$work/secret"
  od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$work/other-secret"
  chmod 600 "$work/secret" "$work/other-secret"
  start_rendezvous "$atoll" "$work/rendezvous-secret.log" --secret-file "$work/secret"
  guarded=$rendezvous
  first16() { awk '$1 <= 16'; }
  run_dirs=secret
  ATOLL_FAULT=corrupt_chunk@1:1 island_jobs secret "" --set train.steps=16 --set outer.secret_file="$work/secret"
  if [[ ${statuses[*]} == "0 0 0" ]] &&
      grep -q "atoll: outer exchange: a chunk island 1 sent to island 0 failed its HMAC check (altered in flight, or not made with the job's secret); it was not averaged in" "$work/secret-0.log"; then
    check ok "three island jobs holding the job secret: a chunk altered in flight was caught by its HMAC at island 0, not averaged in, and the exchange ran again"
  else
    check fail "island jobs with the secret and an altered chunk (exit ${statuses[*]})" "$work/secret-0.log"
  fi
  if [[ -n $(losses "$work/secret-0/metrics.jsonl") ]] &&
      diff <(losses "$work/single/metrics.jsonl" | first16) <(losses "$work/secret-0/metrics.jsonl") >"$work/secret.diff" &&
      diff <(islands_validation "$work/single/metrics.jsonl" | first16) <(islands_validation "$work/secret-2/metrics.jsonl") >>"$work/secret.diff"; then
    check ok "with the secret and the altered chunk: 16 steps' losses and every island's and phi's validation bitwise the single world's"
  else
    check fail "the authenticated island jobs differ from the single-world run" "$work/secret.diff"
  fi
  # An island with another secret, and one with none, are refused at the rendezvous: one line, exit 2.
  timeout 60 "$atoll" launch "$work/islands.yaml" --set run.dir="$work/refused" --set outer.rendezvous="127.0.0.1:$port" \
    --set outer.island=2 --set outer.secret_file="$work/other-secret" >"$work/refused.log" 2>&1
  status=$?
  if [[ $status -eq 2 ]] && grep -q "outer.rendezvous 127.0.0.1:$port refused island 2: its outer.secret_file $work/other-secret is not the job's secret; copy the secret file the other islands use" "$work/refused.log"; then
    check ok "an island with another secret is refused at the rendezvous with one line, exit 2"
  else
    check fail "island with another secret (exit $status)" "$work/refused.log"
  fi
  timeout 60 "$atoll" launch "$work/islands.yaml" --set run.dir="$work/refused" --set outer.rendezvous="127.0.0.1:$port" \
    --set outer.island=2 >"$work/no-secret.log" 2>&1
  status=$?
  if [[ $status -eq 2 ]] && grep -q "refused island 2: this job's islands prove a job secret; set outer.secret_file" "$work/no-secret.log"; then
    check ok "an island without the secret is refused at the rendezvous with one line, exit 2"
  else
    check fail "island without a secret (exit $status)" "$work/no-secret.log"
  fi
  kill -TERM $guarded
  wait $guarded

  # A rendezvous nobody serves: one line naming it, exit 2, at outer.timeout_s.
  timeout 60 "$atoll" launch "$work/islands.yaml" --set run.dir="$work/unreachable" --set outer.rendezvous=127.0.0.1:1 \
    --set outer.island=0 --set outer.timeout_s=2 >"$work/unreachable.log" 2>&1
  status=$?
  if [[ $status -eq 2 ]] && grep -q "outer.rendezvous 127.0.0.1:1 could not be reached within 2 s (Connection refused); start it with \`atoll rendezvous --port 1\` or fix the address" "$work/unreachable.log" &&
      ! grep -q "Exception raised from" "$work/unreachable.log"; then
    check ok "an unreachable rendezvous: one line naming it (no c10d stack trace), exit 2"
  else
    check fail "unreachable rendezvous (exit $status)" "$work/unreachable.log"
  fi
fi

kill -TERM $open_rendezvous
wait $open_rendezvous
[[ $? -eq 0 ]] && check ok "atoll rendezvous stops on SIGTERM with exit 0" || check fail "rendezvous stop" "$work/rendezvous.log"
finish
