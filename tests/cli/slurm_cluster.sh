# A private Slurm cluster for the CLI tests (source it after lib.sh): munge with a fresh key and
# slurmctld and slurmd from Debian, configured by a slurm.conf written into $work/slurm -- their own
# ports, state, spool, logs and munge socket, nothing system-wide -- with Slurm's default
# MpiDefault=none (atoll launch --slurm must name the PMI plugin itself). One node, `atoll0`, of 8
# CPUs on this host (config_overrides: more than the machine has, so 4 ranks fit on 2 cores, as
# mpirun's --oversubscribe does). Each node's spool, log and TmpFS (where the pmix plugin keeps its
# per-step directories, which must be node-local) are its own, and so are its job ids (FirstJobId from
# the script's pid): Open MPI names its shared-memory segments in /dev/shm after the PMIx namespace,
# slurm.pmix.JOBID.STEP, and two clusters' job 1 side by side on one host would share them (their
# ranks crash in mca_btl_vader_poll_handle_frag). stop_slurm_cluster runs on every exit path.
# use_slurm_nodes (with tests/cli/nodes.sh) makes it a cluster of several nodes instead: slurmctld in
# nodes.sh's hub namespace, one slurmd per node namespace (`slurmd -N nodeI`), each node of 8 CPUs.
slurm_dir=$work/slurm
export SLURM_CONF=$slurm_dir/slurm.conf
slurm_nodes=(atoll0)                   # the nodes' names, their hostnames and addresses
slurm_hostnames=("$(hostname)")
slurm_addresses=(127.0.0.1)
slurm_controller=127.0.0.1             # where slurmctld listens
slurm_client=()                        # what runs slurmctld and Slurm's commands where they reach it
slurm_node_exec() { shift; "$@"; }     # slurm_node_exec I CMD...: CMD on node I (its slurmd)

use_slurm_nodes() {  # use_slurm_nodes: the nodes of nodes.sh's nodes_up, under a controller in the hub
  local i
  slurm_nodes=() slurm_hostnames=() slurm_addresses=()
  for ((i = 0; i < node_count; i++)); do
    slurm_nodes+=("$(node_name "$i")") slurm_hostnames+=("$(node_name "$i")") slurm_addresses+=("$(node_address "$i")")
  done
  slurm_controller=$nodes_hub_address
  slurm_client=(ip netns exec "$nodes_hub")
  slurm_node_exec() { in_node "$@"; }
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_slurm_cluster() {  # fails (status 1, with the daemons' logs) unless every node is idle within 30 s
  local i nodes
  mkdir -p "$slurm_dir/state"
  for i in "${slurm_nodes[@]}"; do mkdir -p "$slurm_dir/spool-$i" "$slurm_dir/tmp-$i"; done
  nodes=$(IFS=,; echo "${slurm_nodes[*]}")
  head -c 1024 /dev/urandom >"$slurm_dir/munge.key"
  chmod 600 "$slurm_dir/munge.key"
  munged --force --socket="$slurm_dir/munge.socket" --key-file="$slurm_dir/munge.key" \
    --log-file="$slurm_dir/munged.log" --pid-file="$slurm_dir/munged.pid" --seed-file="$slurm_dir/munged.seed" || return 1
  cat >"$SLURM_CONF" <<CONF
ClusterName=atoll-test
SlurmctldHost=$(hostname)($slurm_controller)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$slurm_dir/munge.socket
CredType=cred/munge
StateSaveLocation=$slurm_dir/state
SlurmdSpoolDir=$slurm_dir/spool-%n
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd-%n.pid
SlurmctldLogFile=$slurm_dir/slurmctld.log
SlurmdLogFile=$slurm_dir/slurmd-%n.log
TmpFS=$slurm_dir/tmp-%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
KillWait=5
FirstJobId=$(( ($$ % 60000) * 1000 + 1 ))
$(for i in "${!slurm_nodes[@]}"; do
  echo "NodeName=${slurm_nodes[i]} NodeHostname=${slurm_hostnames[i]} NodeAddr=${slurm_addresses[i]} CPUs=8 State=UNKNOWN"
done)
PartitionName=test Nodes=$nodes Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  "${slurm_client[@]}" slurmctld -i -f "$SLURM_CONF" || return 1
  for i in "${!slurm_nodes[@]}"; do slurm_node_exec "$i" slurmd -f "$SLURM_CONF" -N "${slurm_nodes[i]}" || return 1; done
  local _
  for _ in $(seq 1 300); do
    [[ $("${slurm_client[@]}" sinfo -h -n "$nodes" -o %T 2>/dev/null | sort -u) == idle ]] && return 0
    sleep 0.1
  done
  echo "the private Slurm cluster did not come up; its logs:"
  tail -5 "$slurm_dir"/*.log
  return 1
}

stop_slurm_cluster() {  # cancels what runs, stops slurmctld and slurmd, then munged
  [[ -f $SLURM_CONF ]] || return 0
  "${slurm_client[@]}" scancel --full --quiet --partition=test 2>/dev/null
  "${slurm_client[@]}" scontrol shutdown 2>/dev/null
  local _
  for _ in $(seq 1 100); do
    pgrep -f "$SLURM_CONF" >/dev/null || break
    sleep 0.1
  done
  pkill -KILL -f "$SLURM_CONF" 2>/dev/null
  munged --stop --socket="$slurm_dir/munge.socket" 2>/dev/null
}
trap 'stop_slurm_cluster; if [[ -n ${KEEP_WORK:-} ]]; then echo "kept $work"; else pkill -KILL -f "$work" 2>/dev/null; rm -rf "$work"; fi' EXIT

# slurm_job_state JOBID: its state as the controller last saw it (empty once forgotten)
slurm_job_state() { "${slurm_client[@]}" squeue -h -j "$1" -o %T 2>/dev/null; }

# slurm_job_exit JOBID: waits until the job has left the queue (at most 120 s), then prints its exit
# status as `sbatch --wait` gives it: the batch script's code, 128 + N when signal N ended it, empty
# if unknown. Not `sbatch --wait` itself: it looks at the job 2, 10 and 42 s after submitting it and
# then every 32 s, so a job of 12 s kept the test waiting 42.
slurm_job_exit() {
  local _ code signal
  [[ -n $1 ]] || return  # (sbatch failed: scontrol show job "" would show every job)
  for _ in $(seq 1 1200); do
    [[ -z $(slurm_job_state "$1") ]] && break
    sleep 0.1
  done
  IFS=: read -r code signal < <("${slurm_client[@]}" scontrol show job "$1" 2>/dev/null |
    grep -o ' ExitCode=[0-9]*:[0-9]*' | head -1 | cut -d= -f2)
  [[ -z $code ]] && return
  ((signal > 0)) && echo $((128 + signal)) || echo "$code"
}
