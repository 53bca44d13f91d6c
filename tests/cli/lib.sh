# Shared by the CLI test scripts (source it): a work directory removed on exit with any process still
# running in it, the environment mpirun needs as root, PASS/FAIL counting and the closing tally, the
# exit codes of `atoll train` and a small text corpus. KEEP_WORK=1 keeps the work directory to read.
work=$(mktemp -d)
trap 'pkill -KILL -f "$work" 2>/dev/null; rm -rf "$work"' EXIT
[[ -n ${KEEP_WORK:-} ]] && trap "echo kept \$work" EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# Open MPI's session files (every mpirun, singleton rank and Slurm job step of this script) in a
# TMPDIR of the script's own: Open MPI 4 keeps them under one per-user directory there, which the
# last job to end removes, and an mpirun starting in that instant fails orte_init ("mkdir ... File
# exists"; seen in CI, in bad_input.sh, whose cases run side by side and so have one each as well).
export TMPDIR=$work/tmp
mkdir -p "$TMPDIR"
passed=0
failed=0

# The exit codes of `atoll train` (runtime/process_exit.h), which mpirun passes on.
EXIT_BAD_INPUT=2
EXIT_NONFINITE=3
EXIT_HANG=4
EXIT_SIGKILL=137  # a job whose rank was killed with SIGKILL (128 + 9), as mpirun reports it

# check ok|fail DESCRIPTION [LOG]: counts the case; on failure shows the end of LOG. Each line ends
# with the seconds since the previous one (since the start for the first), so that a slow script's
# log says which of its cases the time went to.
last_check=$EPOCHREALTIME
check() {
  local took
  took=$(awk -v now="$EPOCHREALTIME" -v then="$last_check" 'BEGIN { printf "%.1f", now - then }')
  last_check=$EPOCHREALTIME
  if [[ $1 == ok ]]; then
    passed=$((passed + 1)); echo "PASS $2 [${took} s]"
  else
    failed=$((failed + 1)); echo "FAIL $2 [${took} s]"; [[ -n ${3:-} && -f ${3:-} ]] && grep -v '^[|+]' "$3" | tail -15 | sed 's/^/    /'
  fi
  return 0
}

finish() {  # the tally; the script's status is whether every case passed (and any ran at all)
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 && $passed -gt 0 ]]
}

make_corpus() {  # make_corpus ATOLL DIR: a small repetitive text, byte-tokenized into DIR/{train,val}.bin
  local i
  for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog; a stitch in time saves nine."; done >"$work/text.txt"
  "$1" data prepare --out "$2" --val-fraction 0.1 "$work/text.txt" >/dev/null
}

# tiny_config FILE: the small 2-rank config of the `atoll` command's checks (DP = 2, 6 steps, run.dir
# $work/run) over make_corpus's data in $work/data; the checks vary it with --set. The test configs
# give the MFU peak (run.mfu_peak_tflops): no half-second matmul probe on every rank at start-up.
tiny_config() {
  cat >"$1" <<YAML
run:      { dir: $work/run, seed: 3, threads: 1, mfu_peak_tflops: 1 }
model:    { vocab: 256, dim: 32, layers: 1, heads: 2, kv_heads: 2, ffn: 64, seq: 16 }
parallel: { dp: 2 }
train:    { steps: 6, global_batch: 4, log_every: 2, eval_every: 3, eval_sequences: 4 }
optim:    { lr: 1.0e-3, min_lr: 1.0e-4, warmup: 1 }
data:     { train: $work/data/train.bin, val: $work/data/val.bin }
YAML
}

# Where island jobs and the rendezvous run: here, on loopback; tests/cli/netns.sh's use_island_links
# moves each island into a network namespace of its own on a shaped link, the rendezvous to the hub.
rendezvous_host=127.0.0.1
island_exec() { shift; "$@"; }  # island_exec ISLAND CMD...: CMD where island ISLAND runs
hub_prefix=()                   # what runs a command where the rendezvous runs (a command, not a
                                # function: the rendezvous's pid is the process SIGTERM must reach)

start_rendezvous() {  # start_rendezvous ATOLL LOG [ARGS...]: `atoll rendezvous` on a free port; sets $rendezvous, $port
  local atoll=$1 log=$2
  shift 2
  "${hub_prefix[@]}" "$atoll" rendezvous --port 0 "$@" >"$log" 2>&1 &
  rendezvous=$!
  for _ in $(seq 1 250); do grep -q "serving islands on port" "$log" && break; sleep 0.02; done
  port=$(sed -n 's/.*serving islands on port \([0-9]*\) .*/\1/p' "$log")
}

# island_config FILE: three islands of one rank (DiLoCo, H = 4, 24 steps, checkpoints every 8,
# run.dir $work/single), for the island-job scripts; they override what they vary with --set.
island_config() {
  make_corpus "$atoll" "$work/data"
  cat >"$1" <<YAML
run:        { dir: $work/single, seed: 3, threads: 1, mfu_peak_tflops: 1 }
model:      { vocab: 256, dim: 32, layers: 2, heads: 2, kv_heads: 2, ffn: 64, seq: 16 }
parallel:   { islands: 3, dp: 1 }
train:      { steps: 24, global_batch: 6, log_every: 1, eval_every: 8, eval_sequences: 6 }
optim:      { lr: 3.0e-3, min_lr: 3.0e-4, warmup: 4 }
data:       { train: $work/data/train.bin, val: $work/data/val.bin }
checkpoint: { every: 8 }
outer:      { algorithm: diloco, inner_steps: 4, timeout_s: 60 }
YAML
}
# step, theta's and phi's validation loss of every validation record of an islands run's metrics.jsonl.
theta_and_phi() { sed -n 's/^{"step":\([0-9]*\),"val_loss":\([^,}]*\),.*"val_loss_outer":\([^,}]*\).*/\1 \2 \3/p' "$1"; }
# step, loss, grad norm of every step of a metrics.jsonl (without timings).
losses() { sed -n 's/^{"step":\([0-9]*\),"loss":\([^,]*\),"lr":[^,]*,"grad_norm":\([^,]*\),.*/\1 \2 \3/p' "$1"; }
# same_run EXPECTED ACTUAL DIFF: whether ACTUAL's losses and validation (the caller's `validation`) are EXPECTED's,
# bitwise; the differences go to DIFF.
same_run() {
  [[ -n $(losses "$1") ]] && diff <(losses "$1") <(losses "$2") >"$3" && diff <(validation "$1") <(validation "$2") >>"$3"
}

same_files() {  # same_files DIR_A DIR_B: every shard of two checkpoints byte-identical
  local f
  for f in "$1"/*.safetensors; do cmp -s "$f" "$2/$(basename "$f")" || return 1; done
}
# latest_step RUN_DIR: the step of the newest committed checkpoint
signal_pending() {  # signal_pending PID SIGNO: whether signal SIGNO waits, undelivered, in process PID
  local mask
  for mask in $(sed -n 's/^\(SigPnd\|ShdPnd\):[[:space:]]*//p' "/proc/$1/status" 2>/dev/null); do
    (((0x$mask >> ($2 - 1)) & 1)) && return 0
  done
  return 1
}
process_stopped() { grep -q '^State:[[:space:]]*T' "/proc/$1/status" 2>/dev/null; }  # process_stopped PID
latest_step() { sed 's/step-//' "$1/checkpoints/LATEST"; }

wait_for_jobs() {  # waits for every pid in $jobs; $statuses: their exit codes, in order
  statuses=()
  local job
  for job in "${jobs[@]}"; do wait "$job"; statuses+=($?); done
}
