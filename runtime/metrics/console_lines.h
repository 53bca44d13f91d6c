// The lines rank 0 prints while training: one per logged step, checkpoint, validation and non-finite
// step, and the model summary at start-up. Each is built as a std::string; nothing is cut short.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/metrics/metrics.h"

namespace atl::runtime {

// "12,345,678": a count a reader takes in at a glance.
std::string with_commas(int64_t value);

// printf into a std::string of the length the text needs.
std::string formatted(const char* format, ...) __attribute__((format(printf, 1, 2)));

// "step    10/200 | loss 2.3456 | lr ... | comm 1.2 MiB/step (wait 3.0 ms)[ | outer ...]".
std::string progress_line(const StepMetrics& m, int64_t total_steps);
// "step    50/200 | checkpoint DIR (0.42 s)".
std::string checkpoint_line(int64_t step, int64_t total_steps, const std::string& dir, double seconds);

// Islands with an outer optimizer: every island's validation loss and phi's.
struct IslandValidation {
  int island = 0;               // whose theta the val loss is
  std::vector<double> islands;  // theta of each island, in island order (empty: only its own is known)
  double outer = 0.0;           // phi, what the islands agree on
};
// "step    50/200 | val loss 2.1234[ (island 0[; islands 2.1-2.2]) | outer 2.0987]".
std::string validation_line(int64_t step, int64_t total_steps, double val_loss,
                            const std::optional<IslandValidation>& islands);
// "step 7: non-finite loss or gradient (loss nan, grad norm nan)".
std::string nonfinite_line(const StepMetrics& m);
// "model: N parameters per rank (SIZE DTYPE, ZeRO stage Z) | peak P GFLOP/s per rank x R ranks".
std::string model_line(int64_t parameters, double parameter_bytes, const std::string& dtype, int zero_stage,
                       double peak_flops_per_rank, int ranks);

}  // namespace atl::runtime
