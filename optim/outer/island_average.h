// What the outer optimizer averages through: the islands' mean of a fragment's pseudo-gradient
// (DiLoCo, Streaming DiLoCo) and a gossip group's means (NoLoCo), bit-identical on every island.
// IslandExchange averages each rank's own values with the ranks at its place in every other island
// (islands of one layout); CanonicalIslandAverage averages in the canonical parameter space, so
// islands of different layouts can meet.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace atl::optim::outer {

// An island left out of a mean for its pseudo-gradient norm (outer.max_pseudo_grad_norm).
struct LeftOut {
  int island;
  double norm;
};

// Test hook (ATOLL_FAULT corrupt_chunk@EXCHANGE:ISLAND): island `island` flips a byte of the first
// chunk it sends in its `exchange`-th exchange (1-based), after tagging it, as a link would.
struct InFlightCorruption {
  int64_t exchange = -1;
  int island = -1;
};

class IslandAverage {
 public:
  virtual ~IslandAverage() = default;

  virtual int islands() const = 0;
  virtual int island() const = 0;

  // The mean over every island of `values`: this rank's elements of outer fragment `fragment`, in
  // the order of its spans. `norm`: the L2 norm of this island's whole update (every rank of the
  // island passes the same). Collective over the island's ranks that hold the fragment.
  virtual at::Tensor average(const at::Tensor& values, double norm, int fragment) = 0;
  // The means over `members` (island indices, this island among them) of each tensor (fragment 0).
  virtual std::vector<at::Tensor> group_average(const std::vector<at::Tensor>& tensors,
                                                const std::vector<int>& members) = 0;
  // The islands whose values count in the coming means, ascending: every island, unless some catch
  // up in an elastic round (IslandExchange::set_contributors).
  virtual std::vector<int> contributors() const {
    std::vector<int> all(static_cast<size_t>(islands()));
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  // Islands whose norm exceeds `max_norm` are left out of the means (0: no bound).
  virtual void bound_norms(double max_norm) = 0;
  // The islands the last average() left out for their norm.
  virtual const std::vector<LeftOut>& left_out() const = 0;
  // Test hook: see InFlightCorruption (a no-op where the average sends through another).
  virtual void corrupt_in_flight(InFlightCorruption /*corruption*/) {}
};

}  // namespace atl::optim::outer
