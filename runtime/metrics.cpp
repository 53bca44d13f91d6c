#include "runtime/metrics.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace atl::runtime {

void JsonRecord::key(const std::string& k) {
  if (!body_.empty()) body_ += ",";
  body_ += "\"" + k + "\":";
}

namespace {

std::string round_trip(double value) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  return buf;
}

}  // namespace

JsonRecord& JsonRecord::add(const std::string& k, double value) {
  key(k);
  body_ += round_trip(value);
  return *this;
}

JsonRecord& JsonRecord::add(const std::string& k, const std::vector<double>& values) {
  key(k);
  body_ += "[";
  for (size_t i = 0; i < values.size(); ++i) body_ += (i ? "," : "") + round_trip(values[i]);
  body_ += "]";
  return *this;
}

JsonRecord& JsonRecord::add(const std::string& k, int64_t value) {
  key(k);
  body_ += std::to_string(value);
  return *this;
}

JsonRecord& JsonRecord::add(const std::string& k, const std::string& value) {
  key(k);
  std::string escaped;
  for (char c : value) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c;
  }
  body_ += "\"" + escaped + "\"";
  return *this;
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
      .add("optimizer_bytes", static_cast<int64_t>(m.optimizer_bytes));
  if (m.skipped) r.add("skipped", static_cast<int64_t>(1));
  if (m.islands)
    r.add("outer_bytes", static_cast<int64_t>(m.outer_bytes))
        .add("outer_bytes_total", static_cast<int64_t>(m.outer_bytes_total))
        .add("outer_wait_s", m.outer_wait_seconds)
        .add("outer_simulated_s", m.outer_simulated_seconds);
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

std::string progress_line(const StepMetrics& m, int64_t total_steps) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "step %5lld/%lld | loss %.4f | lr %.3e | grad norm %.3f | %.0f tok/s | MFU %.1f%% | mem %s "
                "(model state %s) | "
                "comm %s/step (wait %.1f ms)",
                static_cast<long long>(m.step), static_cast<long long>(total_steps), m.loss, m.lr,
                m.grad_norm, m.tokens_per_s, 100.0 * m.mfu,
                format_bytes(static_cast<double>(m.rss_bytes)).c_str(),
                format_bytes(static_cast<double>(m.param_bytes + m.grad_bytes + m.optimizer_bytes)).c_str(),
                format_bytes(static_cast<double>(m.comm_bytes)).c_str(), 1e3 * m.comm_wait_seconds);
  std::string line = buf;
  if (m.islands) {
    std::snprintf(buf, sizeof buf, " | outer %s in all (wait %.1f ms)",
                  format_bytes(static_cast<double>(m.outer_bytes_total)).c_str(), 1e3 * m.outer_wait_seconds);
    line += buf;
  }
  return line;
}

uint64_t resident_memory_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace atl::runtime
