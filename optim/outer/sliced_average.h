// The rank-by-rank average of islands of different layouts (issue 63): the canonical parameter
// space (canonical_average.h) without a leader.
//
// Per fragment, each island cuts the canonical space into one contiguous slice per rank
// (canonical_slices.h: the same cut on every island for a given set of islands' rank counts, on the
// codec's block grid; islands of different rank counts exchange the pieces between the union of
// their cuts). Then, for every mean:
//   1. within the island, each rank sends the elements it owns to the rank whose slice holds them
//      (an all-to-all of what each rank owns: every canonical element is owned by exactly one rank);
//   2. between islands, each rank exchanges only its slice's pieces, directly with the ranks of the
//      other islands that own the same pieces -- IslandExchange's reduce-scatter + all-gather over
//      encoded bytes, piece by piece: the island whose chunk holds a piece sums the islands'
//      decoded pieces in island order in fp32, encodes the mean once and sends it back;
//   3. within the island, each slice's owner sends every rank the means of the elements it places
//      (replicas and tied copies included).
// Because pieces lie on the block grid of the islands' chunks, every decoded value is the one the
// leader path (CanonicalIslandAverage) decodes from whole chunks: the same bits on every island and
// the same as the leader path's, for every codec. No rank holds more than its slice, its own values
// and their mean; each rank's link carries its slice's share of the island's traffic.
// Authenticated like IslandExchange (exchange_checks.h): one tagged message per peer and phase, every
// tag checked before decoding, the exchange run again (3 tries) when one fails.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "optim/outer/canonical_average.h"
#include "optim/outer/canonical_slices.h"
#include "optim/outer/codec.h"
#include "optim/outer/exchange_checks.h"
#include "optim/outer/island_average.h"

namespace atl::optim::outer {

class SlicedIslandAverage : public IslandAverage {
 public:
  // `island_ranks`: every rank of this island (this average's alone: it may run on a thread of its
  // own). `everyone`: every rank of every island, island after island in island order, each
  // island's ranks in island-rank order. `ranks_per_island`: each island's rank count (the same
  // list on every rank). Collective over `everyone`: checks that every canonical element of every
  // fragment is owned by exactly one rank of each island (std::logic_error otherwise).
  SlicedIslandAverage(comm::Communicator& island_ranks, comm::Communicator& everyone,
                      std::vector<int> ranks_per_island, Codec codec,
                      std::vector<CanonicalFragment> fragments);

  // From now on every message is tagged and checked.
  void authenticate(ExchangeAuthentication authentication);

  int islands() const override { return static_cast<int>(ranks_per_island_.size()); }
  int island() const override { return island_; }
  at::Tensor average(const at::Tensor& values, double norm, int fragment) override;
  std::vector<at::Tensor> group_average(const std::vector<at::Tensor>& tensors,
                                        const std::vector<int>& members) override;
  void bound_norms(double max_norm) override { max_norm_ = max_norm; }
  const std::vector<LeftOut>& left_out() const override { return left_out_; }
  // Each rank of the island flips a byte of the first message it sends in that exchange.
  void corrupt_in_flight(InFlightCorruption corruption) override { corruption_ = corruption; }

  // Bytes this rank has sent to other islands (encoded pieces with their tags, and its share of
  // the islands' agreements as a ring over every rank carries them).
  uint64_t bytes_sent() const { return bytes_sent_.load(); }
  // After each average, `count(bytes)` on every rank of the island with what the whole island sent
  // in it, counted as IslandExchange counts an island's: every rank's pieces summed, the
  // agreements once as among the islands (so logs show an island's traffic whatever its layout).
  void report_island_bytes_to(std::function<void(uint64_t)> count) { report_ = std::move(count); }

 private:
  // Elements moving between this rank and the island's others by slice: `at[r]` the positions in
  // this rank's values bound to (or coming from) rank r's slice, `slice_at[r]` the positions in
  // this rank's slice of what rank r sends (or asks for).
  struct Route {
    std::vector<at::Tensor> at, slice_at;
  };
  // A fragment cut for one grid: this island's slices, the pieces this rank owns, the routes.
  struct Cut {
    int64_t slice_offset = 0, slice_numel = 0;
    std::vector<CanonicalPiece> pieces;  // those in this rank's slice
    Route gather, scatter;               // owned elements to the slices; means back to who places them
  };
  const Cut& cut(int fragment, SliceGrid grid);
  Route route(const at::Tensor& at, const at::Tensor& index, const std::vector<int64_t>& bounds,
              int64_t slice_offset);
  // Moves elements along route `r` inside the island: to the slices (`source` this rank's values,
  // `target` its slice) or back (`source` the slice's means, `target` this rank's values).
  void move_in_island(const Route& r, bool to_slices, const at::Tensor& source, at::Tensor& target, int tag);
  // This island's slice of the canonical fragment from every rank's owned `values`.
  at::Tensor gathered(const at::Tensor& values, const Cut& cut);
  // `values` with every placed element taken from the slices' means `slice_mean`.
  at::Tensor scattered(const at::Tensor& values, const at::Tensor& slice_mean, const Cut& cut, int fragment);
  // The rank of `everyone` of island `island`'s rank `rank`.
  int global_rank(int island, int rank) const { return offsets_[static_cast<size_t>(island)] + rank; }

  // One attempt of the mean of this rank's slice `slice` (the pieces of `cut`): nullopt when a
  // message failed its tag (every rank then returns nullopt, `rejected` the island whose failed).
  std::optional<at::Tensor> try_mean(const at::Tensor& slice, const Cut& cut, int divisor, int attempt,
                                     int& rejected);
  std::optional<std::vector<at::Tensor>> try_group_sums(const std::vector<at::Tensor>& slices, const Cut& cut,
                                                        const std::vector<int>& members, int attempt,
                                                        int& rejected);
  // Sends `outgoing[g]` to every rank g of `everyone` that has one and receives `incoming_bytes[g]`
  // (plus the tag) from every rank that sends; each message tagged for (phase, sender, receiver).
  // Returns the received messages; `rejected_here` gains the islands whose tag failed.
  std::map<int, at::Tensor> swap(const std::map<int, at::Tensor>& outgoing,
                                 const std::map<int, int64_t>& incoming_bytes, int attempt, int phase,
                                 std::vector<int>& rejected_here);
  int agree_on_rejected(const std::vector<int>& rejected_here);
  void throw_unless_all_finite(const at::Tensor& slice);
  void agree_on_left_out(double norm);
  int island_of(int global_rank) const;
  // Counts an agreement of `nbytes` over `everyone`: this rank's ring share, and the islands' share.
  void count_agreement(uint64_t nbytes);
  // Reports the island's bytes of the current average (collective over the island's ranks).
  void report_island_bytes();

  comm::Communicator& island_ranks_;
  comm::Communicator& everyone_;
  std::vector<int> ranks_per_island_, offsets_;
  int island_ = 0;
  Codec codec_;
  std::vector<CanonicalFragment> fragments_;
  std::vector<CanonicalPlacement> placements_;
  std::map<std::pair<int, int>, Cut> cuts_;  // by (fragment, grid)
  std::optional<ExchangeAuthentication> authentication_;
  double max_norm_ = 0.0;
  std::vector<LeftOut> left_out_;
  int64_t exchanges_ = 0;
  InFlightCorruption corruption_;
  std::atomic<uint64_t> bytes_sent_{0};
  uint64_t average_data_bytes_ = 0;      // the pieces this rank sent in the current average
  uint64_t island_agreement_bytes_ = 0;  // the current average's agreements, as among the islands
  std::function<void(uint64_t)> report_;
};

}  // namespace atl::optim::outer
