# A private Slurm cluster for the CLI tests (source it after lib.sh): munge with a fresh key and
# slurmctld and slurmd from Debian, configured by a slurm.conf written into $work/slurm -- their own
# ports, state, spool, logs and munge socket, nothing system-wide -- with Slurm's default
# MpiDefault=none (atoll launch --slurm must name the PMI plugin itself). One node, `atoll0`, of 8
# CPUs on this host (config_overrides: more than the machine has, so 4 ranks fit on 2 cores, as
# mpirun's --oversubscribe does). stop_slurm_cluster runs on every exit path.
slurm_dir=$work/slurm
export SLURM_CONF=$slurm_dir/slurm.conf

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_slurm_cluster() {  # fails (status 1, with the daemons' logs) unless the node is idle within 30 s
  mkdir -p "$slurm_dir/state" "$slurm_dir/spool"
  head -c 1024 /dev/urandom >"$slurm_dir/munge.key"
  chmod 600 "$slurm_dir/munge.key"
  munged --force --socket="$slurm_dir/munge.socket" --key-file="$slurm_dir/munge.key" \
    --log-file="$slurm_dir/munged.log" --pid-file="$slurm_dir/munged.pid" --seed-file="$slurm_dir/munged.seed" || return 1
  cat >"$SLURM_CONF" <<CONF
ClusterName=atoll-test
SlurmctldHost=$(hostname)(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$slurm_dir/munge.socket
CredType=cred/munge
StateSaveLocation=$slurm_dir/state
SlurmdSpoolDir=$slurm_dir/spool
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd.pid
SlurmctldLogFile=$slurm_dir/slurmctld.log
SlurmdLogFile=$slurm_dir/slurmd.log
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
NodeName=atoll0 NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=test Nodes=atoll0 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  slurmctld -i -f "$SLURM_CONF" && slurmd -f "$SLURM_CONF" -N atoll0 || return 1
  local _
  for _ in $(seq 1 300); do
    [[ $(sinfo -h -n atoll0 -o %T 2>/dev/null) == idle ]] && return 0
    sleep 0.1
  done
  echo "the private Slurm cluster did not come up; its logs:"
  tail -5 "$slurm_dir"/*.log
  return 1
}

stop_slurm_cluster() {  # cancels what runs, stops slurmctld and slurmd, then munged
  [[ -f $SLURM_CONF ]] || return 0
  scancel --full --quiet --partition=test 2>/dev/null
  scontrol shutdown 2>/dev/null
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
slurm_job_state() { squeue -h -j "$1" -o %T 2>/dev/null; }
