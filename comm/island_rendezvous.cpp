#include "comm/island_rendezvous.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <unistd.h>

namespace atl::comm {
namespace {

using Clock = std::chrono::steady_clock;

// An island's arrival: its id, the token of the process (or job) that arrived as it, so that a
// list written by an earlier run of the same island (an earlier attempt) is not taken for its own,
// and its proof of the job secret ("" without one).
struct Arrival {
  int island;
  std::string token;
  std::string proof;
};

// "2:b:p,0:a:q,1:c:r,2:d:s," -> (0,a,q) (1,c,r) (2,b,p): sorted by island, the first arrival of
// each that `accepted` keeps.
template <typename Accept>
std::vector<Arrival> parse_arrivals(const std::string& text, Accept accepted) {
  std::vector<Arrival> arrivals;
  std::stringstream in(text);
  std::string entry;
  while (std::getline(in, entry, ',')) {
    const size_t first = entry.find(':'), last = entry.rfind(':');
    if (first == std::string::npos || last == first) continue;
    Arrival arrival{0, entry.substr(first + 1, last - first - 1), entry.substr(last + 1)};
    try {
      arrival.island = std::stoi(entry.substr(0, first));
    } catch (const std::exception&) {
      continue;  // not an island's entry
    }
    if (!accepted(arrival)) continue;
    if (std::none_of(arrivals.begin(), arrivals.end(),
                     [&](const Arrival& a) { return a.island == arrival.island; }))
      arrivals.push_back(std::move(arrival));
  }
  std::sort(arrivals.begin(), arrivals.end(),
            [](const Arrival& a, const Arrival& b) { return a.island < b.island; });
  return arrivals;
}

std::string join_arrivals(const std::vector<Arrival>& arrivals) {
  std::string out;
  for (const Arrival& a : arrivals) out += std::to_string(a.island) + ":" + a.token + ":" + a.proof + ",";
  return out;
}

constexpr const char* kAdmissionKey = "admission";
constexpr const char* kAdmissionContext = "atoll rendezvous admission";
constexpr const char* kArrivalContext = "atoll rendezvous arrival";
constexpr const char* kSettingsKey = "shared_settings";
constexpr const char* kRunSettingsKey = "run_settings";

// The first line of `mine` that `theirs` does not hold, and that setting's line in `theirs`
// ({"", ""} when they hold the same lines).
std::pair<std::string, std::string> first_difference(const std::string& mine, const std::string& theirs) {
  std::istringstream my_lines(mine);
  for (std::string line; std::getline(my_lines, line);) {
    const std::string name = line.substr(0, line.find(':') + 1);
    std::istringstream their_lines(theirs);
    std::string other;
    while (std::getline(their_lines, other) && other.rfind(name, 0) != 0) {
    }
    if (other != line) return {line, other};
  }
  if (mine.size() != theirs.size()) return {"settings", "(another Atoll's)"};  // another version's
  return {};
}

// The admission record: a fresh nonce and its tag under the job secret.
std::string admission_record(const MessageAuthenticator& authenticator) {
  const std::string nonce = random_hex(16);
  return nonce + ":" + authenticator.hex_tag(kAdmissionContext, nonce);
}

std::string round_key(int64_t round, int attempt) {
  return "round/" + std::to_string(round) + "/" + std::to_string(attempt) + "/";
}

}  // namespace

std::string process_token() {
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "-" + std::to_string(getpid()) + "-" +
         std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
}

std::vector<uint8_t> store_bytes(const std::string& text) {
  return {text.begin(), text.end()};
}

std::string store_text(const std::vector<uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}

std::string rendezvous_name(const RendezvousAddress& address) {
  return "outer.rendezvous " + address.host + ":" + std::to_string(address.port);
}

c10::intrusive_ptr<c10d::Store> connect_rendezvous(const RendezvousAddress& address,
                                                   std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = address.port;
  options.isServer = false;
  options.timeout = timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(address.host, options);
  } catch (const c10::Error& e) {
    throw std::invalid_argument(rendezvous_name(address) + " could not be reached within " +
                                std::to_string(timeout.count() / 1000) + " s (" + one_line_reason(e) +
                                "); start it with `atoll rendezvous --port " + std::to_string(address.port) +
                                "` or fix the address");
  }
}

