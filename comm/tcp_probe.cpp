#include "comm/tcp_probe.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace atl::comm {
namespace {

using Clock = std::chrono::steady_clock;

// One non-blocking connect to `address`, waited on for at most `limit`: "" when it is accepted.
std::string try_connect(const addrinfo& address, std::chrono::milliseconds limit) {
  const int fd =
      socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, address.ai_protocol);
  if (fd < 0) return std::strerror(errno);
  std::string reason;
  if (connect(fd, address.ai_addr, address.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      reason = std::strerror(errno);
    } else {
      pollfd wait{fd, POLLOUT, 0};
      const int ready = poll(&wait, 1, static_cast<int>(std::max<int64_t>(limit.count(), 1)));
      int error = 0;
      socklen_t size = sizeof error;
      if (ready <= 0)
        reason = "no answer";
      else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0 || error != 0)
        reason = std::strerror(error != 0 ? error : errno);
    }
  }
  close(fd);
  return reason;
}

}  // namespace

std::string wait_for_listener(const std::string& host, int port, Clock::time_point deadline) {
  constexpr std::chrono::milliseconds kTry{500}, kPause{100};
  std::string reason = "not tried";
  do {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int lookup = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (lookup != 0) {
      reason = "no address for host '" + host + "': " + gai_strerror(lookup);
    } else {
      for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        reason = try_connect(*a, std::clamp(left, std::chrono::milliseconds(1), kTry));
        if (reason.empty()) break;
      }
      freeaddrinfo(found);
      if (reason.empty()) return "";
    }
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(kPause, left));
  } while (Clock::now() < deadline);
  return reason;
}

}  // namespace atl::comm
