#!/usr/bin/env bash
# Operations end to end, with real processes, signals and files (issue: launcher, restarts,
# preemption, watchdog, non-finite steps, TensorBoard):
#   restart    kill -9 of one rank at a random step under --max-restarts 2: the job completes, and its
#              final checkpoint equals an uninterrupted run's bit for bit; TensorBoard files of the
#              restarted run parse back (CRCs) and equal metrics.jsonl, atoll report sums it up, and a
#              damaged record is named
#   preempt    SIGTERM to the launcher mid-run: exit 0, a committed checkpoint of the step reached, and
#              a relaunch (resume: auto) continues from it to the same final state
#   insist     a second SIGTERM to the launcher 1.5 s after the first kills at once
#   stale      exit records of another attempt, and one of this attempt from a clock 100 s behind,
#              written into a healthy job's logs/: the job is not ended, and ends 0 when preempted
#   deaf       an mpirun that does not end its ranks, hung ranks and a failure on record:
#              the launcher ends the attempt and no old rank is alive when it relaunches
#   deafexit   the same without a restart: it exits with the recorded rank's code, no rank left alive
#   watchdog   a rank that skips its collectives: every rank exits within 2x comm.timeout_s, each
#              dumps its flight records, and rank 0 names the laggard
#   nonfinite  NaN gradients at step 3: skip drops exactly that update; stop commits step 2 and exits 3
#   launchers  the --hostfile and Slurm command lines, and --hostfile for real
#   plainlog   plain `mpirun ... atoll train | file` holds no carriage return or escape code
# OPS_SCENARIOS picks the cases (default all); CTest runs them as several entries of under a minute
# (tests/CMakeLists.txt).
# Usage: operations.sh ATOLL_BIN
set -uo pipefail
atoll=$1
source "$(dirname "$0")/lib.sh"
wants() { [[ " ${OPS_SCENARIOS:-restart preempt insist stale deaf deafexit watchdog nonfinite launchers plainlog} " == *" $1 "* ]]; }

make_corpus "$atoll" "$work/data"
cat >"$work/ops.yaml" <<YAML
run:        { dir: $work/run, seed: 5, threads: 1, mfu_peak_tflops: 1 }
model:      { vocab: 256, dim: 32, layers: 2, heads: 2, kv_heads: 2, ffn: 64, seq: 16 }
parallel:   { dp: 2, zero: 1 }
train:      { steps: 300, global_batch: 4, log_every: 50, eval_every: 0 }
optim:      { lr: 1.0e-3, min_lr: 1.0e-4, warmup: 5 }
data:       { train: $work/data/train.bin, val: $work/data/val.bin }
checkpoint: { every: 10, keep: 2 }
comm:       { timeout_s: 3 }
YAML

if wants restart || wants preempt; then
# The reference: the same job, uninterrupted.
timeout 300 "$atoll" launch "$work/ops.yaml" --set run.dir="$work/ref" >"$work/ref.log" 2>&1
[[ $? -eq 0 && -d $work/ref/checkpoints/step-300 ]] && check ok "reference run" || check fail "reference run" "$work/ref.log"
fi

