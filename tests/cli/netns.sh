# Islands on real, shaped links (source it after lib.sh; needs root, ip and tc from iproute2):
# a "hub" network namespace holding a bridge (10.77.0.1, where atoll rendezvous serves) and one
# namespace per island (10.77.0.10+I) joined to it by a veth pair whose two ends are each shaped
# with tc's token bucket (tbf) to RATE Mbit/s: an island's uplink and downlink. (netem delay and
# loss are refused by this machine's kernel, so the links have no added latency.) Every namespace
# and the traffic inside them go away on exit, with the work directory.
# Names carry this shell's pid, so two scripts can hold links at once.
netns_prefix="atl$$"
netns_hub="${netns_prefix}h"
netns_hub_address=10.77.0.1
netns_count=0

source "$(dirname "${BASH_SOURCE[0]}")/bridge.sh"
netns_down() {
  local i namespaces=()
  for ((i = 0; i < netns_count; i++)); do namespaces+=("${netns_prefix}i$i"); done
  bridge_down "${namespaces[@]}" "$netns_hub"
}
trap 'netns_down; pkill -KILL -f "$work" 2>/dev/null; rm -rf "$work"' EXIT

island_address() { echo "10.77.0.$((10 + $1))"; }

# netns_up COUNT RATE_MBIT: the hub and COUNT island namespaces on RATE Mbit/s links. Fails (status 1,
# with what failed on stderr) where namespaces or tbf are not available.
netns_up() {
  local count=$1 rate=$2 i ns veth
  netns_count=$count
  bridge_up "$netns_hub" "$netns_hub_address" || return 1
  for ((i = 0; i < count; i++)); do
    ns="${netns_prefix}i$i" veth="${netns_prefix}v$i"
    bridge_join "$netns_hub" "$ns" "$veth" "$(island_address "$i")" || return 1
    # Both directions: the island's egress, and the hub's egress towards it (the island's ingress).
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "${rate}mbit" burst 256kb latency 100ms &&
      ip netns exec "$netns_hub" tc qdisc add dev "$veth" root tbf rate "${rate}mbit" burst 256kb latency 100ms ||
      return 1
  done
}

in_hub() { ip netns exec "$netns_hub" "$@"; }
in_island() {  # in_island I CMD...: CMD inside island I's namespace
  local island=$1
  shift
  ip netns exec "${netns_prefix}i$island" "$@"
}
# The link of island I cut (its veth end in the hub down) and restored.
cut_link() { ip -n "$netns_hub" link set "${netns_prefix}v$1" down; }
restore_link() { ip -n "$netns_hub" link set "${netns_prefix}v$1" up; }

# use_island_links COUNT RATE_MBIT: from now on island_exec and hub_prefix (lib.sh) run inside the
# namespaces, and islands meet the rendezvous at the hub's address. Off loopback the job secret is
# required, so the island jobs must hold one.
use_island_links() {
  netns_up "$1" "$2" || return 1
  rendezvous_host=$netns_hub_address
  island_exec() { in_island "$@"; }
  hub_prefix=(ip netns exec "$netns_hub")
}