RendezvousServer::RendezvousServer(uint16_t port, std::shared_ptr<const MessageAuthenticator> authenticator) {
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
  if (authenticator) store_->set(kAdmissionKey, store_bytes(admission_record(*authenticator)));
}

IslandRendezvous::IslandRendezvous(const RendezvousAddress& address, IslandRendezvousOptions options)
    : options_(std::move(options)) {
  if (options_.token.empty()) options_.token = process_token();
  if (options_.min_islands < 1 || options_.max_islands < options_.min_islands)
    throw std::invalid_argument("outer: islands between " + std::to_string(options_.min_islands) + " and " +
                                std::to_string(options_.max_islands) +
                                " is not a range; the minimum must be >= 1 and at most the maximum");
  where_ = rendezvous_name(address);
  store_ = connect_rendezvous(address, options_.timeout);
  admit(where_);
}

void IslandRendezvous::compare_settings(const std::string& key) {
  // A closed round (an earlier run's, which this island will not be a member of) is not compared.
  if (options_.shared_settings.empty() || store_->check({key + "members"})) return;
  // The run's settings once a round completed (record_round), else the first arrival's at this round.
  std::string recorded, whose;
  if (store_->check({kRunSettingsKey})) {
    recorded = store_text(store_->get(kRunSettingsKey));
    whose = "the run's (its islands' at round " + std::to_string(latest_round().value_or(0)) + ")";
  } else {
    const std::string mine = std::to_string(options_.island) + "\n" + options_.shared_settings;
    const std::string first = store_text(store_->compareSet(key + kSettingsKey, {}, store_bytes(mine)));
    const size_t newline = first.find('\n');
    recorded = first.substr(newline + 1);
    whose = "island " + first.substr(0, newline) + "'s, the first to arrive,";
  }
  const auto [setting, theirs] = first_difference(options_.shared_settings, recorded);
  if (setting.empty()) return;
  throw std::invalid_argument(
      where_ + " refused island " + std::to_string(options_.island) + ": its " + setting + " differs from " +
      whose + " " +
      (theirs.find(": ") == std::string::npos ? "(unset)" : theirs.substr(theirs.find(": ") + 2)) +
      "; every island job of a run needs the same model, outer settings, islands, seed, "
      "steps and global batch");
}

void IslandRendezvous::admit(const std::string& where) {
  if (!options_.authenticator) {
    if (store_->check({kAdmissionKey}))
      throw std::invalid_argument(where + " refused island " + std::to_string(options_.island) +
                                  ": this job's islands prove a job secret; set outer.secret_file to the "
                                  "job's secret file (the one the other islands use)");
    return;
  }
  // The first island to arrive writes the record when the rendezvous did not; everyone else checks it.
  const std::string mine = admission_record(*options_.authenticator);
  const std::string record = store_text(store_->compareSet(kAdmissionKey, {}, store_bytes(mine)));
  const size_t colon = record.find(':');
  if (colon == std::string::npos || !options_.authenticator->verify_hex(
                                        kAdmissionContext, record.substr(0, colon), record.substr(colon + 1)))
    throw std::invalid_argument(where + " refused island " + std::to_string(options_.island) + ": its " +
                                options_.authenticator->source() +
                                " is not the job's secret; copy the secret file the other islands use");
  nonce_ = record.substr(0, colon);
}

std::string IslandRendezvous::proof(const std::string& round) const {
  if (!options_.authenticator) return "";
  return options_.authenticator->hex_tag(
      kArrivalContext, nonce_ + "|" + round + "|" + std::to_string(options_.island) + "|" + options_.token);
}

bool IslandRendezvous::proven(int island, const std::string& token, const std::string& given,
                              const std::string& round) const {
  if (!options_.authenticator) return true;
  return options_.authenticator->verify_hex(
      kArrivalContext, nonce_ + "|" + round + "|" + std::to_string(island) + "|" + token, given);
}

std::string IslandRendezvous::session(const RoundMembership& membership, int position) const {
  return nonce_ + "|" + round_key(membership.round, membership.attempt) + "position/" +
         std::to_string(position);
}

