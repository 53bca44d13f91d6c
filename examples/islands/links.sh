#!/usr/bin/env bash
# The islands experiment on real links: every method (methods.sh) as 4 island jobs (one `atoll launch`
# each), each in a network namespace of its own joined to a hub (where `atoll rendezvous` serves) by
# a link shaped to 100 Mbit/s both ways with tc tbf (tests/cli/netns.sh) -- no simulated link: the
# wall-clock is what the links and the exchange really cost. Then a churn run: DiLoCo with
# outer.min_islands: 3, island 2 killed (SIGKILL) at step 260 and relaunched once the others are past
# step 300, from its step-250 checkpoint (the others go on without it; it takes their state at their
# next round). The table (island 0's run.dir per method): final loss, bytes between islands,
# wall-clock; then the churn run's final loss against DiLoCo's without churn.
# Needs root, ip and tc (iproute2); without them, examples/islands/simulated.sh runs the same methods
# in one MPI world over the in-process link simulator.
# Usage: bash examples/islands/links.sh [--set key=value]...   (applied to every island job)
set -uo pipefail
cd "$(dirname "$0")/../.."

bash scripts/install-deps.sh || exit 1
bash scripts/build.sh atoll || exit 1
bash examples/pydocs/prepare.sh data/pydocs build/bin/atoll || exit 1
source tests/cli/lib.sh
source tests/cli/netns.sh
use_island_links 4 100 || { echo "links.sh: needs root with ip and tc (network namespaces, tc tbf); examples/islands/simulated.sh needs neither" >&2; exit 1; }
atoll=$PWD/build/bin/atoll
out=runs/islands
logs=$out/logs
mkdir -p "$logs"
openssl rand -hex 32 >"$work/secret"
chmod 600 "$work/secret"
extra=("$@")

# island_job RUN ISLAND OVERRIDES...: island ISLAND of run RUN (island 0's run.dir is $out/RUN, the
# report's; the others' $out/RUN-islandI).
island_job() {
  local run=$1 island=$2 dir="$out/$1"
  shift 2
  [[ $island != 0 ]] && dir="$out/$run-island$island"
  island_exec "$island" timeout 1800 "$atoll" launch examples/islands/islands.yaml --set run.dir="$dir" \
    --set outer.rendezvous="$rendezvous_host:$port" --set outer.island="$island" \
    --set outer.secret_file="$work/secret" --set outer.simulated_bandwidth_mbps=0 \
    --set outer.simulated_latency_ms=0 --set checkpoint.every=50 --set checkpoint.resume=auto \
    "$@" "${extra[@]}" >"$logs/$run-$island.log" 2>&1
}

# method RUN OVERRIDES...: the four island jobs of RUN. CHURN=1: island 2 dies and comes back.
method() {
  local run=$1 island started=$SECONDS
  shift
  echo "== $run"
  rm -rf "${out:?}/$run" "$out/$run"-island*
  start_rendezvous "$atoll" "$logs/rendezvous-$run.log" --secret-file "$work/secret"
  jobs=()
  for island in 0 1 2 3; do
    if [[ $island == 2 && -n ${CHURN:-} ]]; then
      ATOLL_FAULT=sigkill@260 island_job "$run" 2 "$@" &
    else
      island_job "$run" "$island" "$@" &
    fi
    jobs+=($!)
  done
  if [[ -n ${CHURN:-} ]]; then
    wait "${jobs[2]}"
    echo "island 2 died (exit $?); relaunching it once island 0 is past step 300"
    for _ in $(seq 1 3000); do
      grep -q '"step":3[0-9][0-9],"loss"' "$out/$run/metrics.jsonl" 2>/dev/null && break
      sleep 0.2
    done
    mv "$logs/$run-2.log" "$logs/$run-2-killed.log"
    island_job "$run" 2 "$@" &
    jobs[2]=$!
  fi
  wait_for_jobs
  echo "exit codes: ${statuses[*]}; $((SECONDS - started)) s"
  grep -hE "val loss|error|caught up|dropped|joined" "$logs/$run-0.log" "$logs/$run-2.log" | tail -5
  kill -TERM "$rendezvous"
  wait "$rendezvous"
  [[ ${statuses[*]} == "0 0 0 0" ]] || { echo "links.sh: $run failed; its logs: $logs"; exit 1; }
}

source examples/islands/methods.sh
every_method ""
CHURN=1 method churn --set outer.algorithm=diloco --set outer.min_islands=3 --set outer.grace_s=5
.venv/bin/python examples/islands/report.py "$out" "${methods[@]}" churn
