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
  std::map<std::string, uint64_t> file_sizes;
  for (const proto::Tensor& t : manifest.tensors()) {
    if (t.role() != role || static_cast<int>(t.island()) != island) continue;
    // Before the tensor is allocated: its chunks lie in their files and cover it, so what a damaged
    // manifest makes this allocate is bounded by the bytes the shards hold.
    uint64_t elements = 1, chunk_elements = 0;
    for (int64_t d : t.global_shape()) elements *= static_cast<uint64_t>(d);  // checked by read_manifest
    for (const proto::Chunk& c : t.chunks()) {
      check_chunk_in_file(checkpoint_dir, t, c, file_sizes);
      chunk_elements += c.length() / sizeof(float);
    }
    if (chunk_elements < elements)
      throw CheckpointDamaged("checkpoint: " + checkpoint_dir + " does not hold all of " + t.name() +
                              ": the checkpoint is incomplete");
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
