// `atoll rendezvous [--port P]`: serves the meeting point of islands that run as separate jobs
// (outer.rendezvous: HOST:P in their configs) until SIGINT or SIGTERM. It holds no training state:
// islands agree on each round's members and reach each other through it, and one that restarts
// finds the others there again.
#include <signal.h>

#include <iostream>
#include <stdexcept>
#include <string>

#include "comm/island_rendezvous.h"
#include "launcher/commands.h"

namespace atl::launcher {
namespace {

constexpr const char* kRendezvousUsage = "atoll rendezvous [--port P]   (default 29400; 0 picks a free port)";
constexpr uint16_t kDefaultPort = 29400;

uint16_t parse_port(const Args& args) {
  uint16_t port = kDefaultPort;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string value;
    if (args[i] == "--port" && i + 1 < args.size())
      value = args[++i];
    else if (args[i].rfind("--port=", 0) == 0)
      value = args[i].substr(7);
    else
      throw std::invalid_argument("unexpected argument '" + args[i] + "'; usage: " + kRendezvousUsage);
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos || value.size() > 5 ||
        std::stoi(value) > 65535)
      throw std::invalid_argument("--port " + value +
                                  " is not a port number (0-65535); usage: " + kRendezvousUsage);
    port = static_cast<uint16_t>(std::stoi(value));
  }
  return port;
}

}  // namespace

int rendezvous_command(const Args& args) {
  if (wants_help(args)) {
    std::cout << "usage: " << kRendezvousUsage << "\n";
    return 0;
  }
  const uint16_t port = parse_port(args);
  // Blocked before the server's threads start, so they inherit the mask and sigwait below receives
  // the signal.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  comm::RendezvousServer server(port);
  std::cout << "atoll rendezvous: serving islands on port " << server.port()
            << " (islands set outer.rendezvous: THIS_HOST:" << server.port()
            << "; SIGINT or SIGTERM stops it)" << std::endl;
  int signal = 0;
  sigwait(&stop, &signal);
  std::cout << "atoll rendezvous: stopped by " << (signal == SIGINT ? "SIGINT" : "SIGTERM") << std::endl;
  return 0;
}

}  // namespace atl::launcher
