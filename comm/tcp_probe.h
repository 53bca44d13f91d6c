// Whether a TCP server listens at an address, found by connecting and closing at once. The islands'
// rendezvous client asks this before it lets c10d's TCPStore connect: c10d's own connect doubles
// a timeout (one retry after it) and logs a C++ stack trace for every try that fails, where a
// rendezvous not up yet, or restarting, is an expected state that deserves one line.
#pragma once

#include <chrono>
#include <string>

namespace atl::comm {

// Tries to connect to host:port until one try succeeds or `deadline` passes, a refused or
// unanswered try followed by a short pause. Returns "" once something listens there, else the
// reason of the last try ("Connection refused", "no address for host 'x'", ...).
std::string wait_for_listener(const std::string& host, int port,
                              std::chrono::steady_clock::time_point deadline);

}  // namespace atl::comm
