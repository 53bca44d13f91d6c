#include "checkpoint/consolidated.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <map>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/shard_header.h"

namespace atl::checkpoint {
std::map<std::string, at::Tensor> consolidated(const std::string& checkpoint_dir, proto::Role role) {
  const proto::Manifest manifest = read_manifest(checkpoint_dir);
  verify_shard_headers(checkpoint_dir, manifest);
  // The lowest island's copy: island 0's in a single world, the job's own for an island job.
  int island = std::numeric_limits<int>::max();
  for (const proto::Tensor& t : manifest.tensors())
    if (t.role() == role) island = std::min(island, static_cast<int>(t.island()));
  std::map<std::string, at::Tensor> tensors;
  for (const proto::Tensor& t : manifest.tensors()) {
    if (t.role() != role || static_cast<int>(t.island()) != island) continue;
    at::Tensor full =
        at::zeros(std::vector<int64_t>(t.global_shape().begin(), t.global_shape().end()), at::kFloat);
    for (const proto::Chunk& c : t.chunks()) {
      at::Tensor region = full;
      for (int d = 0; d < c.offsets_size(); ++d) region = region.narrow(d, c.offsets(d), c.sizes(d));
      region.copy_(
          read_chunk(checkpoint_dir, t, c).view(std::vector<int64_t>(c.sizes().begin(), c.sizes().end())));
    }
    tensors[t.name()] = full;
  }
  return tensors;
}

}  // namespace atl::checkpoint
