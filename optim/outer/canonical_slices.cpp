#include "optim/outer/canonical_slices.h"

#include <algorithm>
#include <stdexcept>

#include "comm/communicator.h"
#include "optim/outer/codec.h"

namespace atl::optim::outer {
namespace {

// `at` moved down onto the block grid of `grid`.
int64_t on_grid(int64_t at, int64_t numel, int islands, SliceGrid grid) {
  if (at >= numel) return numel;
  if (grid == SliceGrid::kWhole) return at / kQuantBlock * kQuantBlock;
  for (int j = islands - 1; j >= 0; --j) {
    const comm::ShardRange chunk = comm::shard_range(numel, islands, j);
    if (chunk.numel > 0 && chunk.offset <= at)
      return chunk.offset + (at - chunk.offset) / kQuantBlock * kQuantBlock;
  }
  return 0;
}

// The index of the last bound at or below `at`: whose interval holds `at`.
int holder(const std::vector<int64_t>& bounds, int64_t at) {
  return static_cast<int>(std::upper_bound(bounds.begin(), bounds.end(), at) - bounds.begin()) - 1;
}

}  // namespace

std::vector<int64_t> slice_bounds(int64_t numel, int ranks, int islands, SliceGrid grid) {
  if (ranks < 1 || islands < 1) throw std::invalid_argument("slice_bounds: no ranks or no islands");
  std::vector<int64_t> bounds{0};
  for (int r = 1; r < ranks; ++r)
    bounds.push_back(on_grid(comm::shard_range(numel, ranks, r).offset, numel, islands, grid));
  bounds.push_back(numel);
  return bounds;
}

std::vector<CanonicalPiece> canonical_pieces(int64_t numel, const std::vector<int>& island_ranks,
                                             SliceGrid grid) {
  const int islands = static_cast<int>(island_ranks.size());
  std::vector<std::vector<int64_t>> bounds;
  std::vector<int64_t> cuts{0, numel};
  for (int ranks : island_ranks) {
    bounds.push_back(slice_bounds(numel, ranks, islands, grid));
    cuts.insert(cuts.end(), bounds.back().begin(), bounds.back().end());
  }
  std::vector<int64_t> chunk_bounds;
  for (int j = 0; j < islands && grid == SliceGrid::kIslandChunks; ++j)
    chunk_bounds.push_back(comm::shard_range(numel, islands, j).offset);
  cuts.insert(cuts.end(), chunk_bounds.begin(), chunk_bounds.end());
  // Pieces of at most kMaxPieceElements, on the grid: the codec's temporaries stay that small.
  const std::vector<int64_t> origins = grid == SliceGrid::kWhole ? std::vector<int64_t>{0} : chunk_bounds;
  for (size_t o = 0; o < origins.size(); ++o) {
    const int64_t end = o + 1 < origins.size() ? origins[o + 1] : numel;
    for (int64_t at = origins[o] + kMaxPieceElements; at < end; at += kMaxPieceElements) cuts.push_back(at);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());

  std::vector<CanonicalPiece> pieces;
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    CanonicalPiece piece;
    piece.offset = cuts[c];
    piece.numel = cuts[c + 1] - cuts[c];
    // Chunks may be empty (numel < islands): the last non-empty chunk starting at or below holds it.
    if (grid == SliceGrid::kIslandChunks) piece.reducer = holder(chunk_bounds, piece.offset);
    for (const std::vector<int64_t>& island : bounds) piece.owner.push_back(holder(island, piece.offset));
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

}  // namespace atl::optim::outer
