// Boxes of a global tensor: how checkpoint chunks and the pieces a rank holds are described, so a
// checkpoint saved in one layout can be read in another by intersecting boxes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace atl::checkpoint {

struct Box {
  std::vector<int64_t> offsets, sizes;
  int64_t numel() const;
};

// The common part of two boxes of the same tensor, if any.
std::optional<Box> intersect(const Box& a, const Box& b);

// A piece: the box `piece` of a global tensor of shape `global`, of which a rank holds the
// row-major elements [begin, end). Returns that run as boxes of the global tensor, clipped to
// `global` (rows of the piece past the global shape, e.g. vocabulary padding, are dropped), each
// with the offset of its first element within the run: a partial first row, whole rows, a partial
// last row. Pieces of rank 1 and 2 (every Llama parameter).
struct RunBox {
  Box box;
  int64_t run_offset;  // elements from `begin`
};
std::vector<RunBox> run_boxes(const Box& piece, const std::vector<int64_t>& global, int64_t begin,
                              int64_t end);

}  // namespace atl::checkpoint
