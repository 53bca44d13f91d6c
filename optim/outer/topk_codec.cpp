#include "optim/outer/topk_codec.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace atl::optim::outer {
namespace {

void check_k(int k) {
  if (k < 1 || k > kTopkChunk)
    throw std::invalid_argument("top-k codec: k = " + std::to_string(k) + " must be 1 to " +
                                std::to_string(kTopkChunk));
}

// The chunks of `numel` elements: `full` of kTopkChunk, then a shorter `tail` (possibly empty).
struct Chunks {
  int64_t full, tail;
};
Chunks chunks_of(int64_t numel) {
  return {numel / kTopkChunk, numel % kTopkChunk};
}

// Positions (int64, ascending per row) of the `k` largest magnitudes in each row of `rows`.
at::Tensor largest_positions(const at::Tensor& rows, int64_t k) {
  // Stable and descending: of equal magnitudes the lower position sorts first, on every machine.
  const at::Tensor order = std::get<1>(at::sort(rows.abs(), /*stable=*/true, /*dim=*/1, /*descending=*/true));
  return std::get<0>(at::sort(order.narrow(1, 0, k), /*dim=*/1));
}

}  // namespace

int64_t topk_kept(int k, int64_t numel) {
  const Chunks c = chunks_of(numel);
  return c.full * k + std::min<int64_t>(k, c.tail);
}

int64_t encoded_bytes(const TopkEncoding& encoding, int64_t numel) {
  const int64_t kept = topk_kept(encoding.k, numel);
  return kept + encoded_bytes(encoding.values, kept);
}

at::Tensor encode(const TopkEncoding& encoding, const at::Tensor& values) {
  check_k(encoding.k);
  if (!at::isfinite(values).all().item<bool>())
    throw std::invalid_argument(
        "outer exchange: non-finite values in the top-k input; the inner training diverged -- lower "
        "optim.lr or enable optim.grad_clip");
  const at::Tensor flat = values.reshape({-1});
  const Chunks c = chunks_of(flat.numel());
  std::vector<at::Tensor> positions, kept;
  const auto take = [&](int64_t first, int64_t rows, int64_t length) {
    const at::Tensor block = flat.narrow(0, first, rows * length).view({rows, length});
    const at::Tensor at = largest_positions(block, std::min<int64_t>(encoding.k, length));
    positions.push_back(at.reshape({-1}));
    kept.push_back(block.gather(1, at).reshape({-1}));
  };
  if (c.full > 0) take(0, c.full, kTopkChunk);
  if (c.tail > 0) take(c.full * kTopkChunk, 1, c.tail);
  const at::Tensor all_positions =
      positions.empty() ? at::empty({0}, flat.options().dtype(at::kByte)) : at::cat(positions).to(at::kByte);
  const at::Tensor all_kept = kept.empty() ? at::empty({0}, flat.options()) : at::cat(kept);
  return at::cat({all_positions, encode(encoding.values, all_kept.contiguous())});
}

at::Tensor decode(const TopkEncoding& encoding, const at::Tensor& bytes, int64_t numel) {
  check_k(encoding.k);
  if (bytes.numel() != encoded_bytes(encoding, numel))
    throw std::invalid_argument("top-k codec: " + std::to_string(bytes.numel()) + " bytes for " +
                                std::to_string(numel) + " elements, expected " +
                                std::to_string(encoded_bytes(encoding, numel)));
  const int64_t kept = topk_kept(encoding.k, numel);
  const at::Tensor positions = bytes.narrow(0, 0, kept).to(at::kLong);
  const at::Tensor values = decode(encoding.values, bytes.narrow(0, kept, bytes.numel() - kept), kept);
  // Each kept entry's chunk: full chunks keep k each, the tail what is left. On the bytes' device:
  // the outer optimizer's error feedback decodes on the GPU in a GPU run.
  const Chunks c = chunks_of(numel);
  const at::TensorOptions index = bytes.options().dtype(at::kLong);
  at::Tensor chunk = at::arange(kept, index).div_(encoding.k, "floor").clamp_max_(c.full);
  const at::Tensor length =
      at::where(chunk.lt(c.full), at::scalar_tensor(kTopkChunk, index), at::scalar_tensor(c.tail, index));
  // A forged or corrupted message must not write outside its chunk or twice into one place.
  bool valid = positions.lt(length).all().item<bool>();
  if (valid && kept > 1) {
    const at::Tensor same_chunk = chunk.narrow(0, 1, kept - 1).eq(chunk.narrow(0, 0, kept - 1));
    const at::Tensor ascending = positions.narrow(0, 1, kept - 1).gt(positions.narrow(0, 0, kept - 1));
    valid = ascending.logical_or(same_chunk.logical_not()).all().item<bool>();
  }
  if (!valid)
    throw std::invalid_argument(
        "top-k codec: a chunk's positions are out of range or not strictly ascending (a corrupted message)");
  at::Tensor out = at::zeros({numel}, values.options());
  out.index_put_({chunk.mul_(kTopkChunk).add_(positions)}, values);
  return out;
}

}  // namespace atl::optim::outer