if wants restart; then
# restart: one rank killed with SIGKILL once the job is past a random step. The step and the rank
# come from a seed the result line names (OPS_SEED=N reruns the same choice). The step is at most
# 129 of 300: a step takes ~1.5 ms here, so at least 170 are left for the poll below to act in.
seed=${OPS_SEED:-$$}
RANDOM=$seed
kill_at=$((RANDOM % 100 + 30))
timeout 300 "$atoll" launch "$work/ops.yaml" --set run.dir="$work/restart" --max-restarts 2 >"$work/restart.log" 2>&1 &
job=$!
until grep -q "\"step\":$kill_at," "$work/restart/metrics.jsonl" 2>/dev/null || ! kill -0 $job 2>/dev/null; do sleep 0.05; done
ranks=($(pgrep -f "^[^ ]*atoll train $work/ops.yaml.*run.dir=$work/restart" | sort -n))
victim=${ranks[RANDOM % (${#ranks[@]} > 0 ? ${#ranks[@]} : 1)]:-}
kill -9 "$victim"
wait $job
status=$?
if [[ $status -eq 0 ]] && grep -q "was killed by signal 9 (SIGKILL)" "$work/restart.log" && grep -q "restart 1 of 2" "$work/restart.log" \
    && grep -q '"event":"restart"' "$work/restart/metrics.jsonl" && same_files "$work/ref/checkpoints/step-300" "$work/restart/checkpoints/step-300"; then
  check ok "restart: kill -9 of pid $victim past step $kill_at (OPS_SEED=$seed), relaunched, final state bitwise equal to the uninterrupted run"
else
  check fail "restart (exit $status, kill past step $kill_at, OPS_SEED=$seed)" "$work/restart.log"
fi
fi

if wants preempt; then
# preempt: SIGTERM to the launcher; then resume to the end.
"$atoll" launch "$work/ops.yaml" --set run.dir="$work/preempt" >"$work/preempt.log" 2>&1 &
job=$!
until grep -q '"step":60,' "$work/preempt/metrics.jsonl" 2>/dev/null || ! kill -0 $job 2>/dev/null; do sleep 0.05; done
kill -TERM $job
wait $job
status=$?
reached=$(grep -o '"event":"preempted","step":[0-9]*' "$work/preempt/metrics.jsonl" | grep -o '[0-9]*$')
if [[ $status -eq 0 && -n $reached && $(latest_step "$work/preempt") == "$reached" ]] && (( reached < 300 )) \
    && grep -q "preempted by SIGUSR1 at step $reached: .*step-$reached committed" "$work/preempt.log" \
    && grep -q "^atoll launch: SIGTERM received: every rank finishes its step, commits a checkpoint and exits 0 (mpirun passes it to the ranks as SIGUSR1)$" "$work/preempt.log" \
    && "$atoll" ckpt inspect "$work/preempt/checkpoints/step-$reached" >/dev/null; then
  check ok "preempt: SIGTERM at step $reached, exit 0, step-$reached committed and verified"
else
  check fail "preempt (exit $status, reached '$reached')" "$work/preempt.log"
fi
timeout 300 "$atoll" launch "$work/ops.yaml" --set run.dir="$work/preempt" >"$work/resume.log" 2>&1
if [[ $? -eq 0 ]] && grep -q "resumed from .*step-$reached at step $reached" "$work/resume.log" \
    && same_files "$work/ref/checkpoints/step-300" "$work/preempt/checkpoints/step-300"; then
  check ok "preempt: resume: auto continues from step $reached to the uninterrupted run's final state"
else
  check fail "preempt: resume" "$work/resume.log"
fi
fi

if wants insist; then
# preempt, insisting: a second SIGTERM to the launcher later than 1 s after the first kills at once
# (runtime/preemption.cpp: the same signal within 1 s is the same request). One rank is held with
# SIGSTOP past step 20, so the other cannot finish the step the first request asks for; 1.5 s later
# (the interval under test) the second request arrives and the other rank dies of it: its record
# says SIGUSR1 (what the launcher forwards), atoll launch exits 138 (128 + 10) within seconds, long
# before comm.timeout_s (60) would end the wait, and no preemption is recorded.
"$atoll" launch "$work/ops.yaml" --set run.dir="$work/insist" --set train.steps=100000 --set comm.timeout_s=60 >"$work/insist.log" 2>&1 &
job=$!
until grep -q '"step":20,' "$work/insist/metrics.jsonl" 2>/dev/null || ! kill -0 $job 2>/dev/null; do sleep 0.05; done
held=$(pgrep -f "^[^ ]*atoll train $work/ops.yaml.*run.dir=$work/insist" | head -1)
kill -STOP "$held"
kill -TERM $job
sleep 1.5
kill -TERM $job
second=$(date +%s.%N)
wait $job
status=$?
took=$(awk -v a="$second" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
killed=$(grep -v " pid $held " "$work/insist/logs/"rank-*.exit 2>/dev/null | grep -c " signal 10 ")
if [[ -n $held && $status -eq 138 && $killed -eq 1 ]] && awk -v t="$took" 'BEGIN { exit !(t < 10) }' \
    && ! grep -q '"event":"preempted"' "$work/insist/metrics.jsonl"; then
  check ok "preempt: a second SIGTERM 1.5 s after the first kills at once: the running rank dies of SIGUSR1, exit 138 after $took s"
else
  check fail "preempt: second SIGTERM (exit $status, $killed rank killed by SIGUSR1, $took s)" "$work/insist.log"
fi
kill -KILL "$held" 2>/dev/null
fi

# alive PID...: whether any of the processes lives (a zombie does not).
alive() {
  local pid state
  for pid; do
    state=$(ps -o stat= -p "$pid" 2>/dev/null)
    [[ -n $state && $state != Z* ]] && return 0
  done
  return 1
}

# deaf_job NAME MAX_RESTARTS: `atoll launch` of ranks that ignore SIGTERM
# (ATOLL_FAULT=ignore_sigterm) into $work/NAME, in the background ($job), ended 4 s after a failure
# is on record (--failure-grace; 20 s by default).
deaf_job() {
  ATOLL_FAULT=ignore_sigterm "$atoll" launch "$work/ops.yaml" --set run.dir="$work/$1" --set train.steps=1000000 \
    --set train.log_every=100000 --set checkpoint.every=500 --set comm.timeout_s=600 --max-restarts "$2" \
    --failure-grace 4 >"$work/$1.log" 2>&1 &
  job=$!
}
# attempt_started NAME N: waits until attempt N of job NAME has started and both its ranks recorded
# their processes; sets $attempt and $old (each rank's supervisor and trainer pids, rank 0's first).
attempt_started() {
  until [[ $(grep -c '"event":"start"' "$work/$1/metrics.jsonl" 2>/dev/null) -gt $2 && \
           $(cat "$work/$1/logs/"rank-*.attempt-*.$2.pids 2>/dev/null | grep -c "^rank [01] attempt [^ ]*\.$2 ") -eq 2 ]] \
        || ! kill -0 $job 2>/dev/null; do sleep 0.05; done
  attempt=$(cat "$work/$1/logs/"rank-0.attempt-*.$2.pids 2>/dev/null | awk '{ print $4 }')
  mapfile -t old < <(cat "$work/$1/logs/"rank-*.attempt-*.$2.pids 2>/dev/null | awk '{ print $8; print $12 }')
}
# hang_with_failure NAME: job NAME's mpirun held with SIGSTOP, as one waiting on a node it cannot
# reach, its ranks hung as well (SIGSTOP: a running Open MPI rank ends by itself within seconds of
# its mpirun's end, and would hide whether the launcher ends it), and rank 1's exit 4 on record for
# the attempt, as a partitioned node's watchdog leaves it.
hang_with_failure() {
  kill -STOP "$(pgrep -P $job)" "${old[1]:-}" "${old[3]:-}"
  printf 'rank 1 pid %s host %s code 4 time %s attempt %s\n' "${old[3]:-0}" "$(hostname)" "$(date +%s)" "$attempt" \
    >"$work/$1/logs/rank-1.attempt-$attempt.exit"
}

if wants stale; then
# stale: past step 20 of a healthy job, exit records land in its logs/ that are not this attempt's
# failures -- one of another attempt (a rank of the previous attempt that ended late, or a
# partitioned node's write reaching the shared filesystem after the relaunch), one without an
# attempt (a supervisor from before attempts were named) -- and, for 3 s, one of this attempt whose
# time, 100 s ago, another host's clock wrote. The launcher reads the records once a second: it must
# not end the job over the last before --failure-grace (6 s) of its own clock have passed since it
# first read it, nor ever take the first two for a failure: 11 s later the job is still running, and
# a SIGTERM to the launcher preempts it, exit 0.
"$atoll" launch "$work/ops.yaml" --set run.dir="$work/stale" --set train.steps=1000000 --set train.log_every=100000 \
  --set checkpoint.every=0 --failure-grace 6 >"$work/stale.log" 2>&1 &
job=$!
until grep -q '"step":20,' "$work/stale/metrics.jsonl" 2>/dev/null || ! kill -0 $job 2>/dev/null; do sleep 0.05; done
attempt=$(cat "$work/stale/logs/"rank-0.attempt-*.pids 2>/dev/null | awk '$3 == "attempt" { print $4 }')
past=$(($(date +%s) - 100))
printf 'rank 1 pid 1 host elsewhere code 1 time %s attempt 1-1.0\n' "$past" >"$work/stale/logs/rank-1.attempt-1-1.0.exit"
printf 'rank 2 pid 2 host elsewhere signal 9 time %s\n' "$past" >"$work/stale/logs/rank-2.exit"
printf 'rank 3 pid 3 host elsewhere code 4 time %s attempt %s\n' "$past" "$attempt" >"$work/stale/logs/rank-3.attempt-$attempt.exit"
sleep 3
kill -0 $job 2>/dev/null && skewed=running || skewed=ended
rm -f "$work/stale/logs/rank-3.attempt-$attempt.exit"
sleep 8
kill -TERM $job
wait $job
status=$?
if [[ $status -eq 0 && -n $attempt && $skewed == running ]] && grep -q "preempted by SIGUSR1 at step" "$work/stale.log" \
    && ! grep -q "the job failed" "$work/stale.log"; then
  check ok "stale: a record of this attempt from a clock 100 s behind did not end the job within 3 s, records of another attempt and of none not within 11 s (--failure-grace 6); preempted, exit 0"
else
  check fail "stale (exit $status, attempt '$attempt', $skewed 3 s after the skewed record)" "$work/stale.log"
fi
fi

if wants deaf; then
# deaf: mpirun and its ranks held (hang_with_failure), the ranks deaf to SIGTERM as well, and a
# failure of this attempt on record, under --max-restarts 1. 4 s (--failure-grace) after it read the record the launcher ends the attempt:
# SIGTERM, then 5 s later SIGKILL to mpirun and to every rank's process group. When it says "restart
# 1 of 1" no process of the first attempt may be alive (its ranks and their supervisors, from their
# rank-N.attempt-A.pids). The relaunch has nothing more to prove and is ended sooner: kill -9 of one
# of its ranks, over which mpirun ends the job; the launcher names it, gives up after its one restart
# and exits 137 with no process of that attempt alive either.
deaf_job deaf 1
left=""
attempt_started deaf 0
hang_with_failure deaf
until grep -q "restart 1 of 1" "$work/deaf.log" || ! kill -0 $job 2>/dev/null; do sleep 0.05; done
alive "${old[@]}" && left+=" attempt 0: ${old[*]}"
attempt_started deaf 1
victim=${old[3]:-}
[[ -n $victim ]] && kill -9 "$victim"
wait $job
status=$?
alive "${old[@]}" && left+=" attempt 1: ${old[*]}"
if [[ -n $victim && $status -eq $EXIT_SIGKILL && -z $left ]] \
    && grep -q "mpirun had not ended 4 s after rank 1 failed (a node it cannot reach?); ended it" "$work/deaf.log" \
    && grep -q "restart 1 of 1" "$work/deaf.log" && grep -q "rank 1 (pid $victim on .*) was killed by signal 9" "$work/deaf.log" \
    && grep -q "giving up after 1 restart(s)" "$work/deaf.log"; then
  check ok "deaf: mpirun and ranks held: the attempt ended and no rank of it alive when the launcher relaunched; the relaunch's kill -9 named, given up, no rank left"
else
  check fail "deaf (exit $status, victim '$victim', alive:${left:- none})" "$work/deaf.log"
fi
fi

if wants deafexit; then
# deafexit: the same held mpirun and ranks and failure on record without a restart: the launcher
# ends the attempt 4 s (--failure-grace) after it read the record, leaves no process of it alive, and exits 4, the
# recorded rank's code, not the 137 of the mpirun it killed.
deaf_job deafexit 0
attempt_started deafexit 0
hang_with_failure deafexit
wait $job
status=$?
left=""
alive "${old[@]}" && left=" ${old[*]}"
if [[ $status -eq $EXIT_HANG && -z $left ]] \
    && grep -q "mpirun had not ended 4 s after rank 1 failed (a node it cannot reach?); ended it" "$work/deafexit.log" \
    && grep -q "the job failed: rank 1 (pid ${old[3]:-} on .*) exited with code 4" "$work/deafexit.log"; then
  check ok "deafexit: mpirun and ranks held: the attempt ended with no rank left alive; exit 4 (the recorded rank's), not mpirun's 137"
else
  check fail "deafexit (exit $status, alive:${left:- none})" "$work/deafexit.log"
fi
fi

if wants watchdog; then
# watchdog: rank 1 of 4 skips the collectives of step 4 (comm.timeout_s = 3).
start=$(date +%s.%N)
ATOLL_FAULT=skip_collective@1:4 timeout 60 mpirun --oversubscribe -np 4 -x ATOLL_FAULT "$atoll" train "$work/ops.yaml" \
  --set run.dir="$work/hang" --set parallel.dp=4 >"$work/hang.log" 2>&1
status=$?
end=$(date +%s.%N)
hang_began=$(stat -c %.9Y "$work/hang/metrics.jsonl")  # the last step record, written before step 4 began
dumps=$(ls "$work/hang/flight" 2>/dev/null | grep -c '^rank-[0-3].json$')
# The wait the watchdog measured in the ranks: never under the timeout (it must not fire early).
waited=$(grep -o 'has waited [0-9.]* s (comm.timeout_s = 3.0 s)' "$work/hang.log" | head -1 | grep -o '[0-9.]* s (' | grep -o '^[0-9.]*')
if [[ $status -eq $EXIT_HANG && $dumps -eq 4 && -n $waited ]] && grep -q "rank 1 is behind: it issued" "$work/hang.log" \
    && [[ $(grep -c "is behind" "$work/hang.log") -eq 1 ]] && awk -v w="$waited" 'BEGIN { exit !(w >= 3) }' \
    && awk -v a="$hang_began" -v b="$end" 'BEGIN { exit !(b - a < 6) }'; then
  check ok "watchdog: fired after $waited s waited, all ranks gone $(awk -v a="$hang_began" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s after the hang (timeout 3 s), 4 dumps, laggard named"
else
  check fail "watchdog (exit $status, $dumps dumps, waited '$waited', $(awk -v a="$hang_began" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s)" "$work/hang.log"
fi
fi

if wants nonfinite; then
# nonfinite: skip.
ATOLL_FAULT=nan_gradient@3 timeout 120 mpirun --oversubscribe -np 2 -x ATOLL_FAULT "$atoll" train "$work/ops.yaml" --set run.dir="$work/skip" \
  --set train.steps=5 --set checkpoint.every=1 --set checkpoint.keep=9 --set train.on_nonfinite=skip >"$work/skip.log" 2>&1
status=$?
"$atoll" ckpt export "$work/skip/checkpoints/step-2" --out "$work/skip2.safetensors" >/dev/null
"$atoll" ckpt export "$work/skip/checkpoints/step-3" --out "$work/skip3.safetensors" >/dev/null
"$atoll" ckpt export "$work/skip/checkpoints/step-4" --out "$work/skip4.safetensors" >/dev/null
if [[ $status -eq 0 && $(grep -c '"skipped":1' "$work/skip/metrics.jsonl") -eq 1 ]] && grep -q '"step":3,.*"skipped":1' "$work/skip/metrics.jsonl" \
    && cmp -s "$work/skip2.safetensors" "$work/skip3.safetensors" && ! cmp -s "$work/skip3.safetensors" "$work/skip4.safetensors" \
    && grep -q "step 3: non-finite loss or gradient .*update skipped (1 skipped so far)" "$work/skip.log"; then
  check ok "nonfinite skip: exactly step 3's update skipped (weights after 3 == after 2), training goes on"
else
  check fail "nonfinite skip (exit $status)" "$work/skip.log"
fi

# nonfinite: stop.
ATOLL_FAULT=nan_gradient@3 timeout 120 mpirun --oversubscribe -np 2 -x ATOLL_FAULT "$atoll" train "$work/ops.yaml" --set run.dir="$work/stop" \
  --set train.steps=5 --set checkpoint.every=0 >"$work/stop.log" 2>&1
status=$?
if [[ $status -eq $EXIT_NONFINITE && $(grep -c "non-finite loss or gradient .*committed .*step-2 with the state before it" "$work/stop.log") -eq 1 \
      && $(latest_step "$work/stop") == 2 ]] && "$atoll" ckpt inspect "$work/stop/checkpoints/step-2" >/dev/null; then
  check ok "nonfinite stop: one message, exit $status, step-2 committed and verified"
else
  check fail "nonfinite stop (exit $status)" "$work/stop.log"
fi
fi

if wants restart; then
# report and TensorBoard, on the restarted run (two event files, replayed steps).
"$atoll" report "$work/restart" >"$work/report.log" 2>&1
if [[ $? -eq 0 ]] && grep -q "every record's CRCs verified; train/loss equals metrics.jsonl at all 300 steps" "$work/report.log" \
    && grep -q "^restarts  *1" "$work/report.log" && grep -q "</svg>" "$work/restart/loss.svg"; then
  check ok "report: TensorBoard files verified against metrics.jsonl, 1 restart, loss.svg"
else
  check fail "report" "$work/report.log"
fi
# A flipped byte in an event file is caught by its CRC.
tb=$(ls "$work/ref/tb"/events.out.tfevents.* | head -1)
printf '\xff' | dd of="$tb" bs=1 seek=200 conv=notrunc status=none
"$atoll" report "$work/ref" >"$work/report_bad.log" 2>&1
if [[ $? -eq 1 ]] && grep -q "bad .*CRC" "$work/report_bad.log"; then
  check ok "report: a damaged TensorBoard record is named by its CRC"
else
  check fail "report: damaged TensorBoard file" "$work/report_bad.log"
fi
fi

if wants launchers; then
# Launcher modes, printed without running: a hostfile, and Slurm inside an allocation.
echo "localhost slots=4" >"$work/hosts"
if "$atoll" launch "$work/ops.yaml" --hostfile "$work/hosts" --dry-run | grep -q "mpirun -np 2 .*--hostfile $work/hosts .*/atoll-supervise --attempt [0-9]*-[0-9]*\.0 $work/run -- .* train" \
    && SLURM_JOB_ID=7 SLURM_MPI_TYPE=pmix "$atoll" launch "$work/ops.yaml" --dry-run | grep -q "srun --ntasks=2 --kill-on-bad-exit=1 --mpi=pmix .*/atoll-supervise --attempt [0-9]*-[0-9]*\.0 "; then
  check ok "launch modes: --hostfile passes the file to mpirun; SLURM_JOB_ID selects srun --ntasks=2; each rank's supervisor is told the attempt"
else
  check fail "launch modes"
fi
# The hostfile mode for real: this host from a hostfile.
timeout 120 "$atoll" launch "$work/ops.yaml" --hostfile "$work/hosts" --set run.dir="$work/hostfile" --set train.steps=4 \
  --set checkpoint.every=0 >"$work/hostfile.log" 2>&1
if [[ $? -eq 0 && -s $work/hostfile/logs/rank-0.log ]] && grep -q "^step *4/4" "$work/hostfile/logs/rank-0.log" \
    && grep -q " code 0 time .* attempt [^ ]*\.0$" "$work/hostfile/logs/"rank-1.attempt-*.0.exit; then
  check ok "launch --hostfile: runs, per-rank logs and exit records in <run dir>/logs"
else
  check fail "launch --hostfile" "$work/hostfile.log"
fi
fi

if wants plainlog; then
# plain-log: plain `mpirun ... atoll train | tee` writes no terminal control codes into the file,
# although Open MPI gives each rank a pseudo-terminal for its stdout; `atoll launch` on a terminal
# asks for the bar with ATOLL_PROGRESS=bar, and a rank draws one only then.
timeout 120 mpirun --oversubscribe -np 2 "$atoll" train "$work/ops.yaml" --set run.dir="$work/plain" \
  --set train.steps=12 --set train.log_every=4 --set checkpoint.every=0 2>&1 | cat >"$work/plain.log"
status=${PIPESTATUS[0]}
controls=$(LC_ALL=C grep -c $'[\r\033]' "$work/plain.log")
if [[ $status -eq 0 && $controls -eq 0 ]] && grep -q "step    12/12" "$work/plain.log"; then
  check ok "plain-log: mpirun | file holds progress lines and no carriage return or escape code"
else
  check fail "plain-log (exit $status, $controls lines with control codes)" "$work/plain.log"
fi
fi

finish
