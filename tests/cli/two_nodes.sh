#!/usr/bin/env bash
# Jobs across two hosts (tests/cli/nodes.sh: node0 and node1, each a network and a UTS namespace of
# its own on a bridge, the filesystem shared): 2 nodes x 2 ranks of the tiny config at tp=2, dp=2,
#   mpirun  `atoll launch --hostfile` on node0, Open MPI reaching node1 through nodes.sh's agent
#           (plm_rsh_agent) instead of ssh: ranks 0-1 on node0 and 2-3 on node1 (rank table, exit
#           records), so TP pairs stay inside a node and DP crosses; local ranks 0/2 and 1/2 on each
#           node in Atoll's rank table (its placement: threads and the GPU of a rank follow from
#           it); node1's veth carries at least the DP all-reduces' bytes both ways;
#           losses, validation and every checkpoint shard bitwise the same job under plain
#           `atoll launch` on one host; step-6, written by ranks of both nodes, resumed on node0
#           alone at tp=1 and tp=2 x dp=1 continues the same training;
#   lost    every process of node1 killed mid-run (a crashed node): mpirun ends the job, and
#           --max-restarts relaunches it over the same hosts; bitwise the uninterrupted run;
#   partition  node1's link cut mid-run (its processes alive): atoll launch ends the mpirun that waits
#           on node1's unreachable daemon 5 s (--failure-grace) after the first failure, and relaunches once the link
#           is back; bitwise the uninterrupted run;
#   slurm   the same job by `sbatch examples/slurm/two_nodes_cpu.sbatch` under a Slurm of one slurmd per
#           node (tests/cli/slurm_cluster.sh's use_slurm_nodes): srun --mpi=pmix places ranks 0-1 on
#           node0 and 2-3 on node1, the same local ranks; traffic over the bridge; bitwise the one-host run.
# TWO_NODES_SCENARIOS picks the cases (default all: mpirun lost partition slurm); CTest runs them as
# three entries.
# Usage: two_nodes.sh ATOLL
set -u
atoll=$(realpath "$1")
examples=$(realpath "$(dirname "$0")/../../examples")
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nodes.sh"
source "$(dirname "$0")/slurm_cluster.sh"
trap 'stop_slurm_cluster; nodes_down; pkill -KILL -f "$work" 2>/dev/null; [[ -n ${KEEP_WORK:-} ]] && echo "kept $work" || rm -rf "$work"' EXIT
wants() { [[ " ${TWO_NODES_SCENARIOS:-mpirun lost partition slurm} " == *" $1 "* ]]; }

make_corpus "$atoll" "$work/data"
tiny_config "$work/tiny.yaml"
job=(--set parallel.tp=2 --set parallel.dp=2 --set train.steps=12 --set checkpoint.every=6 --set checkpoint.keep=2)
validation() { grep '"val_loss' "$1"; }
# The reference: the same job under plain `atoll launch` on this host.
timeout 120 "$atoll" launch "$work/tiny.yaml" "${job[@]}" --set run.dir="$work/ref" >"$work/ref.log" 2>&1 ||
  check fail "the one-host reference run" "$work/ref.log"
if ! nodes_up 2 >"$work/nodes.log" 2>&1; then
  check fail "two nodes (network and UTS namespaces on a bridge) come up" "$work/nodes.log"
  finish
  exit
fi
printf '%s slots=2\n' node0 node1 >"$work/hosts"

# rank_hosts RUN_DIR: "RANK HOST LOCAL DEVICE DP TP" of each row of the rank table a run wrote to
# RUN_DIR/ranks.txt (LOCAL: the rank's index among its node's ranks / the ranks on the node, as
# Atoll's placement found them).
rank_hosts() { awk '/^rank  host/ { on = 1; next } on && NF == 8 { print $1, $2, $3, $4, $7, $8; next } on { exit }' "$1/ranks.txt"; }
expected_hosts=$'0 node0 0/2 cpu 0 0\n1 node0 1/2 cpu 0 1\n2 node1 0/2 cpu 1 0\n3 node1 1/2 cpu 1 1'
# exit_hosts RUN_DIR: "RANK HOST" of each rank's exit record.
exit_hosts() { cat "$1"/logs/rank-*.exit 2>/dev/null | awk '{ print $2, $6 }' | sort -n | paste -sd' '; }
# crossed RUN_DIR BEFORE AFTER: whether node1's veth carried, each way, at least the DP all-reduce
# payload of node1's two ranks at every step (metrics' dp_bytes; an all-reduce between two nodes
# must bring each rank the other node's whole vector); prints what it compares.
crossed() {
  local need
  need=$(sed -n 's/^{"step":[0-9]*,"loss".*"dp_bytes":\([0-9]*\),.*/\1/p' "$1/metrics.jsonl" | awk '{ s += 2 * $1 } END { print s + 0 }')
  read -r rx0 tx0 <<<"$2"
  read -r rx1 tx1 <<<"$3"
  echo "node1's veth: $((rx1 - rx0)) bytes out of node1, $((tx1 - tx0)) in; DP payload $need"
  ((need > 0 && rx1 - rx0 >= need && tx1 - tx0 >= need))
}
# same_job RUN_DIR: losses, validation and both checkpoints' shards bitwise the reference's.
same_job() {
  same_run "$work/ref/metrics.jsonl" "$1/metrics.jsonl" "$work/$(basename "$1").diff" &&
    same_files "$work/ref/checkpoints/step-6" "$1/checkpoints/step-6" &&
    same_files "$work/ref/checkpoints/step-12" "$1/checkpoints/step-12"
}
# check_bridge_and_bits RUN_DIR BEFORE AFTER PREFIX: the job's traffic crossed the bridge, and the job
# is bitwise the one-host run (PREFIX starts each check's line).
check_bridge_and_bits() {
  local crossing
  if crossing=$(crossed "$1" "$2" "$3"); then
    check ok "${4}traffic crossed the bridge: $crossing"
  else
    check fail "${4}traffic over the bridge: $crossing"
  fi
  if same_job "$1"; then
    check ok "${4}losses, validation and step-6/step-12 shards bitwise the one-host run's"
  else
    check fail "${4}two nodes bitwise the one-host run" "$work/$(basename "$1").diff"
  fi
}

