#include "comm/island_rendezvous.h"

#include "comm/rendezvous_server.h"
#include "comm/rendezvous_state.h"

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

namespace {

IslandRendezvousOptions checked(IslandRendezvousOptions options) {
  if (options.token.empty()) options.token = process_token();
  if (options.min_islands < 1 || options.max_islands < options.min_islands)
    throw std::invalid_argument("outer: islands between " + std::to_string(options.min_islands) + " and " +
                                std::to_string(options.max_islands) +
                                " is not a range; the minimum must be >= 1 and at most the maximum");
  return options;
}

}  // namespace

IslandRendezvous::IslandRendezvous(const RendezvousAddress& address, IslandRendezvousOptions options)
    : options_(checked(std::move(options))), client_(address, options_.timeout, options_.reconnect) {
  client_.run([&] { admit(); });
}

void IslandRendezvous::compare_settings(const std::string& key) {
  c10d::Store& store = client_.store();
  // A closed round (an earlier run's, which this island will not be a member of) is not compared.
  if (options_.shared_settings.empty() || store.check({key + "members"})) return;
  // The run's settings once a round completed (record_round), else the first arrival's at this round.
  std::string recorded, whose;
  if (store.check({kRunSettingsKey})) {
    recorded = store_text(store.get(kRunSettingsKey));
    const std::optional<int64_t> latest =
        store.check({durable::kLatestRound})
            ? std::optional<int64_t>(std::stoll(store_text(store.get(durable::kLatestRound))))
            : std::nullopt;
    whose = "the run's (its islands' at round " + std::to_string(latest.value_or(0)) + ")";
  } else {
    const std::string mine = std::to_string(options_.island) + "\n" + options_.shared_settings;
    const std::string first = store_text(store.compareSet(key + kSettingsKey, {}, store_bytes(mine)));
    const size_t newline = first.find('\n');
    recorded = first.substr(newline + 1);
    whose = "island " + first.substr(0, newline) + "'s, the first to arrive,";
  }
  const auto [setting, theirs] = first_difference(options_.shared_settings, recorded);
  if (setting.empty()) return;
  throw std::invalid_argument(
      client_.where() + " refused island " + std::to_string(options_.island) + ": its " + setting +
      " differs from " + whose + " " +
      (theirs.find(": ") == std::string::npos ? "(unset)" : theirs.substr(theirs.find(": ") + 2)) +
      "; every island job of a run needs the same model, outer settings, islands, seed, "
      "steps and global batch");
}

void IslandRendezvous::admit() {
  c10d::Store& store = client_.store();
  if (!options_.authenticator) {
    if (store.check({kAdmissionKey}))
      throw std::invalid_argument(client_.where() + " refused island " + std::to_string(options_.island) +
                                  ": this job's islands prove a job secret; set outer.secret_file to the "
                                  "job's secret file (the one the other islands use)");
    return;
  }
  // The first island to arrive writes the record when the rendezvous did not; everyone else checks it.
  // Its nonce is in every tag of the run, so it is kept before any island uses it.
  const std::string mine = new_admission_record(*options_.authenticator);
  const std::string record = store_text(store.compareSet(kAdmissionKey, {}, store_bytes(mine)));
  const std::optional<std::string> nonce = admission_nonce(*options_.authenticator, record);
  if (!nonce)
    throw std::invalid_argument(client_.where() + " refused island " + std::to_string(options_.island) +
                                ": its " + options_.authenticator->source() +
                                " is not the job's secret; copy the secret file the other islands use");
  client_.persist({kAdmissionKey});
  nonce_ = *nonce;
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
  return client_.run([&] { return join_once(round, attempt); });
}

