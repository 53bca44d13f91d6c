# Several "hosts" on this machine for the CLI tests (source it after lib.sh; needs root, ip from
# iproute2, nsenter and unshare from util-linux): a hub network namespace holding a bridge
# (10.78.0.1, where a Slurm controller may run) and per node I a network namespace of its own
# (10.78.0.10+I on eth0, a veth pair to the bridge) and a UTS namespace of its own (hostname nodeI),
# held by a bounded `sleep` whose namespaces `in_node` enters. The mount namespace stays shared, as a
# cluster's shared filesystem: run directories and checkpoints live in $work.
# Open MPI reaches the other nodes through $node_agent instead of ssh (plm_rsh_agent; $node_mpi_args
# holds the MCA settings for mpirun): `AGENT HOST COMMAND...` runs COMMAND on HOST, a node's name or
# address, with a login's bare environment (PATH and HOME) plus TMPDIR, which stands for a node-local
# /tmp (Open MPI keeps its session files under it, keyed by hostname).
# Names carry this shell's pid, so two scripts can hold nodes at once; nodes_down (on every exit
# path) kills whatever runs in the namespaces and deletes them.
nodes_prefix="atn$$"
nodes_hub="${nodes_prefix}h"
nodes_hub_address=10.78.0.1
nodes_subnet=10.78.0.0/24
node_count=0
node_holders=()  # per node: the pid of the process holding its namespaces
node_agent=$work/node-agent
node_mpi_args=(--mca plm_rsh_agent "$node_agent" --mca btl_tcp_if_include "$nodes_subnet"
  --mca oob_tcp_if_include "$nodes_subnet")

node_name() { echo "node$1"; }
node_address() { echo "10.78.0.$((10 + $1))"; }
node_veth() { echo "${nodes_prefix}v$1"; }  # node I's veth end in the hub

source "$(dirname "${BASH_SOURCE[0]}")/bridge.sh"
nodes_down() {
  local i namespaces=()
  for ((i = 0; i < node_count; i++)); do namespaces+=("${nodes_prefix}n$i"); done
  bridge_down "${namespaces[@]}" "$nodes_hub"
}
trap 'nodes_down; pkill -KILL -f "$work" 2>/dev/null; [[ -n ${KEEP_WORK:-} ]] && echo "kept $work" || rm -rf "$work"' EXIT

# nodes_up COUNT: the hub and COUNT nodes, each with its hostname set, and $node_agent. Fails
# (status 1, with what failed on stderr) where namespaces are not available.
nodes_up() {
  local count=$1 i ns veth _
  node_count=$count
  bridge_up "$nodes_hub" "$nodes_hub_address" || return 1
  for ((i = 0; i < count; i++)); do
    ns="${nodes_prefix}n$i" veth=$(node_veth "$i")
    bridge_join "$nodes_hub" "$ns" "$veth" "$(node_address "$i")" || return 1
    # The holder: in the node's network namespace, a UTS namespace of its own named nodeI, then
    # sleep (bounded: gone within 15 minutes even if nothing tears it down). ip, unshare and sh
    # each exec the next, so $! is the sleep.
    ip netns exec "$ns" unshare --uts sh -c "hostname $(node_name "$i") && exec sleep 900" </dev/null >/dev/null 2>&1 &
    node_holders[i]=$!
    disown  # no "Killed" notice when nodes_down ends it
  done
  for ((i = 0; i < count; i++)); do
    for _ in $(seq 1 100); do
      [[ $(in_node "$i" hostname 2>/dev/null) == "$(node_name "$i")" ]] && break
      sleep 0.02
    done
    [[ $(in_node "$i" hostname 2>/dev/null) == "$(node_name "$i")" ]] || { echo "node $i has no hostname" >&2; return 1; }
  done
  {
    echo '#!/bin/bash'
    echo '# plm_rsh_agent for nodes.sh: AGENT [OPTIONS] HOST COMMAND... runs COMMAND on HOST (as ssh would).'
    echo 'while [[ $1 == -* ]]; do shift; done'
    echo 'host=$1; shift'
    echo 'case $host in'
    for ((i = 0; i < count; i++)); do echo "  $(node_name "$i")|$(node_address "$i")) pid=${node_holders[i]} ;;"; done
    echo '  *) echo "node-agent: no node $host" >&2; exit 255 ;;'
    echo 'esac'
    echo 'exec nsenter -t "$pid" --uts --net -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$HOME" ${TMPDIR:+TMPDIR="$TMPDIR"} sh -c "$*"'
  } >"$node_agent"
  chmod +x "$node_agent"
}

in_node() {  # in_node I CMD...: CMD on node I (its network and hostname; this process's environment)
  local node=$1
  shift
  nsenter -t "${node_holders[node]}" --uts --net -- "$@"
}
in_nodes_hub() { ip netns exec "$nodes_hub" "$@"; }

# node_veth_bytes I: "RX TX", the bytes node I's veth end in the hub has received (sent by node I)
# and sent (to node I).
node_veth_bytes() {
  local stats=/sys/class/net/$(node_veth "$1")/statistics
  in_nodes_hub sh -c "echo \$(cat $stats/rx_bytes) \$(cat $stats/tx_bytes)"
}

# The link of node I cut (its veth end in the hub down) and restored.
cut_node() { ip -n "$nodes_hub" link set "$(node_veth "$1")" down; }
restore_node() { ip -n "$nodes_hub" link set "$(node_veth "$1")" up; }