RoundMembership IslandRendezvous::join(int64_t round, int attempt) {
  const std::string key = round_key(round, attempt);
  compare_settings(key);  // before arriving: a refused island never becomes a member
  store_->append(key + "arrivals", store_bytes(std::to_string(options_.island) + ":" + options_.token + ":" +
                                               proof(key) + ","));
  const auto accepted = [&](const Arrival& a) { return proven(a.island, a.token, a.proof, key); };
  const auto start = Clock::now();
  std::optional<Clock::time_point> quorum_since;  // when this island first saw the minimum there
  while (!store_->check({key + "members"})) {
    const std::vector<Arrival> arrived = parse_arrivals(store_text(store_->get(key + "arrivals")), accepted);
    const auto now = Clock::now();
    if (static_cast<int>(arrived.size()) >= options_.min_islands && !quorum_since) quorum_since = now;
    const bool everyone = static_cast<int>(arrived.size()) >= options_.max_islands;
    if (everyone || (quorum_since && now - *quorum_since >= options_.grace)) {
      // The first closer's list wins; a later compareSet finds the key set and changes nothing.
      store_->compareSet(key + "members", {}, store_bytes(join_arrivals(arrived)));
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
  for (const Arrival& a : parse_arrivals(store_text(store_->get(key + "members")), accepted)) {
    if (a.island == options_.island && a.token == options_.token)
      membership.index = static_cast<int>(membership.islands.size());
    membership.islands.push_back(a.island);
  }
  return membership;
}

bool IslandRendezvous::settle(const RoundMembership& membership, int position, int positions,
                              bool succeeded) {
  const std::string key = round_key(membership.round, membership.attempt) + "settle/";
  const auto decide = [&](const char* outcome) {
    return store_text(store_->compareSet(key + "outcome", {}, store_bytes(outcome))) == "1";
  };
  // A failure decides before its report exists, so whoever sees every report present finds the
  // outcome already written when one of them is a failure.
  if (!succeeded) decide("0");
  store_->set(key + std::to_string(options_.island) + "/" + std::to_string(position),
              store_bytes(succeeded ? "1" : "0"));
  std::vector<std::string> reports;
  for (int island : membership.islands)
    for (int p = 0; p < positions; ++p)
      reports.push_back(key + std::to_string(island) + "/" + std::to_string(p));
  const auto start = Clock::now();
  while (!store_->check({key + "outcome"})) {
    if (store_->check(reports)) return decide("1");
    if (Clock::now() - start > options_.timeout) return decide("0");  // a member died before reporting
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return store_text(store_->get(key + "outcome")) == "1";
}

std::optional<int64_t> IslandRendezvous::latest_round() {
  if (!store_->check({"latest_round"})) return std::nullopt;
  return std::stoll(store_text(store_->get("latest_round")));
}

void IslandRendezvous::record_round(int64_t round) {
  const std::optional<int64_t> latest = latest_round();
  if (latest && round <= *latest) return;
  store_->set("latest_round", store_bytes(std::to_string(round)));
  // The settings every member of a completed round agreed on: later arrivals are held to them.
  if (!options_.shared_settings.empty()) store_->set(kRunSettingsKey, store_bytes(options_.shared_settings));
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

EveryRankGroup IslandRendezvous::every_rank_group(const RoundMembership& membership, int rank, int ranks,
                                                  const std::string& name) {
  if (!membership.member())
    throw std::logic_error("island " + std::to_string(options_.island) + " is not a member of round " +
                           std::to_string(membership.round));
  const std::string key = round_key(membership.round, membership.attempt) + "ranks/";
  if (rank == 0) store_->set(key + std::to_string(options_.island), store_bytes(std::to_string(ranks)));
  EveryRankGroup out;
  int first = 0, size = 0;
  for (int island : membership.islands) {
    const std::string island_key = key + std::to_string(island);
    store_->wait({island_key}, options_.timeout);
    out.ranks_per_island.push_back(std::stoi(store_text(store_->get(island_key))));
    if (island == options_.island) first = size;
    size += out.ranks_per_island.back();
  }
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>(
      round_key(membership.round, membership.attempt) + "every rank", store_);
  GlooGroupOptions gloo = options_.gloo;
  gloo.timeout = options_.timeout;
  out.group = std::make_unique<GlooCommunicator>(prefixed, first + rank, size, name, gloo);
  return out;
}

}  // namespace atl::comm
