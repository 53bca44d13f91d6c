// How islands of different layouts cut a canonical fragment so that every rank exchanges only its
// own slice, directly with the ranks of the other islands that own the same elements (issue 63; the
// rank-by-rank path of optim/outer/sliced_average.h).
//
// Each island cuts the fragment into as many contiguous slices as it has ranks: rank r's slice
// begins at comm::shard_range(numel, ranks, r).offset moved down onto the codec's block grid, so no
// int8/int4 block is ever split between two ranks. The grid is the one the exchange quantises on:
//   kIslandChunks  (mean: IslandExchange's reduce-scatter) blocks of kQuantBlock from the start of
//                  each of the k islands' chunks comm::shard_range(numel, k, j);
//   kWhole         (group mean: every member sends the whole tensor) blocks from element 0.
// Islands with different rank counts cut in different places; the pieces are the intervals between
// the union of every island's cut points (and, for kIslandChunks, the chunk bounds), so each piece
// has exactly one owner in every island and lies inside one chunk -- the island that sums it.
// Pieces are also cut every kMaxPieceElements on the grid, so that encoding one never needs more
// than that many elements' temporaries. Every island computes the same pieces from the islands'
// rank counts alone.
#pragma once

#include <cstdint>
#include <vector>

namespace atl::optim::outer {

enum class SliceGrid { kIslandChunks, kWhole };

// The longest piece: 4096 codec blocks (4 MiB of fp32).
constexpr int64_t kMaxPieceElements = int64_t{1} << 20;

// One interval of the canonical fragment and who holds it.
struct CanonicalPiece {
  int64_t offset = 0;
  int64_t numel = 0;
  int reducer = -1;        // kIslandChunks: the island whose chunk holds it (sums it); kWhole: -1
  std::vector<int> owner;  // per island: the rank of that island whose slice holds it
};

// The bounds of an island of `ranks` ranks: slice r is [bounds[r], bounds[r + 1]) (possibly empty),
// bounds[0] = 0 and bounds[ranks] = numel. `islands`: the islands exchanging (kIslandChunks' chunks).
std::vector<int64_t> slice_bounds(int64_t numel, int ranks, int islands, SliceGrid grid);

// The pieces of a fragment of `numel` elements between islands of `island_ranks[i]` ranks each,
// in ascending order.
std::vector<CanonicalPiece> canonical_pieces(int64_t numel, const std::vector<int>& island_ranks,
                                             SliceGrid grid);

}  // namespace atl::optim::outer
