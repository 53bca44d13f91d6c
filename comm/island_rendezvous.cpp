#include "comm/island_rendezvous.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace atl::comm {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<uint8_t> bytes_of(const std::string& text) {
  return {text.begin(), text.end()};
}
std::string text_of(const std::vector<uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}

// "2,0,1," -> {0, 1, 2}: ids in a comma-terminated list, sorted, duplicates dropped.
std::vector<int> parse_ids(const std::string& text) {
  std::vector<int> ids;
  std::stringstream in(text);
  std::string id;
  while (std::getline(in, id, ','))
    if (!id.empty()) ids.push_back(std::stoi(id));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::string join_ids(const std::vector<int>& ids) {
  std::string out;
  for (int id : ids) out += std::to_string(id) + ",";
  return out;
}

std::string round_key(int64_t round, int attempt) {
  return "round/" + std::to_string(round) + "/" + std::to_string(attempt) + "/";
}

}  // namespace

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

RendezvousServer::RendezvousServer(uint16_t port) {
  c10d::TCPStoreOptions options;
  options.port = port;
  options.isServer = true;
  options.waitWorkers = false;  // islands come and go; none is awaited at start
  try {
    store_ = c10::make_intrusive<c10d::TCPStore>("0.0.0.0", options);
  } catch (const c10::Error& e) {
    throw std::runtime_error("rendezvous: cannot serve on port " + std::to_string(port) + ": " + one_line_reason(e) +
                             "; pick a free port (--port)");
  }
}

IslandRendezvous::IslandRendezvous(const RendezvousAddress& address, IslandRendezvousOptions options)
    : options_(std::move(options)) {
  if (options_.min_islands < 1 || options_.max_islands < options_.min_islands)
    throw std::invalid_argument("outer: islands between " + std::to_string(options_.min_islands) + " and " +
                                std::to_string(options_.max_islands) +
                                " is not a range; the minimum must be >= 1 and at most the maximum");
  c10d::TCPStoreOptions store_options;
  store_options.port = address.port;
  store_options.isServer = false;
  store_options.timeout = options_.timeout;
  try {
    store_ = c10::make_intrusive<c10d::TCPStore>(address.host, store_options);
  } catch (const c10::Error& e) {
    throw std::runtime_error("outer.rendezvous " + address.host + ":" + std::to_string(address.port) +
                             " could not be reached within " +
                             std::to_string(options_.timeout.count() / 1000) + " s (" + one_line_reason(e) +
                             "); start it with `atoll rendezvous --port " + std::to_string(address.port) +
                             "` or fix the address");
  }
}

RoundMembership IslandRendezvous::join(int64_t round, int attempt) {
  const std::string key = round_key(round, attempt);
  store_->append(key + "arrivals", bytes_of(std::to_string(options_.island) + ","));
  const auto start = Clock::now();
  std::optional<Clock::time_point> quorum_since;  // when this island first saw the minimum there
  while (!store_->check({key + "members"})) {
    const std::vector<int> arrived = parse_ids(text_of(store_->get(key + "arrivals")));
    const auto now = Clock::now();
    if (static_cast<int>(arrived.size()) >= options_.min_islands && !quorum_since) quorum_since = now;
    const bool everyone = static_cast<int>(arrived.size()) >= options_.max_islands;
    if (everyone || (quorum_since && now - *quorum_since >= options_.grace)) {
      // The first closer's list wins; a later compareSet finds the key set and changes nothing.
      store_->compareSet(key + "members", {}, bytes_of(join_ids(arrived)));
      break;
    }
    if (!quorum_since && now - start > options_.timeout)
      throw std::runtime_error("outer rendezvous: round " + std::to_string(round) + ": " +
                               std::to_string(arrived.size()) + " of the minimum " +
                               std::to_string(options_.min_islands) + " islands arrived within " +
                               std::to_string(options_.timeout.count() / 1000) +
                               " s; start the other islands or lower the minimum");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  RoundMembership membership;
  membership.round = round;
  membership.attempt = attempt;
  membership.islands = parse_ids(text_of(store_->get(key + "members")));
  const auto me = std::find(membership.islands.begin(), membership.islands.end(), options_.island);
  if (me != membership.islands.end()) membership.index = static_cast<int>(me - membership.islands.begin());
  return membership;
}

std::unique_ptr<GlooCommunicator> IslandRendezvous::group(const RoundMembership& membership, int position,
                                                          const std::string& name) {
  if (!membership.member())
    throw std::logic_error("island " + std::to_string(options_.island) + " is not a member of round " +
                           std::to_string(membership.round));
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>(
      round_key(membership.round, membership.attempt) + "position/" + std::to_string(position), store_);
  GlooGroupOptions gloo = options_.gloo;
  gloo.timeout = options_.timeout;
  return std::make_unique<GlooCommunicator>(prefixed, membership.index,
                                            static_cast<int>(membership.islands.size()), name, gloo);
}

}  // namespace atl::comm
