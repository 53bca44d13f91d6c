#include "comm/rendezvous_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace atl::comm {

RendezvousAddress parse_rendezvous(const std::string& text) {
  const size_t colon = text.rfind(':');
  const std::string fix = "; give outer.rendezvous as HOST:PORT, e.g. 10.0.0.5:29400";
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw std::invalid_argument("outer.rendezvous = '" + text + "' is not HOST:PORT" + fix);
  const std::string port = text.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 || std::stoi(port) < 1 ||
      std::stoi(port) > 65535)
    throw std::invalid_argument("outer.rendezvous = '" + text + "': port '" + port + "' is not 1-65535" +
                                fix);
  return {text.substr(0, colon), static_cast<uint16_t>(std::stoi(port))};
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  in_addr address{};
  return inet_pton(AF_INET, host.c_str(), &address) == 1 && (ntohl(address.s_addr) >> 24) == 127;
}

std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(host.c_str(), "9", &hints, &found); error != 0)
    throw std::runtime_error("outer.rendezvous host '" + host + "' does not resolve: " + gai_strerror(error));
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  std::string address;
  std::string failure;
  if (fd < 0 || connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    failure = std::strerror(errno);
  } else {
    sockaddr_in local{};
    socklen_t length = sizeof(local);
    char text[INET_ADDRSTRLEN] = {};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
        inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)))
      address = text;
    else
      failure = std::strerror(errno);
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (address.empty())
    throw std::runtime_error("no route from this host to outer.rendezvous host '" + host + "': " + failure);
  return address;
}

}  // namespace atl::comm
