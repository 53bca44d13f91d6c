// Where islands in separate jobs meet, and who is in each outer round (issue 19).
//
// The meeting point is a c10d TCPStore (`atoll rendezvous` serves one; RendezvousServer). Each
// outer round is a quorum, agreed through the store alone: an island arriving at round r (attempt a)
// appends its id to the round's arrivals; the round closes when every expected island has arrived,
// or when at least the minimum has been there for `grace` -- whichever island sees that first
// writes the member list with compare-and-set, so all read the same list. An island that arrives
// after the close is not a member: it sits the round out and joins a later one. A round whose
// exchange fails (a member died) is met again as the next attempt, among those still there. Each
// member then builds the Gloo group of its island-local position under the round's own prefix.
//
// With a job secret (MessageAuthenticator): the store holds an admission record, a random nonce and
// its tag, written by `atoll rendezvous --secret-file` or else by the first island to arrive. An
// island whose secret does not give the same tag is refused before it arrives anywhere, one without
// a secret too; each arrival carries a proof (the tag of nonce, round, island and token), and islands
// count only arrivals whose proof holds -- so an arrival written by anyone without the secret is
// never a member. The store itself is not encrypted: the secret never travels, only tags do.
//
// A restartable rendezvous (issue 63): the records islands act on -- a round's members and outcome,
// the newest round that counted, the admission record -- are kept (RendezvousClient::persist)
// before any island acts on them, and every step below is met again from its start when the
// connection drops (RendezvousClient::run), so islands carry on across a restart of
// `atoll rendezvous --state FILE` on the same port.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/gloo_communicator.h"
#include "comm/message_authenticator.h"
#include "comm/rendezvous_address.h"
#include "comm/rendezvous_client.h"

namespace atl::comm {

// A token unique to this process (host name, process id, time): how an island job identifies its
// arrivals (IslandRendezvousOptions::token). At most 100 characters.
std::string process_token();

struct RoundMembership {
  int64_t round = 0;
  int attempt = 0;
  std::vector<int> islands;  // the members' ids, ascending: their ranks in the round's groups
  int index = -1;            // this island's rank among them; -1: it arrived after the close (or
                             // the list is an earlier run's)

  bool member() const { return index >= 0; }
};

struct IslandRendezvousOptions {
  int island = 0;       // this island's id (unique among the islands)
  int min_islands = 1;  // a round never closes with fewer
  int max_islands = 1;  // a round closes as soon as this many are there
  // How long a round waits for more islands once the minimum is there.
  std::chrono::milliseconds grace{std::chrono::seconds(10)};
  // Longest anything waits: for the minimum to arrive, for a peer in the round's groups.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // How long a lost rendezvous is waited for (a restart) before this island fails.
  std::chrono::milliseconds reconnect{std::chrono::seconds(60)};
  GlooGroupOptions gloo;  // the address this island's groups bind to
  // Who arrives as this island: every rank of one island job passes the same token (its rank 0's),
  // and a restarted island a new one, so a member list from its earlier run is not its own. Empty:
  // one of this process's own.
  std::string token;
  // The job secret; null: islands meet without one (only on a loopback rendezvous, the config says).
  std::shared_ptr<const MessageAuthenticator> authenticator;
  // What every island must agree on, one "name: value" per line (the model, the outer settings...):
  // held to those of the run's last completed round, or before one completed to the first island's
  // to arrive at the round; an island whose differ is refused there (std::invalid_argument) before
  // it arrives. Empty: not compared.
  std::string shared_settings;
};

// Every rank of every member island in one group (the rank-by-rank canonical exchange's): island
// after island in member order, each island's ranks in order.
struct EveryRankGroup {
  std::unique_ptr<GlooCommunicator> group;
  std::vector<int> ranks_per_island;  // per member, in member order
};

class IslandRendezvous {
 public:
  // Connects to the meeting point; throws std::invalid_argument naming it when it cannot be reached
  // within `options.timeout` or refuses this island (a secret that is not the job's, or none where
  // the job has one).
  IslandRendezvous(const RendezvousAddress& address, IslandRendezvousOptions options);

  // Arrives at round `round` (attempt `attempt`) and returns its agreed membership. Throws
  // std::runtime_error when fewer than min_islands arrive within the timeout.
  RoundMembership join(int64_t round, int attempt = 0);
  // The Gloo group of the round's members at island-local position `position` (every rank of a
  // member island builds its own). Blocks until every member's rank at that position has joined.
  // Throws GroupFailure when the rendezvous was lost meanwhile (and is back): the round's group
  // addresses went with it, so the islands meet the round again as the next attempt.
  std::unique_ptr<GlooCommunicator> group(const RoundMembership& membership, int position,
                                          const std::string& name);

  // The group of every rank of the round's members; this rank is rank `rank` of its island's
  // `ranks` (each island says how many it has through the store). Blocks until every rank of every
  // member has joined; throws std::runtime_error after the timeout.
  EveryRankGroup every_rank_group(const RoundMembership& membership, int rank, int ranks,
                                  const std::string& name);

  // Whether a round's exchange counts: every rank of every member says whether its own part
  // (`position` of `positions` per island) succeeded; the first rank that knows the answer -- a
  // failure of its own, every part reported a success, or the timeout -- writes the outcome once
  // (compare-and-set) and every rank returns that outcome. So a round is applied by every rank of
  // every member or by none, even when an island dies after some had their result.
  bool settle(const RoundMembership& membership, int position, int positions, bool succeeded);
  // The newest round whose exchange counted (record_round), if any: how an island that was away
  // learns where the others are.
  std::optional<int64_t> latest_round();
  // Round `round` counted: it becomes the latest (when newer), and its settings the run's.
  void record_round(int64_t round);

  const IslandRendezvousOptions& options() const { return options_; }
  // What makes the tags of a round's exchanges its own (the admission nonce and the round): the
  // session of IslandExchange's authentication (`position` -1: the group of every rank's).
  std::string session(const RoundMembership& membership, int position) const;

 private:
  void admit();
  RoundMembership join_once(int64_t round, int attempt);
  bool settle_once(const RoundMembership& membership, int position, int positions, bool succeeded);
  // The group `build()` makes; when that fails because the rendezvous was lost, GroupFailure once
  // it is back (see group()).
  template <typename Build>
  auto build_group(Build&& build) -> decltype(build());
  // Refuses this island when its shared settings differ from those of the first island to arrive at
  // round key `key` (recorded there by it).
  void compare_settings(const std::string& key);
  bool proven(int island, const std::string& token, const std::string& proof, const std::string& round) const;
  std::string proof(const std::string& round) const;

  IslandRendezvousOptions options_;
  RendezvousClient client_;
  std::string nonce_;  // the admission record's nonce ("" without a secret)
};

}  // namespace atl::comm
