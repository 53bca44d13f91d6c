// FlatParameters: every parameter of a model (or of a pipeline stage) lives in flat value and
// gradient buffers cut into buckets; the per-parameter tensors are views into them.
//
// Why: the data-parallel engine hands whole buckets (slices of the flat buffers) to the
// communicator without packing, the optimizer updates the whole model with a handful of
// vectorised kernels, and ZeRO/checkpointing see contiguous state to shard. Parameters are laid out
// in the order given -- callers pass backward order (reverse forward order) so a bucket fills up as
// backward proceeds.
//
// Bucket layout (DESIGN §5, Megatron's distributed-optimizer buffers): each parameter starts at a
// multiple of `align` elements, and each bucket's length is a multiple of `align * shards`, so the
// bucket splits into `shards` equal, aligned pieces -- one per data-parallel rank under ZeRO. A
// bucket never spans two units (a unit is what ZeRO-3 gathers at once: a decoder layer, the
// embedding, the head) nor holds a parameter marked own_bucket alongside others.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

namespace atl::parallel {

struct ParamInfo {
  std::string name;                        // canonical (Hugging Face) name
  std::vector<int64_t> shape;              // shape of this rank's piece
  bool weight_decay = true;                // false for norms
  bool replicated_in_model_group = false;  // counted once in the global grad norm (e.g. TP-replicated norms)
  bool duplicate = false;  // a copy of a parameter another stage owns (tied embedding): not in the grad norm
  int unit = 0;            // the gather unit (decoder layer, embedding, head) it belongs to
  // Kept in a bucket of its own, so that its bucket (and each rank's shard of it) has the same
  // geometry on every pipeline stage holding a copy (tied embeddings: the copies' gradients are
  // summed shard by shard).
  bool own_bucket = false;
};

struct FlatEntry {
  ParamInfo info;
  int64_t offset = 0;  // element offset in the flat buffers
  int64_t numel = 0;
  size_t bucket = 0;
  at::Tensor value;  // view into its bucket's values, a leaf that requires grad
  at::Tensor grad;   // view into its bucket's gradients, installed as value.grad()
};

struct FlatBucket {
  int64_t offset = 0, numel = 0;  // element range in the flat buffers, padding included
  size_t first_entry = 0, end_entry = 0;
  int unit = 0;
  at::Tensor values, grads;  // the bucket's flat slices of the buffers (whole storages when separate)
};

struct FlatLayout {
  int64_t bucket_numel = std::numeric_limits<int64_t>::max();  // a bucket closes once it holds this many
  int64_t align = 1;                                           // parameter starts and shard sizes
  int shards = 1;                                              // bucket lengths divide into this many pieces
  bool split_units = false;  // close a bucket at every unit change (ZeRO-3 gathers units)
  // Give every bucket a storage of its own, so it can be released (resident_storage.h) while the
  // others stay: the parameters under ZeRO-3, the gradients under ZeRO-2 and -3.
  bool separate_values = false, separate_grads = false;
};

class FlatParameters {
 public:
  // `grad_dtype`: the gradient buffers' dtype when it differs from the values' (mixed precision:
  // bf16 values, fp32 gradients that autograd accumulates into with type promotion). `device`: where
  // both buffers live (the rank's GPU on CUDA runs); every tensor the model and the ZeRO engine make
  // from them follows.
  FlatParameters(std::vector<ParamInfo> infos, at::ScalarType dtype, const FlatLayout& layout = {},
                 at::ScalarType grad_dtype = at::ScalarType::Undefined, c10::Device device = c10::kCPU);
  c10::Device device() const { return device_; }

  const std::vector<FlatEntry>& entries() const { return entries_; }
  const FlatEntry& entry(const std::string& name) const;
  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  const at::Tensor& value(const std::string& name) const { return entry(name).value; }
  const std::vector<FlatBucket>& buckets() const { return buckets_; }

  // The whole flat buffers; only when they are one storage (not FlatLayout::separate_*).
  const at::Tensor& values() const;
  const at::Tensor& grads() const;
  int64_t numel() const { return numel_; }  // padding included
  // Zeroes every resident gradient bucket.
  void zero_grads() const;

 private:
  at::Tensor values_, grads_;  // undefined when separate
  int64_t numel_ = 0;
  c10::Device device_ = c10::kCPU;
  std::vector<FlatEntry> entries_;
  std::vector<FlatBucket> buckets_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace atl::parallel
