# Network namespaces joined by a bridge (source it; needs root and ip from iproute2): what
# tests/cli/netns.sh (islands on shaped links) and tests/cli/nodes.sh (hosts) both stand on.

# bridge_up HUB ADDRESS: namespace HUB holding bridge br0 at ADDRESS/24, loopback up.
bridge_up() {
  ip netns add "$1" &&
    ip -n "$1" link set lo up &&
    ip -n "$1" link add br0 type bridge &&
    ip -n "$1" addr add "$2/24" dev br0 &&
    ip -n "$1" link set br0 up
}

# bridge_join HUB NS VETH ADDRESS: namespace NS with eth0 at ADDRESS/24, the other end of its veth
# pair (VETH) in HUB on br0.
bridge_join() {
  local hub=$1 ns=$2 veth=$3 address=$4
  ip netns add "$ns" &&
    ip link add "$veth" type veth peer name eth0 netns "$ns" &&
    ip link set "$veth" netns "$hub" &&
    ip -n "$hub" link set "$veth" master br0 up &&
    ip -n "$ns" addr add "$address/24" dev eth0 &&
    ip -n "$ns" link set eth0 up &&
    ip -n "$ns" link set lo up
}

# bridge_down NS...: kills whatever runs in each namespace, then deletes them (missing ones are fine).
bridge_down() {
  local ns
  for ns in "$@"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL; done
  for ns in "$@"; do ip netns del "$ns" 2>/dev/null; done
  return 0
}
