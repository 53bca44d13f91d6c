// ParameterGate: how a model tells the data-parallel engine when it uses a unit of parameters
// (a decoder layer, the embedding, the head), so that sharded parameters are present exactly when
// needed. The model knows the order of its units; the engine knows where their data is.
//
// ZeRO-1/2: acquire waits for the unit's all-gather started after the last optimizer step (the
// gather overlaps the forward of the units before it). ZeRO-3: acquire gathers the unit (and starts
// gathering the next one), release_after frees it again and arranges for backward to gather it
// before computing through it.
#pragma once

#include <ATen/core/Tensor.h>

namespace atl::parallel {

class ParameterGate {
 public:
  static constexpr int kNoUnit = -1000000;
  virtual ~ParameterGate() = default;
  // Before `unit`'s parameters are read in forward; `next`: the unit forward reads after it
  // (prefetched), or kNoUnit.
  virtual void acquire(int unit, int next) = 0;
  // After `unit`'s last use in this forward, with the output that depends on it. Returns the output
  // to continue with: its backward makes `unit` present again (prefetching `backward_next`, the unit
  // backward reaches after it) before the unit's own backward runs.
  virtual at::Tensor release_after(int unit, const at::Tensor& output, int backward_next) = 0;
};

}  // namespace atl::parallel