if wants mpirun; then
before=$(node_veth_bytes 1)
in_node 0 timeout 120 "$atoll" launch "$work/tiny.yaml" "${job[@]}" --hostfile "$work/hosts" --set run.dir="$work/two" \
  -- "${node_mpi_args[@]}" >"$work/two.log" 2>&1 &
launch=$!
wait $launch
status=$?
after=$(node_veth_bytes 1)
if [[ $status -eq 0 && $(rank_hosts "$work/two") == "$expected_hosts" \
      && $(exit_hosts "$work/two") == "0 node0 1 node0 2 node1 3 node1" ]]; then
  check ok "launch --hostfile over node0 and node1 (agent, no ssh): ranks 0-1 (tp 0-1, dp 0) on node0, 2-3 (dp 1) on node1, local ranks 0/2 and 1/2 on each"
else
  check fail "launch --hostfile over two nodes (exit $status; table '$(rank_hosts "$work/two" | paste -sd,)', exits '$(exit_hosts "$work/two")')" "$work/two.log"
fi
check_bridge_and_bits "$work/two" "$before" "$after" ""
# step-6 (shards 0-1 written on node0, 2-3 on node1) resumed on node0 alone in two other layouts:
# it loads, and the losses of steps 7-12 are the two-node run's within float rounding (a
# mis-assembled checkpoint would be off by far more).
for layout in "1 2" "2 1"; do
  read -r tp dp <<<"$layout"
  name=resume-tp$tp-dp$dp
  in_node 0 timeout 120 "$atoll" launch "$work/tiny.yaml" "${job[@]}" --set parallel.tp="$tp" --set parallel.dp="$dp" \
    --set run.dir="$work/$name" --set checkpoint.resume="$work/two/checkpoints/step-6" >"$work/$name.log" 2>&1
  status=$?
  drift=$(awk 'NR == FNR { two[$1] = $2; next } $1 > 6 && ($1 in two) { n++; d = $2 - two[$1]; if (d < 0) d = -d; if (d > m) m = d }
    END { printf "%d %.2g", n, m }' <(losses "$work/two/metrics.jsonl") <(losses "$work/$name/metrics.jsonl"))
  if [[ $status -eq 0 && $(rank_hosts "$work/$name" | awk '{ print $2 }' | sort -u) == node0 ]] \
      && grep -q "resumed from $work/two/checkpoints/step-6 at step 6" "$work/$name.log" \
      && awk -v d="$drift" 'BEGIN { split(d, a, " "); exit !(a[1] == 6 && a[2] <= 1e-5) }'; then
    check ok "step-6 of both nodes resumed on node0 at tp=$tp dp=$dp: steps 7-12 within $(cut -d' ' -f2 <<<"$drift") of the two-node losses"
  else
    check fail "resume of the two-node step-6 at tp=$tp dp=$dp (exit $status, steps compared and largest difference: $drift)" "$work/$name.log"
  fi
done
fi

if wants lost; then
# node1 crashes past step 20 (every process in its namespace killed with SIGKILL, orted and the
# ranks' supervisors with them): mpirun ends the job, and atoll launch --max-restarts 1 relaunches it
# over the same hostfile (node1 back, as a rebooted node) from step-20; it ends bitwise where the
# same job uninterrupted on one host ends.
lost=(--set train.steps=40 --set checkpoint.every=10 --set train.eval_every=0)
timeout 120 "$atoll" launch "$work/tiny.yaml" "${job[@]}" "${lost[@]}" --set run.dir="$work/whole" >"$work/whole.log" 2>&1
in_node 0 timeout -k 5 120 "$atoll" launch "$work/tiny.yaml" "${job[@]}" "${lost[@]}" --hostfile "$work/hosts" \
  --set run.dir="$work/lost" --max-restarts 1 -- "${node_mpi_args[@]}" >"$work/lost.log" 2>&1 &
launch=$!
for _ in $(seq 1 600); do grep -q '"step":20,"checkpoint_s"' "$work/lost/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
ip netns pids "${nodes_prefix}n1" | grep -vx "${node_holders[1]}" | xargs -r kill -KILL
wait $launch
status=$?
failure=$(grep -m1 "^atoll launch: the job failed" "$work/lost.log")
echo "node lost: exit $status; $failure"
if [[ $status -eq 0 ]] && grep -q "restart 1 of 1" "$work/lost.log" && grep -q "resumed from $work/lost/checkpoints/step-[1-9]" "$work/lost.log" \
    && same_files "$work/whole/checkpoints/step-40" "$work/lost/checkpoints/step-40"; then
  check ok "node1 killed past step 20 ('${failure#atoll launch: }'): relaunched over both nodes, step-40 bitwise the uninterrupted run's"
else
  check fail "node1 killed mid-run (exit $status)" "$work/lost.log"
fi
fi

if wants partition; then
# node1's link cut past step 20, its processes alive: every rank's watchdog fires after
# comm.timeout_s (exit 4), but mpirun waits on node1's daemon, which it cannot reach (Open MPI 4 has
# no daemon heartbeat). atoll launch ends mpirun 5 s (--failure-grace) after the first failure and relaunches
# once the link is back: step-40 bitwise the uninterrupted run's. The link comes back as the launcher
# ends mpirun, so the first relaunch may start node1's daemon a moment before it can reach node0
# (seen once in CI: "an inability to create a connection back to mpirun", exit 1); --max-restarts 2
# lets the next one find the link up, as a relaunch after a real outage would.
partition=(--set train.steps=40 --set checkpoint.every=10 --set train.eval_every=0 --set comm.timeout_s=5)
timeout 120 "$atoll" launch "$work/tiny.yaml" "${job[@]}" "${partition[@]}" --set run.dir="$work/whole_p" >"$work/whole_p.log" 2>&1
in_node 0 timeout -k 5 200 "$atoll" launch "$work/tiny.yaml" "${job[@]}" "${partition[@]}" --hostfile "$work/hosts" \
  --set run.dir="$work/cut" --max-restarts 2 --failure-grace 5 -- "${node_mpi_args[@]}" >"$work/cut.log" 2>&1 &
launch=$!
for _ in $(seq 1 600); do grep -q '"step":20,"checkpoint_s"' "$work/cut/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
cut_node 1
cut_at=$SECONDS
for _ in $(seq 1 900); do grep -q "; ended it" "$work/cut.log" && break; sleep 0.1; done
ended_after=$((SECONDS - cut_at))
restore_node 1
wait $launch
status=$?
ended=$(grep -m1 "; ended it" "$work/cut.log")
if [[ $status -eq 0 && -n $ended ]] && grep -q "restart 1 of 2" "$work/cut.log" \
    && grep -q "resumed from $work/cut/checkpoints/step-[1-9]" "$work/cut.log" \
    && same_files "$work/whole_p/checkpoints/step-40" "$work/cut/checkpoints/step-40"; then
  check ok "node1's link cut past step 20: '${ended#atoll launch: }' ${ended_after} s after the cut; relaunched once the link was back, step-40 bitwise the uninterrupted run's"
else
  check fail "node1's link cut mid-run (exit $status, ended after ${ended_after} s)" "$work/cut.log"
fi
fi

if wants slurm; then
use_slurm_nodes
if ! start_slurm_cluster >"$work/cluster.log" 2>&1; then
  check fail "a Slurm cluster of node0 and node1 starts" "$work/cluster.log"
  finish
  exit
fi
before=$(node_veth_bytes 1)
ATOLL=$atoll timeout 120 "${slurm_client[@]}" sbatch --parsable --wait --chdir="$work" --output="$work/slurm2.out" \
  "$examples/slurm/two_nodes_cpu.sbatch" "$work/tiny.yaml" "${job[@]}" --set run.dir="$work/slurm2" >/dev/null 2>"$work/sbatch.err" &
submit=$!
wait $submit
status=$?
after=$(node_veth_bytes 1)
if [[ $status -eq 0 && $(rank_hosts "$work/slurm2") == "$expected_hosts" ]] \
    && grep -q "srun --ntasks=4 --kill-on-bad-exit=1 --mpi=pmix" "$work/slurm2.out" \
    && [[ $(exit_hosts "$work/slurm2") == "0 node0 1 node0 2 node1 3 node1" ]]; then
  check ok "sbatch -N 2 (two_nodes_cpu.sbatch): srun --mpi=pmix put ranks 0-1 on node0 (slurmd -N node0), 2-3 on node1, local ranks 0/2 and 1/2 on each"
else
  check fail "sbatch over two nodes (exit $status; table '$(rank_hosts "$work/slurm2" | paste -sd,)')" "$work/slurm2.out"
  tail -n 3 "$slurm_dir"/slurmd-node*.log
fi
check_bridge_and_bits "$work/slurm2" "$before" "$after" "under Slurm: "
fi
finish
