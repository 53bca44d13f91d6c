// The address of `atoll rendezvous` (outer.rendezvous: HOST:PORT), and the address this host is
// reached by on the way there. Plain sockets only, so the config can check it cheaply.
#pragma once

#include <cstdint>
#include <string>

namespace atl::comm {

struct RendezvousAddress {
  std::string host;
  uint16_t port = 0;
};

// "HOST:PORT" (HOST a name or an IPv4 address). Throws std::invalid_argument naming the value and
// the fix.
RendezvousAddress parse_rendezvous(const std::string& text);

// Whether `host` is this machine's loopback by its text alone ("localhost" or an IPv4 address in
// 127.0.0.0/8): the one case where islands may meet without the job secret. A name that merely
// resolves to a loopback address counts as remote (the safe side).
bool is_loopback_host(const std::string& host);

// This host's IPv4 address on the route to `host` (where the islands' TCP groups listen, so the
// others can reach them): the source address the kernel picks for a datagram socket connected
// there (nothing is sent). Throws std::runtime_error when `host` does not resolve or is unreachable.
std::string local_address_towards(const std::string& host);

}  // namespace atl::comm
