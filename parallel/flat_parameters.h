// FlatParameters: every parameter of a model (or of a pipeline stage) lives in one contiguous
// value buffer and one contiguous gradient buffer; the per-parameter tensors are views into them.
//
// Why: the data-parallel reducer can hand whole buckets (slices of the gradient buffer) to the
// communicator without packing, the optimizer updates the whole model with a handful of
// vectorised kernels, and ZeRO/checkpointing see one contiguous state to shard. Parameters are
// laid out in the order given -- callers pass backward order (reverse forward order) so a bucket
// fills up as backward proceeds.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
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
};

struct FlatEntry {
  ParamInfo info;
  int64_t offset = 0;  // element offset in the flat buffers
  int64_t numel = 0;
  at::Tensor value;  // view into values(), a leaf that requires grad
  at::Tensor grad;   // view into grads(), installed as value.grad()
};

class FlatParameters {
 public:
  FlatParameters(std::vector<ParamInfo> infos, at::ScalarType dtype);

  const std::vector<FlatEntry>& entries() const { return entries_; }
  const FlatEntry& entry(const std::string& name) const;
  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  const at::Tensor& value(const std::string& name) const { return entry(name).value; }

  const at::Tensor& values() const { return values_; }
  const at::Tensor& grads() const { return grads_; }
  int64_t numel() const { return values_.numel(); }
  void zero_grads() { grads_.zero_(); }

 private:
  at::Tensor values_, grads_;
  std::vector<FlatEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace atl::parallel
