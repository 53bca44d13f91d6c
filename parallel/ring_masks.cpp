#include "parallel/ring_masks.h"

#include <stdexcept>
#include <string>

#include "parallel/context_parallel_attention.h"

namespace atl::parallel {

RingMasks::RingMasks(int cp, int rank, bool load_balanced, const at::Tensor& document_ids,
                     at::ScalarType dtype)
    : cp_(cp), rank_(rank), load_balanced_(load_balanced), document_ids_(document_ids) {
  const int64_t seq = document_ids.defined() ? document_ids.size(1) : 0;
  if (seq % (2 * cp) != 0)
    throw std::invalid_argument("ring attention: document ids of " + std::to_string(seq) +
                                " positions do not split into 2 x cp = " + std::to_string(2 * cp) +
                                " chunks");
  const int64_t chunk = seq / (2 * cp);
  // The documents of global chunk `index` (undefined: no document mask).
  const auto documents = [&](int64_t index) {
    return document_ids.defined() ? document_ids.narrow(1, index * chunk, chunk) : at::Tensor();
  };
  const auto mine = context_chunks(cp, rank, load_balanced);
  for (int s = 0; s < cp; ++s) {
    const auto theirs = context_chunks(cp, (rank - s + cp) % cp, load_balanced);
    std::vector<Block>& blocks = steps_.emplace_back();
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t b = 0; b < 2; ++b) {
        BlockMask seen = block_mask(mine[a], theirs[b], documents(mine[a]), documents(theirs[b]), dtype);
        if (seen.kind != BlockMask::Kind::kNone) blocks.push_back({a, b, std::move(seen)});
      }
  }
}

}  // namespace atl::parallel
