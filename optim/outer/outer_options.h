// What the outer optimizer takes (outer_optimizer.h). The config's outer section holds these very
// options under the same names (runtime/config/config.h: OuterConfig derives from OuterOptions), so
// a run hands its section to the optimizer as it is; each field's meaning is its line in the config's
// field table (`atoll config reference`).
//
// The defaults are the config's. DiLoCo's are the outer step the islands sweep found best
// (examples/islands/sweep.sh): plain averaging, lr 1 without momentum -- the papers' Nesterov
// 0.7/0.9 was 25-55% worse at H of 8 to 32 there. NoLoCo's paper defaults (lr 0.7, momentum 0.5,
// gamma = lr) are the config's to apply where a file leaves those fields out.
#pragma once

#include <cstdint>

#include "optim/outer/codec.h"
#include "optim/outer/outer_rules.h"
#include "optim/outer/outer_schedule.h"
#include "optim/outer/topk_codec.h"

namespace atl::optim::outer {

// kNone: no outer optimizer (islands average their gradients every step).
enum class Algorithm { kNone, kDiLoCo, kStreamingDiLoCo, kNoLoCo };

struct OuterOptions {
  Algorithm algorithm = Algorithm::kNone;
  int inner_steps = 50;  // H
  double lr = 1.0;
  double momentum = 0.0;
  bool nesterov = true;
  int fragments = 1;     // streaming_diloco
  int delay = 0;         // streaming_diloco
  double mix = 0.5;      // streaming_diloco
  int group_size = 2;    // noloco
  double gamma = 1.0;    // noloco
  bool delayed = false;  // diloco
  Codec compression = Codec::kNone;
  int topk = 0;  // diloco, streaming_diloco; 0: dense

  OuterSgdOptions sgd() const { return {lr, momentum, nesterov}; }
  NoLoCoOptions noloco() const { return {lr, momentum, gamma}; }
  // The exchange's top-k encoding (SparseLoCo), the kept values in `compression`; disabled at 0.
  TopkEncoding topk_encoding() const { return {topk, compression}; }
  SyncSchedule schedule() const {
    // One-step-delayed DiLoCo is one fragment whose exchange lands a whole round later.
    if (delayed) return {inner_steps, 1, inner_steps};
    if (algorithm == Algorithm::kStreamingDiLoCo) return {inner_steps, fragments, delay};
    return {inner_steps, 1, 0};
  }
};

}  // namespace atl::optim::outer
