# Shared by the CLI test scripts (source it): a work directory removed on exit with any process still
# running in it, the environment mpirun needs as root, PASS/FAIL counting and the closing tally, the
# exit codes of `atoll train` and a small text corpus.
work=$(mktemp -d)
trap 'pkill -KILL -f "$work" 2>/dev/null; rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
passed=0
failed=0

# The exit codes of `atoll train` (runtime/process_exit.h), which mpirun passes on.
EXIT_BAD_INPUT=2
EXIT_NONFINITE=3
EXIT_HANG=4

check() {  # check ok|fail DESCRIPTION [LOG]: counts the case; on failure shows the end of LOG
  if [[ $1 == ok ]]; then
    passed=$((passed + 1)); echo "PASS $2"
  else
    failed=$((failed + 1)); echo "FAIL $2"; [[ -n ${3:-} && -f ${3:-} ]] && grep -v '^[|+]' "$3" | tail -15 | sed 's/^/    /'
  fi
  return 0
}

finish() {  # the tally; the script's status is whether every case passed
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]]
}

make_corpus() {  # make_corpus ATOLL DIR: a small repetitive text, byte-tokenized into DIR/{train,val}.bin
  local i
  for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog; a stitch in time saves nine."; done >"$work/text.txt"
  "$1" data prepare --out "$2" --val-fraction 0.1 "$work/text.txt" >/dev/null
}
