// `atoll rendezvous [--port P] [--secret-file F] [--state FILE]`: serves the meeting point of islands
// that run as separate jobs (outer.rendezvous: HOST:P in their configs) until SIGINT or SIGTERM. It
// holds no training state: islands agree on each round's members and reach each other through it,
// and one that restarts finds the others there again. With the job secret, it admits only islands
// that prove it (otherwise the first island to arrive sets the proof the others must match). With
// --state, what islands act on (rounds that counted, members, outcomes, island ids' holders) is kept
// in FILE before they act on it, and a rendezvous restarted on the same port with the same FILE
// goes on from there while the islands reconnect (RendezvousServer).
#include <signal.h>

#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "comm/message_authenticator.h"
#include "comm/rendezvous_server.h"
#include "launcher/commands.h"

namespace atl::launcher {
namespace {

constexpr const char* kRendezvousUsage =
    "atoll rendezvous [--port P] [--secret-file F] [--state FILE]   (port default 29400, 0 picks a free one; "
    "F: the job secret the islands' outer.secret_file holds; FILE: where the run's rounds are kept, resumed "
    "when it exists)";
constexpr uint16_t kDefaultPort = 29400;

struct RendezvousOptions {
  uint16_t port = kDefaultPort;
  std::string secret_file;
  std::string state_file;  // "": nothing kept
};

// The value of `--name V` or `--name=V` at args[i] (advancing i past V), or nullopt.
std::optional<std::string> option_value(const Args& args, size_t& i, const std::string& name) {
  if (args[i] == name && i + 1 < args.size()) return args[++i];
  if (args[i].rfind(name + "=", 0) == 0) return args[i].substr(name.size() + 1);
  return std::nullopt;
}

RendezvousOptions parse_options(const Args& args) {
  RendezvousOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    if (std::optional<std::string> file = option_value(args, i, "--secret-file")) {
      options.secret_file = *file;
      continue;
    }
    if (std::optional<std::string> file = option_value(args, i, "--state")) {
      if (file->empty())
        throw std::invalid_argument("--state needs a file path; usage: " + std::string(kRendezvousUsage));
      options.state_file = *file;
      continue;
    }
    const std::optional<std::string> value = option_value(args, i, "--port");
    if (!value)
      throw std::invalid_argument("unexpected argument '" + args[i] + "'; usage: " + kRendezvousUsage);
    if (value->empty() || value->find_first_not_of("0123456789") != std::string::npos || value->size() > 5 ||
        std::stoi(*value) > 65535)
      throw std::invalid_argument("--port " + *value +
                                  " is not a port number (0-65535); usage: " + kRendezvousUsage);
    options.port = static_cast<uint16_t>(std::stoi(*value));
  }
  return options;
}

}  // namespace

int rendezvous_command(const Args& args) {
  if (wants_help(args)) {
    std::cout << "usage: " << kRendezvousUsage << "\n";
    return 0;
  }
  const RendezvousOptions options = parse_options(args);
  std::shared_ptr<const comm::MessageAuthenticator> authenticator;
  if (!options.secret_file.empty())
    authenticator = std::make_shared<comm::MessageAuthenticator>(
        comm::MessageAuthenticator::from_file(options.secret_file, "--secret-file"));
  // Blocked before the server's threads start, so they inherit the mask and sigwait below receives
  // the signal.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  comm::RendezvousServer server(options.port, authenticator, options.state_file);
  std::cout << "atoll rendezvous: serving islands on port " << server.port()
            << (authenticator ? " to islands holding the job secret" : "")
            << " (islands set outer.rendezvous: THIS_HOST:" << server.port()
            << "; SIGINT or SIGTERM stops it)" << std::endl;
  if (!options.state_file.empty()) {
    std::cout << "atoll rendezvous: keeping the run's rounds in " << options.state_file;
    if (server.resumed_records() == 0)
      std::cout << " (a new run)";
    else
      std::cout << " (resumed: " << server.resumed_records() << " records, the newest round that counted "
                << (server.resumed_round() ? std::to_string(*server.resumed_round()) : "none yet") << ")";
    std::cout << std::endl;
  }
  int signal = 0;
  sigwait(&stop, &signal);
  std::cout << "atoll rendezvous: stopped by " << (signal == SIGINT ? "SIGINT" : "SIGTERM") << std::endl;
  return 0;
}

}  // namespace atl::launcher
