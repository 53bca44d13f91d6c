# run_logged LOG COMMAND... for the GPU benchmarks (source it; sets $failed on a failure): all output
# into LOG, progress lines shown; a failure is reported with its cause, not fatal, so the other runs
# are still measured.
run_logged() {
  local log=$1 rc=0
  shift
  "$@" 2>&1 | tee "$log" | { grep --line-buffered -E '^(model|device|attention|float8|step)' || true; } || rc=${PIPESTATUS[0]}
  if ((rc != 0)); then
    # The cause: Atoll's one-line error or a Python exception, else the end of the output.
    { grep -E '^atoll: |^atoll launch: the job|^[A-Za-z_.]*(Error|Exception): ' "$log" || tail -n 5 "$log"; } |
      tail -n 4 >&2
    echo "$(basename "$0" .sh): the run above failed (exit $rc); its whole output is in $log" >&2
    failed=1
  fi
}
