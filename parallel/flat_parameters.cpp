#include "parallel/flat_parameters.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/variable.h>

#include <stdexcept>

namespace atl::parallel {

FlatParameters::FlatParameters(std::vector<ParamInfo> infos, at::ScalarType dtype) {
  int64_t total = 0;
  for (ParamInfo& info : infos) {
    FlatEntry e;
    e.numel = 1;
    for (int64_t d : info.shape) e.numel *= d;
    e.offset = total;
    total += e.numel;
    e.info = std::move(info);
    if (!index_.emplace(e.info.name, entries_.size()).second)
      throw std::invalid_argument("FlatParameters: duplicate parameter " + e.info.name);
    entries_.push_back(std::move(e));
  }
  values_ = at::zeros({total}, at::TensorOptions().dtype(dtype));
  grads_ = at::zeros({total}, at::TensorOptions().dtype(dtype));
  for (FlatEntry& e : entries_) {
    // A view of a buffer that does not require grad may itself become a leaf that does.
    e.value = values_.narrow(0, e.offset, e.numel).view(e.info.shape);
    e.value.requires_grad_(true);
    e.grad = grads_.narrow(0, e.offset, e.numel).view(e.info.shape);
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

}  // namespace atl::parallel
