#include "runtime/metrics/console_lines.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

namespace atl::runtime {

std::string with_commas(int64_t value) {
  std::string digits = std::to_string(value);
  for (int i = static_cast<int>(digits.size()) - 3; i > (value < 0 ? 1 : 0); i -= 3)
    digits.insert(static_cast<size_t>(i), ",");
  return digits;
}

std::string formatted(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list measure;
  va_copy(measure, args);
  const int length = std::vsnprintf(nullptr, 0, format, measure);
  va_end(measure);
  std::string text(static_cast<size_t>(std::max(length, 0)), '\0');
  std::vsnprintf(text.data(), text.size() + 1, format, args);
  va_end(args);
  return text;
}

std::string progress_line(const StepMetrics& m, int64_t total_steps) {
  std::string line = formatted(
      "step %5lld/%lld | loss %.4f | lr %.3e | grad norm %.3f | %.0f tok/s | MFU %.1f%% | mem %s (model "
      "state %s) | "
      "comm %s/step (wait %.1f ms)",
      static_cast<long long>(m.step), static_cast<long long>(total_steps), m.loss, m.lr, m.grad_norm,
      m.tokens_per_s, 100.0 * m.mfu, format_bytes(static_cast<double>(m.rss_bytes)).c_str(),
      format_bytes(static_cast<double>(m.param_bytes + m.grad_bytes + m.optimizer_bytes)).c_str(),
      format_bytes(static_cast<double>(m.comm_bytes)).c_str(), 1e3 * m.comm_wait_seconds);
  if (m.context_parallel) line += formatted(" | K/V wait %.1f ms", 1e3 * m.kv_wait_seconds);
  if (m.gpu_memory)
    line += formatted(" | gpu %s (reserved %s, peak %s)",
                      format_bytes(static_cast<double>(m.gpu_memory->allocated)).c_str(),
                      format_bytes(static_cast<double>(m.gpu_memory->reserved)).c_str(),
                      format_bytes(static_cast<double>(m.gpu_memory->peak)).c_str());
  if (m.islands)
    line +=
        formatted(" | outer %s in all (wait %.1f ms)",
                  format_bytes(static_cast<double>(m.outer_bytes_total)).c_str(), 1e3 * m.outer_wait_seconds);
  if (m.outer_islands > 0) line += formatted(" | round of %d islands", m.outer_islands);
  return line;
}

std::string checkpoint_line(int64_t step, int64_t total_steps, const std::string& dir, double seconds) {
  return formatted("step %5lld/%lld | checkpoint %s (%.2f s)", static_cast<long long>(step),
                   static_cast<long long>(total_steps), dir.c_str(), seconds);
}

std::string validation_line(int64_t step, int64_t total_steps, double val_loss,
                            const std::optional<IslandValidation>& islands) {
  std::string line = formatted("step %5lld/%lld | val loss %.4f", static_cast<long long>(step),
                               static_cast<long long>(total_steps), val_loss);
  if (!islands) return line;
  line += formatted(" (island %d", islands->island);
  if (!islands->islands.empty())
    line +=
        formatted("; islands %.4f-%.4f", *std::min_element(islands->islands.begin(), islands->islands.end()),
                  *std::max_element(islands->islands.begin(), islands->islands.end()));
  return line + formatted(") | outer %.4f", islands->outer);
}

std::string nonfinite_line(const StepMetrics& m) {
  return formatted("step %lld: non-finite loss or gradient (loss %g, grad norm %g)",
                   static_cast<long long>(m.step), m.loss, m.grad_norm);
}

std::string model_line(int64_t parameters, double parameter_bytes, const std::string& dtype, int zero_stage,
                       double peak_flops_per_rank, int ranks) {
  return formatted(
      "model: %lld parameters per rank (%s %s, ZeRO stage %d) | peak %.1f GFLOP/s per rank x %d ranks",
      static_cast<long long>(parameters), format_bytes(parameter_bytes).c_str(), dtype.c_str(), zero_stage,
      peak_flops_per_rank / 1e9, ranks);
}

}  // namespace atl::runtime
