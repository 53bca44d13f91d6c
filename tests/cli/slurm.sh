#!/usr/bin/env bash
# `atoll launch --slurm` under a real Slurm (tests/cli/slurm_cluster.sh: Debian's slurmctld, slurmd
# and munge on this host, Slurm's default MpiDefault=none), each job submitted with sbatch as a user
# would, through the job script users copy (examples/slurm/train_cpu.sbatch):
#   - 4 ranks of the tiny config with checkpoints, started by srun with the pmix plugin the launcher
#     names: the same losses and the same checkpoint bytes as the job under mpirun;
#   - preemption through Slurm: `scancel --signal=TERM` reaches the ranks themselves (srun passes it
#     to every task); each finishes its step, one checkpoint is committed, the job ends 0; the job
#     submitted again resumes from it and ends bit for bit where an uninterrupted run ends;
#   - preemption through the batch shell (`scancel --batch`, as `--signal=B:TERM` sends it): atoll
#     launch passes it through srun as SIGUSR1, one checkpoint is committed, the job ends 0;
#   - a rank killed with kill -9 under srun --kill-on-bad-exit=1: the launcher relaunches through srun from the last checkpoint
#     (--max-restarts), and the job ends bit for bit where an uninterrupted run ends;
#   - bad input found by the ranks (a missing data file) in a job submitted with `--export=NONE`,
#     under which srun passes the ranks no environment variable: the attempt still reaches every
#     rank's supervisor (on its command line), the launcher names the failed rank's exit 2 and does
#     not relaunch despite --max-restarts 2, exit 2;
#   - two island jobs as two allocations meeting at an `atoll rendezvous`: bitwise the single-world run;
#   - a Slurm without the pmix plugin: one line naming what srun offers, exit 2.
# SLURM_SCENARIOS picks the cases (default all: parity preempt preemptbatch restart exportnone islands
# nopmix); CTest runs them as four entries of under a minute, each with a cluster of its own.
# Usage: slurm.sh ATOLL
set -u
atoll=$(realpath "$1")
examples=$(realpath "$(dirname "$0")/../../examples")
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_cluster.sh"
make_corpus "$atoll" "$work/data"
tiny_config "$work/tiny.yaml"
if ! start_slurm_cluster >"$work/cluster.log" 2>&1; then
  check fail "a private Slurm cluster starts" "$work/cluster.log"
  finish
  exit
fi

# sbatch_launch NAME SBATCH_ARGS... -- LAUNCH_ARGS...: the job script users copy,
# examples/slurm/train_cpu.sbatch, as it stands: `atoll launch CONFIG --slurm LAUNCH_ARGS` (CONFIG:
# $job_config, else tiny.yaml) into
# $work/NAME (output $work/NAME.out); prints the job id.
sbatch_launch() {
  local name=$1 sbatch_args=()
  shift
  while [[ $1 != -- ]]; do sbatch_args+=("$1"); shift; done
  shift
  ATOLL=$atoll sbatch --parsable "${sbatch_args[@]}" --chdir="$work" --output="$work/$name.out" \
    "$examples/slurm/train_cpu.sbatch" "${job_config:-$work/tiny.yaml}" --set run.dir="$work/$name" "$@"
}

wants() { [[ " ${SLURM_SCENARIOS:-parity preempt preemptbatch restart exportnone islands nopmix} " == *" $1 "* ]]; }

if wants parity; then
# 4 ranks, checkpoints at steps 4, 8 and 12: bitwise the job under mpirun.
job=(--set parallel.dp=4 --set train.global_batch=8 --set train.steps=12 --set checkpoint.every=4)
"$atoll" launch "$work/tiny.yaml" --mpirun "${job[@]}" --set run.dir="$work/ref" >"$work/ref.log" 2>&1
status=$(slurm_job_exit "$(sbatch_launch slurm4 --ntasks=4 -- "${job[@]}" 2>"$work/sbatch.err")")
if [[ $status -eq 0 ]] && grep -q "srun --ntasks=4 --kill-on-bad-exit=1 --mpi=pmix" "$work/slurm4.out" \
    && same_files "$work/ref/checkpoints/step-12" "$work/slurm4/checkpoints/step-12" \
    && [[ -n $(losses "$work/ref/metrics.jsonl") ]] && diff <(losses "$work/ref/metrics.jsonl") <(losses "$work/slurm4/metrics.jsonl") >/dev/null; then
  check ok "sbatch: 4 ranks from srun --mpi=pmix under MpiDefault=none; losses and step-12 bitwise equal to mpirun's"
else
  check fail "sbatch of atoll launch --slurm, 4 ranks (exit $status)" "$work/slurm4.out"
