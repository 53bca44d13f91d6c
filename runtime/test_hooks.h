// The failure tests' hooks, parsed from the launch environment (launch_environment.h) and passed to
// the parts they affect. Unset in real runs, where they cost nothing.
#pragma once

#include <chrono>
#include <optional>

#include "checkpoint/fault_injection.h"
#include "runtime/fault_hooks.h"
#include "runtime/launch_environment.h"

namespace atl::runtime {

struct TestHooks {
  FaultHooks faults;                                       // ATOLL_FAULT: NaN gradients, a rank that hangs
  std::optional<checkpoint::FaultPoint> checkpoint_fault;  // ATOLL_CHECKPOINT_FAULT: a rank dies mid-save
  // ATOLL_CHECKPOINT_COPY_DELAY_MS: slows an async snapshot's copy, so that training reaches the next
  // update before the copy is done (the lazy mode's correctness tests).
  std::chrono::milliseconds checkpoint_copy_delay{0};
  // ATOLL_FP8_EMULATION=1: train.precision fp8 on the CPU, its products through fp8_mm's emulation
  // (dequantize, fp32 product, one rounding to the output's dtype) under the GPU's operand rules, so
  // that the FP8 recipe composed with every layout is tested where no GPU is.
  bool fp8_emulation = false;

  // Throws std::invalid_argument naming the variable and the form it takes when one is malformed.
  static TestHooks parse(const LaunchEnvironment& environment);
};

}  // namespace atl::runtime
