// Islands of different layouts (issue 19: one island tp=2 x dp=2 with ZeRO-1, another a single
// rank) average in the canonical parameter space: per outer fragment, the concatenation of its
// parameters' whole (unsharded, unpadded) tensors in forward order -- what a one-rank island holds.
//
// Each round, every rank of an island writes the elements it owns (each canonical element is owned
// by exactly one rank of the island) into a canonical vector that is zero elsewhere, and the
// island's ranks sum it (exact: one term is not zero); the island's rank 0 -- its leader, the only
// rank in the group between islands -- takes the islands' mean over IslandExchange (codec, HMAC,
// the fp32, island-ordered sum: bit-identical on every island) and broadcasts it, and every rank
// takes the elements it holds (replicas and tied copies included). So the link between islands
// carries the model once per island whatever its layout, and no island's layout constrains
// another's. Costs: the island's ranks move the whole fragment twice over their own network, and
// every rank holds it once in host memory while averaging.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "optim/outer/island_average.h"
#include "optim/outer/island_exchange.h"

namespace atl::optim::outer {

// Where one rank's elements of an outer fragment lie in the fragment's canonical space.
struct CanonicalFragment {
  int64_t numel = 0;  // the canonical fragment's elements
  at::Tensor index;   // int64 [the rank's fragment elements]: canonical index, -1 for none (padding)
  at::Tensor owned;   // bool, same length: this rank contributes the element to its island's sum
};

// A fragment's placement, derived once from its CanonicalFragment: the positions in the rank's
// values and the canonical indices they map to.
struct CanonicalPlacement {
  int64_t numel = 0;
  at::Tensor owned_at, owned_index;    // this rank's owned elements
  at::Tensor placed_at, placed_index;  // every element with a canonical place
  // The rank's values are the canonical fragment itself (a one-rank island's, unpadded): both
  // conversions are copies.
  bool identity = false;
};
CanonicalPlacement canonical_placement(const CanonicalFragment& fragment, bool one_rank_island);

class CanonicalIslandAverage : public IslandAverage {
 public:
  // `island_ranks`: every rank of this island, used by nothing else (averages may run on a thread
  // of their own). `exchange`: on the island's rank 0, over the group of the islands' rank 0s; on
  // the others, unused. Collective over `island_ranks`: checks that every canonical element of
  // every fragment is owned by exactly one rank (std::logic_error otherwise).
  CanonicalIslandAverage(comm::Communicator& island_ranks, IslandExchange& exchange,
                         std::vector<CanonicalFragment> fragments);

  int islands() const override { return islands_; }
  int island() const override { return island_; }
  at::Tensor average(const at::Tensor& values, double norm, int fragment) override;
  std::vector<at::Tensor> group_average(const std::vector<at::Tensor>& tensors,
                                        const std::vector<int>& members) override;
  void bound_norms(double max_norm) override { exchange_.bound_norms(max_norm); }
  const std::vector<LeftOut>& left_out() const override { return left_out_; }

 private:
  bool leader() const { return island_ranks_.rank() == 0; }
  // The island's canonical vector of fragment `fragment` from every rank's owned `values`.
  at::Tensor to_canonical(const at::Tensor& values, int fragment) const;
  // `values` with every element that has a canonical place taken from `canonical`.
  at::Tensor from_canonical(const at::Tensor& values, const at::Tensor& canonical, int fragment) const;
  // Runs `between_islands` on the leader over `canonical` (in place) and broadcasts its outcome to the
  // island: the results, or the same exception on every rank (RoundFailed, std::invalid_argument,
  // else std::runtime_error), and the islands it left out.
  template <typename Between>
  void through_leader(std::vector<at::Tensor>& canonical, Between between_islands);
  void broadcast_left_out();

  comm::Communicator& island_ranks_;
  IslandExchange& exchange_;
  std::vector<CanonicalPlacement> placements_;
  int islands_ = 1, island_ = 0;
  std::vector<LeftOut> left_out_;
};

}  // namespace atl::optim::outer
