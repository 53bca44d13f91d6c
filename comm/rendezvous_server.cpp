#include "comm/rendezvous_server.h"

#include <iostream>
#include <stdexcept>
#include <vector>

#include "comm/gloo_communicator.h"

namespace atl::comm {
namespace {

constexpr const char* kAdmissionContext = "atoll rendezvous admission";
// How long the keeper's wait for a request lasts before it waits again.
constexpr std::chrono::minutes kKeeperWait{10};

// "ACK\nKEY\nKEY..." -> {ACK, KEY, KEY...}
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    out.push_back(text.substr(start, end - start));
  out.push_back(text.substr(start));
  return out;
}

}  // namespace

std::string new_admission_record(const MessageAuthenticator& authenticator) {
  const std::string nonce = random_hex(16);
  return nonce + ":" + authenticator.hex_tag(kAdmissionContext, nonce);
}

std::optional<std::string> admission_nonce(const MessageAuthenticator& authenticator,
                                           const std::string& record) {
  const size_t colon = record.find(':');
  if (colon == std::string::npos ||
      !authenticator.verify_hex(kAdmissionContext, record.substr(0, colon), record.substr(colon + 1)))
    return std::nullopt;
  return record.substr(0, colon);
}

RendezvousServer::RendezvousServer(uint16_t port, std::shared_ptr<const MessageAuthenticator> authenticator,
                                   const std::string& state_file)
    : state_(RendezvousState::load(state_file)), stop_request_("stop " + random_hex(16)) {
  resumed_records_ = state_.records().size();
  resumed_round_ = state_.latest_round();
  const auto admission = state_.records().find(kAdmissionKey);
  const bool admitted = admission != state_.records().end();
  if (authenticator && admitted && !admission_nonce(*authenticator, admission->second))
    throw std::invalid_argument("atoll rendezvous: " + authenticator->source() +
                                " is not the secret of the run kept in --state " + state_file +
                                "; pass that run's secret file, or start a new run with a new --state file");
  std::vector<std::pair<std::string, std::optional<std::string>>> first_records;
  if (authenticator && !admitted)
    first_records.emplace_back(kAdmissionKey, new_admission_record(*authenticator));
  try {
    // Written now, so an unwritable path is found at start, not when the first round closes.
    state_.record(first_records, /*write_always=*/true);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string(e.what()) + "; give --state a path in a writable directory");
  }

  c10d::TCPStoreOptions options;
  options.port = port;
  options.isServer = true;
  options.waitWorkers = false;  // islands come and go; none is awaited at start
  try {
    store_ = c10::make_intrusive<c10d::TCPStore>("0.0.0.0", options);
  } catch (const c10::Error& e) {
    throw std::runtime_error("rendezvous: cannot serve on port " + std::to_string(port) + ": " +
                             one_line_reason(e) + "; pick a free port (--port)");
  }
  for (const auto& [key, value] : state_.records()) store_->set(key, store_bytes(value));

  c10d::TCPStoreOptions keeper;
  keeper.port = store_->getPort();
  keeper.timeout = kKeeperWait;
  auto connection = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", keeper);
  // Requests made before the keeper starts wait in the queue. Nothing after it can throw.
  store_->set(durable::kReady, store_bytes("1"));
  keeper_ = std::thread([this, connection] { keep(connection); });
}

RendezvousServer::~RendezvousServer() {
  try {
    store_->queuePush(durable::kRequests, store_bytes(stop_request_));
  } catch (const c10::Error& e) {
    std::cerr << "rendezvous: could not stop the state keeper: " << one_line_reason(e) << std::endl;
  }
  if (keeper_.joinable()) keeper_.join();
}

void RendezvousServer::keep(c10::intrusive_ptr<c10d::TCPStore> connection) {
  for (;;) {
    std::string request;
    try {
      request = store_text(connection->queuePop(durable::kRequests, /*block=*/true));
    } catch (const c10::DistStoreError&) {
      continue;  // no request within kKeeperWait
    } catch (const c10::Error& e) {
      std::cerr << "rendezvous: the state keeper lost the store (" << one_line_reason(e)
                << "); islands' records are no longer kept" << std::endl;
      return;
    }
    if (request == stop_request_) return;
    const std::vector<std::string> lines = lines_of(request);
    std::vector<std::pair<std::string, std::optional<std::string>>> changes;
    for (size_t i = 1; i < lines.size(); ++i)
      changes.emplace_back(lines[i], connection->check({lines[i]})
                                         ? std::optional<std::string>(store_text(connection->get(lines[i])))
                                         : std::nullopt);
    try {
      state_.record(changes);
    } catch (const std::runtime_error& e) {
      // Unacknowledged, the island's request times out there and its round fails: never a record
      // acted on that a restart would lose.
      std::cerr << e.what() << "; the islands' request is not acknowledged" << std::endl;
      continue;
    }
    connection->set(lines[0], store_bytes("1"));
  }
}

}  // namespace atl::comm
