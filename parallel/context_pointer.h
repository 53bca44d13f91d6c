// A C++ object a custom autograd function's backward needs that is not a tensor -- a communicator,
// the parameter gate, a weight-gradient sink -- kept in the function's context. Autograd contexts
// hold only IValues (saved_data), so the object travels as its address, an integer: the object
// must outlive every graph that holds it.
#pragma once

#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <string>

namespace atl::parallel {

template <typename T>
void save_pointer(torch::autograd::AutogradContext* ctx, const std::string& key, T* pointer) {
  ctx->saved_data[key] = static_cast<int64_t>(reinterpret_cast<intptr_t>(pointer));
}

// The pointer save_pointer kept under `key`.
template <typename T>
T* saved_pointer(torch::autograd::AutogradContext* ctx, const std::string& key) {
  return reinterpret_cast<T*>(static_cast<intptr_t>(ctx->saved_data.at(key).toInt()));
}

}  // namespace atl::parallel
