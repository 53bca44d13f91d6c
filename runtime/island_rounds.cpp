#include "runtime/island_rounds.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <stdexcept>

#include "comm/gloo_communicator.h"
#include "comm/mpi_check.h"

namespace atl::runtime {
namespace {

// The token every rank of this island job arrives with at the rendezvous: rank 0's.
std::string island_token(const comm::MpiCommunicator& world) {
  constexpr int kBytes = 128;
  std::array<char, kBytes> token{};
  if (world.rank() == 0) {
    const std::string mine = comm::process_token();
    std::copy_n(mine.begin(), std::min<size_t>(mine.size(), kBytes - 1), token.begin());
  }
  MPI_CHECK(MPI_Bcast(token.data(), kBytes, MPI_CHAR, 0, world.handle()));
  return std::string(token.data());
}

// Those in `a` and not in `b` (both ascending).
std::vector<int> missing_from(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// Every member of round `round` is behind the round before it (the store recorded it done): the
// islands that held its result are gone, or every island was restarted from an older checkpoint.
std::string stale_state_message(int64_t round, int64_t newest, int64_t inner_steps) {
  return "outer round " + std::to_string(round) + ": no island met holds the result of round " +
         std::to_string(round - 1) + " (the newest here is round " + std::to_string(newest) + "'s, step " +
         std::to_string(newest * inner_steps) + "); resume an island from a checkpoint at step " +
         std::to_string((round - 1) * inner_steps) +
         " or later, or start a new atoll rendezvous to go on from here";
}

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

comm::IslandRendezvousOptions rendezvous_options(const Config& config, const comm::MpiCommunicator& world) {
  const comm::RendezvousAddress address = comm::parse_rendezvous(config.outer.rendezvous);
  comm::IslandRendezvousOptions options;
  options.island = config.outer.island;
  options.max_islands = config.parallel.islands;
  options.min_islands = config.outer.min_islands > 0 ? config.outer.min_islands : config.parallel.islands;
  options.timeout = milliseconds(config.outer.timeout_s);
  options.reconnect = milliseconds(config.outer.reconnect_s);
  // A fixed membership waits for every island; a quorum waits grace_s for more than its minimum.
  options.grace = config.islands_are_elastic() ? milliseconds(config.outer.grace_s) : options.timeout;
  options.gloo.address = comm::local_address_towards(address.host);
  options.token = island_token(world);
  options.shared_settings = island_shared_settings(config);
  if (config.outer.has_secret())
    options.authenticator = std::make_shared<comm::MessageAuthenticator>(
        comm::MessageAuthenticator::from_file(config.outer.secret_file));
  return options;
}

IslandRounds::IslandRounds(const Config& config, const comm::MpiCommunicator& world)
    : rendezvous_(std::make_unique<comm::IslandRendezvous>(comm::parse_rendezvous(config.outer.rendezvous),
                                                           rendezvous_options(config, world))),
      position_(world.rank()),
      positions_(world.size()),
      inner_steps_(config.outer.inner_steps),
      gossip_(config.outer.algorithm == OuterAlgorithm::kNoLoCo) {}

std::unique_ptr<comm::Communicator> IslandRounds::initial_group(const comm::MpiCommunicator& world) const {
  return world.split(world.rank(), 0, "island");
}

void IslandRounds::attach(optim::outer::IslandExchange& exchange) {
  exchange.settle_rounds_with(
      [this](bool succeeded) { return rendezvous_->settle(membership_, position_, positions_, succeeded); });
}

std::optional<int64_t> IslandRounds::round_to_catch_up(int64_t step) {
  phi_round_ = step / inner_steps_;
  const std::optional<int64_t> latest = rendezvous_->latest_round();
  if (latest && *latest > phi_round_) return *latest + 1;
  return std::nullopt;
}

MetRound IslandRounds::meet(int64_t round, int attempt, comm::DeviceMesh& mesh,
                            optim::outer::OuterOptimizer& outer, optim::outer::IslandExchange& exchange) {
  membership_ = rendezvous_->join(round, attempt);
  MetRound met;
  met.round = round;
  met.member = membership_.member();
  met.islands = membership_.islands;
  if (!met.member) return met;
  if (!previous_islands_.empty()) {
    met.joined = missing_from(met.islands, previous_islands_);
    met.dropped = missing_from(previous_islands_, met.islands);
  }
  try {
    mesh.replace_island_group(rendezvous_->group(membership_, position_, "island"));
    if (rendezvous_->options().authenticator)
      exchange.authenticate(
          {rendezvous_->options().authenticator, rendezvous_->session(membership_, position_)});
    comm::Communicator& group = mesh.island();
    // Who holds the newest phi: they contribute; the others take it from the first of them.
    const std::vector<double> rounds = comm::all_gather_value(group, static_cast<double>(phi_round_));
    const double newest = *std::max_element(rounds.begin(), rounds.end());
    if (newest < static_cast<double>(round - 1))
      throw std::runtime_error(stale_state_message(round, static_cast<int64_t>(newest), inner_steps_));
    const int source = static_cast<int>(std::find(rounds.begin(), rounds.end(), newest) - rounds.begin());
    std::vector<int> contributors;
    for (size_t i = 0; i < rounds.size(); ++i)
      if (rounds[i] == newest) contributors.push_back(static_cast<int>(i));
    const bool someone_behind = contributors.size() < rounds.size();
    exchange.set_contributors(std::move(contributors));
    joining_ = static_cast<double>(phi_round_) < newest;
    hand_over_from_ = -1;
    // NoLoCo's islands each hold their own phi: a joiner sits the gossip out and takes its source's
    // state as the round leaves it (hand_over). The others take phi before the round.
    if (someone_behind && gossip_) hand_over_from_ = source;
    if (someone_behind && !gossip_) take_state(group, source, round * inner_steps_, outer);
    // A NoLoCo joiner holds the state only after hand_over: met again first, it is behind again.
    if (joining_ && !gossip_) phi_round_ = static_cast<int64_t>(newest);
    met.caught_up = joining_;
  } catch (const comm::GroupFailure& e) {
    rendezvous_->settle(membership_, position_, positions_, false);
    throw optim::outer::RoundFailed(std::string("meeting: ") + e.what());
  }
  return met;
}

void IslandRounds::take_state(comm::Communicator& group, int source, int64_t boundary,
                              optim::outer::OuterOptimizer& outer) {
  // phi() and momentum() are the optimizer's own tensors: the broadcast lands in place.
  group.broadcast(outer.phi(), source)->wait();
  group.broadcast(outer.momentum(), source)->wait();
  // Delayed DiLoCo: the previous round's result, in flight until this boundary's step applies it.
  const at::Tensor in_flight = outer.in_flight_before(boundary);
  if (in_flight.defined()) group.broadcast(in_flight, source)->wait();
  if (!joining_) return;
  outer.write_values(outer.phi());  // theta = phi: its pseudo-gradient is exactly zero
  if (in_flight.defined()) outer.take_in_flight(boundary, in_flight);
  outer.clear_error_feedback();
}

void IslandRounds::hand_over(comm::DeviceMesh& mesh, optim::outer::OuterOptimizer& outer) {
  if (hand_over_from_ < 0) return;
  try {
    take_state(mesh.island(), hand_over_from_, 0, outer);
  } catch (const comm::GroupFailure& e) {
    // The round counted without this joiner, which holds no state to go on from.
    if (joining_)
      throw std::runtime_error(std::string("islands: the member to take the state from was lost (") +
                               e.what() + "); relaunch this island to catch up");
  }
}

void IslandRounds::completed(int64_t round) {
  phi_round_ = round;
  previous_islands_ = membership_.islands;
  rendezvous_->record_round(round);
}

}  // namespace atl::runtime
