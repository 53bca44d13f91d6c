// Islands as separate jobs whose membership is a quorum per outer round (issue 19;
// outer.min_islands below parallel.islands). At every round boundary each island meets the others
// at the rendezvous (IslandRendezvous: at least min_islands, more within grace_s), and the round's
// members build a fresh Gloo group per island-local position. Islands that did not come are the
// round's drops; the survivors average among themselves. An island that is behind -- restarted from
// an older checkpoint, or late for the previous round -- catches up in the round it meets: the first
// up-to-date member broadcasts phi and the outer momentum, the island takes theta = phi and the
// round's step, and its pseudo-gradient (exactly zero) is left out of the mean. So after every round
// all members hold bit-identical phi, momentum and theta. A round whose exchange fails anywhere (a
// member died mid-exchange) is settled through the store as failed on every member, nothing of it
// applied, and met again as the next attempt among those still there.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/device_mesh.h"
#include "comm/island_rendezvous.h"
#include "comm/mpi_communicator.h"
#include "optim/outer/island_exchange.h"
#include "optim/outer/outer_optimizer.h"
#include "runtime/config/config.h"

namespace atl::runtime {

// How this island job's ranks meet at outer.rendezvous: every rank with the same token (rank 0's),
// min/max islands, grace and timeout from the config, the job secret when there is one. Collective
// over `world` (the token's broadcast).
comm::IslandRendezvousOptions rendezvous_options(const Config& config, const comm::MpiCommunicator& world);

struct MetRound {
  int64_t round = 0;
  bool member = false;               // false: this island came after the round closed and sits it out
  std::vector<int> islands;          // the members
  std::vector<int> joined, dropped;  // against the previous round this island took part in
  bool caught_up = false;            // this island was behind and took the others' state
};

class IslandRounds {
 public:
  // Connects this island job's rank to outer.rendezvous (admission included). Every rank of the job.
  IslandRounds(const Config& config, const comm::MpiCommunicator& world);

  // The group this rank starts in, before any round: itself alone.
  std::unique_ptr<comm::Communicator> initial_group(const comm::MpiCommunicator& world) const;
  // Settles every mean of `exchange` through the round protocol (RoundFailed when it did not count).
  void attach(optim::outer::IslandExchange& exchange);

  // After resuming at `step`: the round to meet before training on, when the others are already
  // past this island's phi (the newest round that counted is beyond `step`); nullopt otherwise.
  std::optional<int64_t> round_to_catch_up(int64_t step);
  // Meets round `round` (attempt `attempt`), puts the round's group into
  // `mesh`, and when this island is behind takes phi, the momentum and theta from an up-to-date
  // member. Throws std::runtime_error when fewer than min_islands come within outer.timeout_s.
  MetRound meet(int64_t round, int attempt, comm::DeviceMesh& mesh, optim::outer::OuterOptimizer& outer,
                optim::outer::IslandExchange& exchange);
  // NoLoCo: after the round's gossip, an island that caught up in it (and sat the gossip out) takes
  // the state of the member it was met by, phi, the momentum and theta = phi. Every member calls it.
  void hand_over(comm::DeviceMesh& mesh, optim::outer::OuterOptimizer& outer);
  // The round's exchange counted and was applied: phi is at `round` now.
  void completed(int64_t round);

  int64_t inner_steps() const { return inner_steps_; }

 private:
  // Every member: `source`'s phi, momentum and result in flight before the sync after step
  // `boundary`; an island joining this round takes them as its own, with theta = phi.
  void take_state(comm::Communicator& group, int source, int64_t boundary,
                  optim::outer::OuterOptimizer& outer);

  std::unique_ptr<comm::IslandRendezvous> rendezvous_;
  comm::RoundMembership membership_;   // the round met last
  std::vector<int> previous_islands_;  // the members of the last round this island completed
  int position_ = 0, positions_ = 1;   // this rank's place in its island, and the island's ranks
  int64_t inner_steps_ = 1;
  int64_t phi_round_ = 0;    // the round whose result phi holds
  bool gossip_ = false;      // NoLoCo: a joiner takes the state after the round (hand_over)
  bool joining_ = false;     // this island caught up in the round met last
  int hand_over_from_ = -1;  // NoLoCo: the member a joiner of the round met last takes its state from
};

}  // namespace atl::runtime