fi

fi

# The uninterrupted run the preempted and the restarted jobs must end at: a model large enough that a
# step takes ~20 ms here, not the tiny config's 1 ms (100 of those can end before a poll of
# metrics.jsonl acts on step 30 or 50 under load), and steps enough to leave 50 after step 50 for
# that poll to act in.
long_steps=100
long=(--set train.steps=$long_steps --set checkpoint.every=$long_steps --set model.dim=256 --set model.ffn=512
  --set model.seq=64 --set model.layers=2)
if wants preempt || wants restart; then
"$atoll" launch "$work/tiny.yaml" --mpirun "${long[@]}" --set run.dir="$work/whole" >"$work/whole.log" 2>&1
fi

# preempt_job NAME SIGNAL SCANCEL_ARGS...: the long run as job NAME (2 ranks), signalled with
# `scancel SCANCEL_ARGS JOBID` past step 30, waited for until it ends; sets $reached (the step
# metrics.jsonl records the preemption at, empty if none), $exit_code (the job's ` ExitCode=` in
# scontrol), $awaited (SIGNAL's name), $delivered (yes once SIGNAL was pending in the held rank,
# within 30 s) and $waited (the seconds from scancel to then).
# One rank is held (SIGSTOP) past step 30 until SIGNAL -- the number of the signal this case's ranks
# get -- is pending in it, so that however long the signal takes to arrive under load (slurmctld ->
# slurmd -> slurmstepd, and through atoll launch and srun when it goes to the batch shell), the job
# cannot end first: the other rank waits for the held one at its next collective.
preempt_job() {
  local name=$1 signal=$2 id held _
  shift 2
  awaited=SIG$(kill -l "$signal") delivered=no waited=-
  id=$(sbatch_launch "$name" --ntasks=2 -- "${long[@]}")
  for _ in $(seq 1 1200); do  # until step 30 is recorded (at most 60 s)
    grep -q '"step":30,' "$work/$name/metrics.jsonl" 2>/dev/null && break
    [[ -z $(slurm_job_state "$id") ]] && break
    sleep 0.05
  done
  held=$(pgrep -f "^[^ ]*atoll train $work/tiny.yaml --set run.dir=$work/$name" | head -1)
  if [[ -n $held ]]; then
    kill -STOP "$held"
    # SIGSTOP takes effect when the rank is next scheduled, not at once (at most 5 s).
    for _ in $(seq 1 100); do process_stopped "$held" && break; sleep 0.05; done
  fi
  local sent=$EPOCHREALTIME
  scancel "$@" "$id"
  if [[ -n $held ]]; then
    for _ in $(seq 1 300); do  # until the held rank has SIGNAL pending, or runs again (at most 30 s)
      signal_pending "$held" "$signal" && delivered=yes && break
      process_stopped "$held" || break
      sleep 0.1
    done
    waited=$(awk -v a="$sent" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    kill -CONT "$held"
  fi
  for _ in $(seq 1 600); do [[ -z $(slurm_job_state "$id") ]] && break; sleep 0.1; done  # at most 60 s
  reached=$(grep -o '"event":"preempted","step":[0-9]*' "$work/$name/metrics.jsonl" 2>/dev/null | grep -o '[0-9]*$')
  exit_code=$(scontrol show job "$id" 2>/dev/null | grep -o ' ExitCode=[0-9:]*' | head -1)
}

if wants preempt; then
# Preemption as `scancel --signal=TERM` sends it: to every process of the job's steps (not the batch
# shell), the ranks among them; then the job again.
preempt_job preempt "$(kill -l TERM)" --signal=TERM
if [[ $delivered == yes && -n $reached && $(latest_step "$work/preempt") == "$reached" && $exit_code == " ExitCode=0:0" ]] && ((reached < long_steps)) \
    && grep -q "preempted by SIGTERM at step $reached: .*step-$reached committed" "$work/preempt.out"; then
  check ok "scancel --signal=TERM: $awaited pending in the held rank after $waited s; the ranks stop at step $reached, step-$reached committed, the job ends 0"
else
  check fail "preemption through Slurm ($awaited pending in the held rank: $delivered after $waited s, reached '$reached',$exit_code)" "$work/preempt.out"
fi
mv "$work/preempt.out" "$work/preempt-first.out"
status=$(slurm_job_exit "$(sbatch_launch preempt --ntasks=2 -- "${long[@]}" 2>"$work/sbatch.err")")
if [[ $status -eq 0 ]] && grep -q "resumed from .*step-$reached at step $reached" "$work/preempt.out" \
    && same_files "$work/whole/checkpoints/step-$long_steps" "$work/preempt/checkpoints/step-$long_steps"; then
  check ok "the job submitted again resumes at step $reached and ends bitwise where the uninterrupted run ends"
else
  check fail "the resubmitted job (exit $status)" "$work/preempt.out"
fi
fi

if wants preemptbatch; then
# Preemption as the job script's `#SBATCH --signal=B:TERM@120` sends it: SIGTERM to the batch shell
# alone, which `exec` made atoll launch; it says so and passes it to srun as SIGUSR1 (srun's step
# would end at once on a SIGTERM), which srun passes to the ranks.
preempt_job preempt-batch "$(kill -l USR1)" --batch --signal=TERM
if [[ $delivered == yes && -n $reached && $(latest_step "$work/preempt-batch") == "$reached" && $exit_code == " ExitCode=0:0" ]] && ((reached < long_steps)) \
    && grep -q "^atoll launch: SIGTERM received: every rank finishes its step, commits a checkpoint and exits 0 (srun passes it to the ranks as SIGUSR1)$" "$work/preempt-batch.out" \
    && grep -q "preempted by SIGUSR1 at step $reached: .*step-$reached committed" "$work/preempt-batch.out"; then
  check ok "scancel --batch --signal=TERM (--signal=B:TERM): atoll launch passes it through srun as $awaited, pending in the held rank after $waited s; the ranks stop at step $reached, step-$reached committed, the job ends 0"
else
  check fail "preemption through the batch shell ($awaited pending in the held rank: $delivered after $waited s, reached '$reached',$exit_code)" "$work/preempt-batch.out"
fi
fi

if wants restart; then
# A rank killed with kill -9 inside the allocation, as a node lost under Slurm ends its ranks:
# srun --kill-on-bad-exit=1 ends the step's other ranks, atoll launch (the job script's
# --max-restarts 2) names the dead one, relaunches through srun from the last checkpoint, and the
# job ends where the uninterrupted run ends.
id=$(sbatch_launch restart --ntasks=2 -- "${long[@]}" --set checkpoint.every=20)
for _ in $(seq 1 1200); do  # until step 50 is recorded (at most 60 s)
  grep -q '"step":50,' "$work/restart/metrics.jsonl" 2>/dev/null && break
  [[ -z $(slurm_job_state "$id") ]] && break
  sleep 0.05
done
victim=$(pgrep -f "^[^ ]*atoll train $work/tiny.yaml --set run.dir=$work/restart" | sort -n | tail -1)
[[ -n $victim ]] && kill -9 "$victim"
for _ in $(seq 1 1200); do [[ -z $(slurm_job_state "$id") ]] && break; sleep 0.1; done
exit_code=$(scontrol show job "$id" 2>/dev/null | grep -o ' ExitCode=[0-9:]*' | head -1)
if [[ -n $victim && $exit_code == " ExitCode=0:0" ]] && grep -q "srun --ntasks=2 --kill-on-bad-exit=1 --mpi=pmix" "$work/restart.out" \
    && grep -q "was killed by signal 9 (SIGKILL)" "$work/restart.out" \
    && grep -q "restart 1 of 2" "$work/restart.out" && grep -q '"event":"restart"' "$work/restart/metrics.jsonl" \
    && same_files "$work/whole/checkpoints/step-$long_steps" "$work/restart/checkpoints/step-$long_steps"; then
  check ok "kill -9 of a rank (pid $victim) past step 50: relaunched through srun, final state bitwise equal to the uninterrupted run"
else
  check fail "restart through srun (victim '$victim',$exit_code)" "$work/restart.out"
fi
fi

if wants exportnone; then
# A job script of a cluster whose jobs start with --export=NONE: srun passes the ranks no variable
# of the launcher's. Every rank stops on bad input (data.train missing, which only the ranks read):
# each exit record must be the attempt's -- named for it, one attempt in all -- so that the launcher
# names the failed rank, exits 2 and does not relaunch (it would relaunch after a failure it could
# not name).
cat >"$work/exportnone.sbatch" <<SCRIPT
#!/bin/bash
#SBATCH --export=NONE
exec "$atoll" launch "$work/tiny.yaml" --slurm --max-restarts 2 --set run.dir="$work/exportnone" \
  --set data.train="$work/none.bin"
SCRIPT
status=$(slurm_job_exit "$(sbatch --parsable --ntasks=2 --chdir="$work" --output="$work/exportnone.out" \
  "$work/exportnone.sbatch" 2>"$work/sbatch.err")")
records=$(cd "$work/exportnone/logs" 2>/dev/null && ls -- *.exit 2>/dev/null | sed 's/^rank-[0-9]*\.//' | sort -u | paste -sd' ')
if [[ $status -eq $EXIT_BAD_INPUT && $records == attempt-*.0.exit ]] \
    && [[ $(cat "$work/exportnone/logs/"rank-*.exit | grep -c " code 2 time .* attempt [^ ]*\.0$") -eq 2 ]] \
    && grep -q "^atoll launch: the job failed: rank [01] (pid [0-9]* on .*) exited with code 2 " "$work/exportnone.out" \
    && grep -q "^atoll launch: not restarting: exit code 2 means bad input" "$work/exportnone.out" \
    && ! grep -q "restart 1 of" "$work/exportnone.out" \
    && [[ $(grep -c "data: $work/none.bin does not exist" "$work/exportnone/logs/rank-0.log") -eq 1 ]]; then
  check ok "sbatch --export=NONE, bad input in every rank: both exit records of attempt 0, the failed rank named, exit 2, no restart under --max-restarts 2"
else
  check fail "sbatch --export=NONE with bad input (exit $status, records '$records')" "$work/exportnone.out"
fi
fi

if wants islands; then
# Islands as two Slurm allocations: one sbatch job per island, meeting at an `atoll rendezvous`;
# island 0 logs what the same two islands log in one mpirun world, bit for bit.
island_config "$work/islands.yaml"
two_islands=(--set parallel.islands=2 --set train.global_batch=4)
"$atoll" launch "$work/islands.yaml" --mpirun "${two_islands[@]}" >"$work/islands-single.log" 2>&1
start_rendezvous "$atoll" "$work/rendezvous.log"
ids=()
for island in 0 1; do
  ids+=("$(job_config=$work/islands.yaml sbatch_launch "island-$island" --ntasks=1 -- "${two_islands[@]}" \
    --set outer.island=$island --set outer.rendezvous="127.0.0.1:$port" 2>/dev/null)")
done
statuses=()
for id in "${ids[@]}"; do statuses+=("$(slurm_job_exit "$id")"); done
kill "$rendezvous" 2>/dev/null
validation() { grep '"val_loss' "$1"; }
if [[ ${statuses[*]} == "0 0" ]] && same_run "$work/single/metrics.jsonl" "$work/island-0/metrics.jsonl" "$work/islands.diff"; then
  check ok "two island jobs as two sbatch allocations met at atoll rendezvous: island 0's losses and validation bitwise the single-world run's"
else
  check fail "island jobs under Slurm (exit ${statuses[*]})" "$work/island-0.out"
fi

fi

if wants nopmix; then
# A Slurm without the pmix plugin (the same cluster, its clients reading a plugin directory that
# lacks mpi_pmix*): atoll launch --slurm stops before srun with one line naming what srun offers, exit 2.
# The plugin directories are the running cluster's (slurm.conf names none, so they are the ones
# Slurm was built with: Debian's /usr/lib/<triplet>/slurm-wlm, /usr/lib64/slurm on RPM systems, a
# colon-separated list where a site has several), as slurmctld reports them, not a path of this host.
mkdir -p "$slurm_dir/plugins-without-pmix"
IFS=: read -ra plugin_dirs <<<"$(scontrol show config | awk '$1 == "PluginDir" {print $3}')"
for plugin_dir in "${plugin_dirs[@]}"; do
  for plugin in "$plugin_dir"/*; do
    [[ $(basename "$plugin") == mpi_pmix* ]] || ln -sf "$plugin" "$slurm_dir/plugins-without-pmix/"
  done
done
{ cat "$SLURM_CONF"; echo "PluginDir=$slurm_dir/plugins-without-pmix"; } >"$slurm_dir/without-pmix.conf"
# (salloc, whose command keeps the caller's SLURM_CONF: a batch job's is reset to slurmd's.)
SLURM_CONF=$slurm_dir/without-pmix.conf salloc --quiet --ntasks=2 \
  "$atoll" launch "$work/tiny.yaml" --slurm --set run.dir="$work/nopmix" >"$work/nopmix.out" 2>&1
status=$?
if [[ $status -eq $EXIT_BAD_INPUT && $(grep -c . "$work/nopmix.out") -eq 1 ]] \
    && grep -q "^atoll: error: --slurm: srun has no pmix MPI plugin (srun --mpi=list offers: none, cray_shasta, pmi2)" "$work/nopmix.out"; then
  check ok "a Slurm without pmix: one line naming what srun offers, exit 2 before any rank starts"
else
  check fail "a Slurm without pmix (exit $status, PluginDir '${plugin_dirs[*]}')" "$work/nopmix.out"
fi
fi
finish
