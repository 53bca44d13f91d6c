#include "parallel/flat_parameters.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/variable.h>

#include <stdexcept>

#include "parallel/resident_storage.h"

namespace atl::parallel {
namespace {

int64_t round_up(int64_t n, int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// Storage for each bucket: slices of one buffer, or an allocation per bucket.
std::vector<at::Tensor> bucket_storage(const std::vector<FlatBucket>& buckets, int64_t total, bool separate,
                                       const at::TensorOptions& options, at::Tensor& whole) {
  std::vector<at::Tensor> out;
  if (!separate) whole = at::zeros({total}, options);
  for (const FlatBucket& b : buckets)
    out.push_back(separate ? at::zeros({b.numel}, options) : whole.narrow(0, b.offset, b.numel));
  return out;
}

}  // namespace

FlatParameters::FlatParameters(std::vector<ParamInfo> infos, at::ScalarType dtype, const FlatLayout& layout,
                               at::ScalarType grad_dtype, c10::Device device)
    : device_(device) {
  const int64_t bucket_multiple = layout.align * layout.shards;
  auto close_bucket = [&] {
    FlatBucket& b = buckets_.back();
    b.numel = round_up(numel_ - b.offset, bucket_multiple);
    b.end_entry = entries_.size();
    numel_ = b.offset + b.numel;
  };
  for (ParamInfo& info : infos) {
    FlatEntry e;
    e.numel = 1;
    for (int64_t d : info.shape) e.numel *= d;
    const bool opens_bucket = buckets_.empty() || numel_ - buckets_.back().offset >= layout.bucket_numel ||
                              info.own_bucket || entries_.back().info.own_bucket ||
                              (layout.split_units && info.unit != buckets_.back().unit);
    if (opens_bucket) {
      if (!buckets_.empty()) close_bucket();
      FlatBucket bucket;
      bucket.offset = numel_;
      bucket.first_entry = entries_.size();
      bucket.unit = info.unit;
      buckets_.push_back(bucket);
    }
    e.offset = round_up(numel_, layout.align);
    numel_ = e.offset + e.numel;
    e.bucket = buckets_.size() - 1;
    e.info = std::move(info);
    if (!index_.emplace(e.info.name, entries_.size()).second)
      throw std::invalid_argument("FlatParameters: duplicate parameter " + e.info.name);
    entries_.push_back(std::move(e));
  }
  if (!buckets_.empty()) close_bucket();

  const auto options = at::TensorOptions().dtype(dtype).device(device);
  const auto grad_options = grad_dtype == at::ScalarType::Undefined ? options : options.dtype(grad_dtype);
  const std::vector<at::Tensor> values =
      bucket_storage(buckets_, numel_, layout.separate_values, options, values_);
  const std::vector<at::Tensor> grads =
      bucket_storage(buckets_, numel_, layout.separate_grads, grad_options, grads_);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    buckets_[b].values = values[b];
    buckets_[b].grads = grads[b];
  }
  for (FlatEntry& e : entries_) {
    const FlatBucket& b = buckets_[e.bucket];
    // A view of a buffer that does not require grad may itself become a leaf that does.
    e.value = b.values.narrow(0, e.offset - b.offset, e.numel).view(e.info.shape);
    e.value.requires_grad_(true);
    e.grad = b.grads.narrow(0, e.offset - b.offset, e.numel).view(e.info.shape);
    // With .grad already defined, autograd accumulates in place (grad += new) instead of
    // allocating, so gradients land directly in the flat buffer.
    e.value.mutable_grad() = e.grad;
  }
}

const FlatEntry& FlatParameters::entry(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw std::out_of_range("FlatParameters: no parameter named " + name);
  return entries_[it->second];
}

const at::Tensor& FlatParameters::values() const {
  if (!values_.defined()) throw std::logic_error("FlatParameters: values live in separate bucket storages");
  return values_;
}

const at::Tensor& FlatParameters::grads() const {
  if (!grads_.defined()) throw std::logic_error("FlatParameters: gradients live in separate bucket storages");
  return grads_;
}

void FlatParameters::zero_grads() const {
  for (const FlatBucket& b : buckets_)
    if (is_resident(b.grads)) b.grads.zero_();
}

}  // namespace atl::parallel
