#include "runtime/metrics/metrics.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace atl::runtime {

JsonRecord& JsonRecord::add(const std::string& key, double value) {
  fields_[key] = value;  // NaN and infinities are written as null: JSON has no such numbers
  return *this;
}

JsonRecord& JsonRecord::add(const std::string& key, const std::vector<double>& values) {
  fields_[key] = values;
  return *this;
}

JsonRecord& JsonRecord::add(const std::string& key, int64_t value) {
  fields_[key] = value;
  return *this;
}

JsonRecord& JsonRecord::add(const std::string& key, const std::string& value) {
  fields_[key] = value;
  return *this;
}

std::string JsonRecord::str() const {
  // Invalid UTF-8 in a string (a path, a reason) is replaced rather than failing the write.
  return fields_.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

MetricsLog::MetricsLog(const std::string& path) {
  if (path.empty()) return;
  out_.open(path, std::ios::app);
  if (!out_) throw std::runtime_error("metrics: cannot open " + path + " for writing; check run.dir");
}

void MetricsLog::write(const JsonRecord& record) {
  if (!out_.is_open()) return;
  out_ << record.str() << '\n';
  out_.flush();
}

JsonRecord to_json(const StepMetrics& m) {
  JsonRecord r;
  r.add("step", m.step)
      .add("loss", m.loss)
      .add("lr", m.lr)
      .add("grad_norm", m.grad_norm)
      .add("tokens_per_s", m.tokens_per_s)
      .add("mfu", m.mfu)
      .add("step_s", m.step_seconds)
      .add("comm_bytes", static_cast<int64_t>(m.comm_bytes))
      .add("tp_bytes", static_cast<int64_t>(m.tp_bytes))
      .add("dp_bytes", static_cast<int64_t>(m.dp_bytes))
      .add("pp_bytes", static_cast<int64_t>(m.pp_bytes))
      .add("comm_wait_s", m.comm_wait_seconds)
      .add("checkpoint_wait_s", m.checkpoint_wait_seconds)
      .add("rss_bytes", static_cast<int64_t>(m.rss_bytes))
      .add("param_bytes", static_cast<int64_t>(m.param_bytes))
      .add("grad_bytes", static_cast<int64_t>(m.grad_bytes))
      .add("optimizer_bytes", static_cast<int64_t>(m.optimizer_bytes))
      .add("activation_bytes", static_cast<int64_t>(m.activation_bytes));
  if (m.gpu_memory)
    r.add("gpu_allocated_bytes", static_cast<int64_t>(m.gpu_memory->allocated))
        .add("gpu_reserved_bytes", static_cast<int64_t>(m.gpu_memory->reserved))
        .add("gpu_peak_bytes", static_cast<int64_t>(m.gpu_memory->peak));
  if (m.context_parallel)
    r.add("cp_bytes", static_cast<int64_t>(m.cp_bytes)).add("kv_wait_s", m.kv_wait_seconds);
  if (m.skipped) r.add("skipped", static_cast<int64_t>(1));
  if (m.islands)
    r.add("outer_bytes", static_cast<int64_t>(m.outer_bytes))
        .add("outer_bytes_total", static_cast<int64_t>(m.outer_bytes_total))
        .add("outer_wait_s", m.outer_wait_seconds)
        .add("outer_simulated_s", m.outer_simulated_seconds);
  if (m.outer_islands > 0) r.add("outer_islands", static_cast<int64_t>(m.outer_islands));
  if (!m.stage_idle.empty())
    r.add("stage_idle", m.stage_idle).add("stage_activation_bytes", m.stage_activation_bytes);
  return r;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

uint64_t resident_memory_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace atl::runtime