RoundMembership IslandRendezvous::join_once(int64_t round, int attempt) {
  c10d::Store& store = client_.store();
  const std::string key = round_key(round, attempt);
  compare_settings(key);  // before arriving: a refused island never becomes a member
  store.append(key + "arrivals",
               store_bytes(std::to_string(options_.island) + ":" + options_.token + ":" + proof(key) + ","));
  const auto accepted = [&](const Arrival& a) { return proven(a.island, a.token, a.proof, key); };
  const auto start = Clock::now();
  std::optional<Clock::time_point> quorum_since;  // when this island first saw the minimum there
  while (!store.check({key + "members"})) {
    const std::vector<Arrival> arrived = parse_arrivals(store_text(store.get(key + "arrivals")), accepted);
    const auto now = Clock::now();
    if (static_cast<int>(arrived.size()) >= options_.min_islands && !quorum_since) quorum_since = now;
    const bool everyone = static_cast<int>(arrived.size()) >= options_.max_islands;
    if (everyone || (quorum_since && now - *quorum_since >= options_.grace)) {
      // The first closer's list wins; a later compareSet finds the key set and changes nothing.
      store.compareSet(key + "members", {}, store_bytes(join_arrivals(arrived)));
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
  // Whoever wrote the list, it is kept before any member acts on it: a restarted rendezvous closes
  // the round with the same members.
  client_.persist({key + "members"});
  RoundMembership membership;
  membership.round = round;
  membership.attempt = attempt;
  for (const Arrival& a : parse_arrivals(store_text(store.get(key + "members")), accepted)) {
    if (a.island == options_.island && a.token == options_.token)
      membership.index = static_cast<int>(membership.islands.size());
    membership.islands.push_back(a.island);
  }
  return membership;
}

bool IslandRendezvous::settle(const RoundMembership& membership, int position, int positions,
                              bool succeeded) {
  return client_.run([&] { return settle_once(membership, position, positions, succeeded); });
}

bool IslandRendezvous::settle_once(const RoundMembership& membership, int position, int positions,
                                   bool succeeded) {
  c10d::Store& store = client_.store();
  const std::string key = round_key(membership.round, membership.attempt) + "settle/";
  // The outcome is kept before this rank acts on it: after a restart every member reads the same.
  const auto kept_outcome = [&] {
    client_.persist({key + "outcome"});
    return store_text(store.get(key + "outcome")) == "1";
  };
  const auto decide = [&](const char* outcome) {
    store.compareSet(key + "outcome", {}, store_bytes(outcome));  // the first decision stands
    return kept_outcome();
  };
  // A failure decides before its report exists, so whoever sees every report present finds the
  // outcome already written when one of them is a failure.
  if (!succeeded) decide("0");
  store.set(key + std::to_string(options_.island) + "/" + std::to_string(position),
            store_bytes(succeeded ? "1" : "0"));
  std::vector<std::string> reports;
  for (int island : membership.islands)
    for (int p = 0; p < positions; ++p)
      reports.push_back(key + std::to_string(island) + "/" + std::to_string(p));
  const auto start = Clock::now();
  while (!store.check({key + "outcome"})) {
    if (store.check(reports)) return decide("1");
    if (Clock::now() - start > options_.timeout) return decide("0");  // a member died before reporting
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return kept_outcome();
}

std::optional<int64_t> IslandRendezvous::latest_round() {
  return client_.run([&]() -> std::optional<int64_t> {
    c10d::Store& store = client_.store();
    if (!store.check({durable::kLatestRound})) return std::nullopt;
    return std::stoll(store_text(store.get(durable::kLatestRound)));
  });
}

void IslandRendezvous::record_round(int64_t round) {
  client_.run([&] {
    const std::optional<int64_t> latest = latest_round();
    if (latest && round <= *latest) return;
    c10d::Store& store = client_.store();
    store.set(durable::kLatestRound, store_bytes(std::to_string(round)));
    // The settings every member of a completed round agreed on: later arrivals are held to them.
    if (!options_.shared_settings.empty()) store.set(kRunSettingsKey, store_bytes(options_.shared_settings));
    client_.persist({durable::kLatestRound, kRunSettingsKey});
  });
}

template <typename Build>
auto IslandRendezvous::build_group(Build&& build) -> decltype(build()) {
  try {
    return build();
  } catch (const std::runtime_error& e) {
    // Gloo says only that it could not connect; a store call tells whether the rendezvous is gone.
    try {
      client_.store().check({durable::kReady});
    } catch (const std::exception& lost) {
      if (!connection_lost(lost)) throw;
      client_.reconnect(lost);
      throw GroupFailure(client_.where() + " was lost while the round's group formed (" + e.what() + ")");
    }
    throw;
  }
}

std::unique_ptr<GlooCommunicator> IslandRendezvous::group(const RoundMembership& membership, int position,
                                                          const std::string& name) {
  if (!membership.member())
    throw std::logic_error("island " + std::to_string(options_.island) + " is not a member of round " +
                           std::to_string(membership.round));
  GlooGroupOptions gloo = options_.gloo;
  gloo.timeout = options_.timeout;
  return build_group([&] {
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(
        round_key(membership.round, membership.attempt) + "position/" + std::to_string(position),
        client_.store_pointer());
    return std::make_unique<GlooCommunicator>(prefixed, membership.index,
                                              static_cast<int>(membership.islands.size()), name, gloo);
  });
}

EveryRankGroup IslandRendezvous::every_rank_group(const RoundMembership& membership, int rank, int ranks,
                                                  const std::string& name) {
  if (!membership.member())
    throw std::logic_error("island " + std::to_string(options_.island) + " is not a member of round " +
                           std::to_string(membership.round));
  const std::string key = round_key(membership.round, membership.attempt) + "ranks/";
  c10d::Store& store = client_.store();
  if (rank == 0) store.set(key + std::to_string(options_.island), store_bytes(std::to_string(ranks)));
  EveryRankGroup out;
  int first = 0, size = 0;
  for (int island : membership.islands) {
    const std::string island_key = key + std::to_string(island);
    store.wait({island_key}, options_.timeout);
    out.ranks_per_island.push_back(std::stoi(store_text(store.get(island_key))));
    if (island == options_.island) first = size;
    size += out.ranks_per_island.back();
  }
  GlooGroupOptions gloo = options_.gloo;
  gloo.timeout = options_.timeout;
  out.group = build_group([&] {
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(
        round_key(membership.round, membership.attempt) + "every rank", client_.store_pointer());
    return std::make_unique<GlooCommunicator>(prefixed, first + rank, size, name, gloo);
  });
  return out;
}

}  // namespace atl::comm
