#include "checkpoint/box.h"

#include <algorithm>
#include <stdexcept>

namespace atl::checkpoint {

int64_t Box::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::optional<Box> intersect(const Box& a, const Box& b) {
  if (a.offsets.size() != b.offsets.size()) throw std::invalid_argument("intersect: boxes of different rank");
  Box out;
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    const int64_t lo = std::max(a.offsets[d], b.offsets[d]);
    const int64_t hi = std::min(a.offsets[d] + a.sizes[d], b.offsets[d] + b.sizes[d]);
    if (hi <= lo) return std::nullopt;
    out.offsets.push_back(lo);
    out.sizes.push_back(hi - lo);
  }
  return out;
}

std::vector<RunBox> run_boxes(const Box& piece, const std::vector<int64_t>& global, int64_t begin,
                              int64_t end) {
  std::vector<RunBox> out;
  const auto keep = [&](Box box, int64_t run_offset) {
    // Clip to the global tensor (vocabulary padding lies past its rows).
    const Box whole{std::vector<int64_t>(global.size(), 0), global};
    if (const std::optional<Box> clipped = intersect(box, whole)) {
      // Padding trails, so clipping keeps the origin and the data stays a prefix of the run's.
      if (clipped->offsets != box.offsets) throw std::logic_error("run_boxes: padding must trail the piece");
      if (clipped->numel() > 0) out.push_back({*clipped, run_offset});
    }
  };
  if (begin >= end) return out;
  if (piece.sizes.size() == 1) {
    keep({{piece.offsets[0] + begin}, {end - begin}}, 0);
    return out;
  }
  if (piece.sizes.size() != 2) throw std::invalid_argument("run_boxes: only rank-1 and rank-2 tensors");
  const int64_t cols = piece.sizes[1];
  const int64_t r0 = piece.offsets[0], c0 = piece.offsets[1];
  int64_t at = begin;
  if (at % cols != 0) {  // partial first row
    const int64_t row = at / cols, col = at % cols, n = std::min(end - at, cols - col);
    keep({{r0 + row, c0 + col}, {1, n}}, at - begin);
    at += n;
  }
  if (end - at >= cols) {  // whole rows
    const int64_t rows = (end - at) / cols;
    keep({{r0 + at / cols, c0}, {rows, cols}}, at - begin);
    at += rows * cols;
  }
  if (at < end) keep({{r0 + at / cols, c0}, {1, end - at}}, at - begin);  // partial last row
  return out;
}

}  // namespace atl::checkpoint
