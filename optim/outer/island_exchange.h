// The outer optimizers' communication across islands (DESIGN §6): an average that ends bit-identical
// on every island whatever the codec, and NoLoCo's small-group average -- with the bytes it sent
// and the link simulator applied.
//
// mean() is a reduce-scatter and an all-gather, both over encoded bytes:
//   1. the tensor is cut into k chunks (comm::shard_range); island j receives everyone's encoded
//      chunk j (one all-to-all), decodes them and sums them in island order in fp32;
//   2. island j encodes its mean chunk once and all-gathers it; every island decodes the same bytes.
// So each island sends 2(k-1)/k of the encoded tensor -- a ring all-reduce's volume at the codec's
// width -- the error is two roundings, and no island's copy differs in a bit (island j uses the
// decoded bytes of its own chunk too, not its unrounded sum).
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "optim/outer/codec.h"
#include "optim/outer/simulated_link.h"

namespace atl::optim::outer {

class IslandExchange {
 public:
  // `islands`: the island group (one rank of every island with the same place in its island).
  IslandExchange(comm::Communicator& islands, Codec codec, SimulatedLink link);

  int islands() const { return group_.size(); }
  int island() const { return group_.rank(); }

  // The mean over every island of `values` (contiguous fp32, on any device; exchanged from host
  // copies over MPI), bit-identical on every island.
  // Blocks, including the simulated link's delay. Throws std::invalid_argument on non-finite values.
  at::Tensor mean(const at::Tensor& values);
  // The means over `members` (island indices, this island among them, the same list on every
  // member) of each tensor, summed in `members` order.
  std::vector<at::Tensor> group_mean(const std::vector<at::Tensor>& tensors, const std::vector<int>& members);

  // Bytes this rank has sent in exchanges (encoded sizes, the volume a link carries).
  uint64_t bytes_sent() const { return bytes_sent_.load(); }
  // Seconds the simulated link has accounted for.
  double simulated_seconds() const { return simulated_ns_.load() * 1e-9; }

 private:
  at::Tensor mean_on_host(const at::Tensor& values);
  std::vector<at::Tensor> group_mean_on_host(const std::vector<at::Tensor>& tensors,
                                             const std::vector<int>& members);
  void throw_unless_all_finite(const at::Tensor& values);
  void account(std::chrono::steady_clock::time_point start, uint64_t bytes, int messages);

  comm::Communicator& group_;
  Codec codec_;
  SimulatedLink link_;
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> simulated_ns_{0};
};

}  // namespace atl::optim::outer
