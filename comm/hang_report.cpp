#include "comm/hang_report.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>
#include <sstream>

#include "text/joined.h"

namespace atl::comm {
namespace {

OpKind op_named(const std::string& name) {
  for (int k = 0; k < static_cast<int>(OpKind::kCount); ++k)
    if (name == op_name(static_cast<OpKind>(k))) return static_cast<OpKind>(k);
  return OpKind::kCount;
}

// The whole of `text` as a number, or nothing.
template <typename T>
std::optional<T> number(const std::string& text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string describe(const FlightRecord& r) {
  return std::string(op_name(r.op)) + " #" + std::to_string(r.seq) + " on " + r.group;
}

bool is_point_to_point(const std::string& label) {
  return label.size() > 4 && label.compare(label.size() - 4, 4, " p2p") == 0;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

uint64_t issued_on(const RankFlightSummary& rank, const std::string& group) {
  const auto it = rank.groups.find(group);
  return it == rank.groups.end() ? 0 : it->second.issued;
}

}  // namespace

RankFlightSummary summarize(int rank, const FlightRecorder& recorder) {
  RankFlightSummary s;
  s.rank = rank;
  s.answered = true;
  s.groups = recorder.progress();
  s.waiting = recorder.oldest_in_flight();
  if (s.waiting) s.waiting_s = recorder.now_s() - s.waiting->start_s;
  return s;
}

std::string encode(const RankFlightSummary& s) {
  std::ostringstream out;
  out << "rank\t" << s.rank << "\n";
  for (const auto& [group, p] : s.groups)
    out << "group\t" << group << "\t" << p.issued << "\t" << p.completed << "\n";
  if (s.waiting)
    out << "waiting\t" << s.waiting->group << "\t" << op_name(s.waiting->op) << "\t" << s.waiting->seq << "\t"
        << s.waiting->bytes << "\t" << s.waiting_s << "\n";
  return out.str();
}

RankFlightSummary decode(const std::string& text) {
  RankFlightSummary s;
  s.answered = true;
  std::istringstream in(text);
  std::string line;
  // A field that does not read makes the whole message unreadable: the rank counts as silent.
  const auto unreadable = [&s] {
    s.answered = false;
    s.groups.clear();
    s.waiting.reset();
    return s;
  };
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, '\t');) f.push_back(x);
    if (f.size() == 2 && f[0] == "rank") {
      const auto rank = number<int>(f[1]);
      if (!rank || *rank < 0) return unreadable();
      s.rank = *rank;
    }
    if (f.size() == 4 && f[0] == "group") {
      const auto issued = number<uint64_t>(f[2]), completed = number<uint64_t>(f[3]);
      if (!issued || !completed) return unreadable();
      s.groups[f[1]] = {*issued, *completed};
    }
    if (f.size() == 6 && f[0] == "waiting") {
      FlightRecord r;
      r.group = f[1];
      r.op = op_named(f[2]);
      const auto seq = number<uint64_t>(f[3]), bytes = number<uint64_t>(f[4]);
      const auto waited = number<double>(f[5]);
      if (r.op == OpKind::kCount || !seq || !bytes || !waited) return unreadable();
      r.seq = *seq;
      r.bytes = *bytes;
      s.waiting = r;
      s.waiting_s = *waited;
    }
  }
  return s;
}

std::vector<int> members_of(const std::string& label) {
  std::vector<int> out;
  const size_t open = label.find('['), close = label.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return out;
  std::istringstream list(label.substr(open + 1, close - open - 1));
  for (std::string x; std::getline(list, x, ',');) {
    const auto member = number<int>(x);
    if (!member) return {};  // not a label this recorder wrote
    out.push_back(*member);
  }
  return out;
}

std::vector<std::string> diagnose_hang(const std::vector<RankFlightSummary>& ranks, double timeout_s) {
  std::vector<std::string> lines;
  std::vector<int> silent;
  for (const RankFlightSummary& r : ranks)
    if (!r.answered) silent.push_back(r.rank);
  const auto rank_of = [&](int rank) -> const RankFlightSummary* {
    for (const RankFlightSummary& r : ranks)
      if (r.rank == rank && r.answered) return &r;
    return nullptr;
  };
  // Whether a member of the group of `op` has not issued it yet (only collectives can tell).
  const auto someone_behind = [&](const FlightRecord& op) {
    if (is_point_to_point(op.group)) return false;
    for (int member : members_of(op.group)) {
      const RankFlightSummary* m = rank_of(member);
      if (m && issued_on(*m, op.group) < op.seq) return true;
    }
    return false;
  };
  // The stuck operation: one that a member has not reached, the longest waiting of those; else
  // the longest wait. (A laggard's own unfinished operation can be older, but it is not the cause.)
  const RankFlightSummary* stuck = nullptr;
  bool stuck_has_laggard = false;
  for (const RankFlightSummary& r : ranks) {
    if (!r.answered || !r.waiting) continue;
    const bool laggard = someone_behind(*r.waiting);
    if (!stuck || laggard > stuck_has_laggard ||
        (laggard == stuck_has_laggard && r.waiting_s > stuck->waiting_s)) {
      stuck = &r;
      stuck_has_laggard = laggard;
    }
  }

  if (!stuck) {
    lines.push_back(
        "no answering rank is waiting in a collective; the hang was reported by a rank that did not answer");
  } else {
    const FlightRecord& op = *stuck->waiting;
    std::vector<int> waiting_too;
    for (const RankFlightSummary& r : ranks)
      if (r.answered && r.waiting && r.waiting->group == op.group && r.waiting->seq == op.seq)
        waiting_too.push_back(r.rank);
    const std::string who = text::joined(waiting_too, ",", [](int r) { return std::to_string(r); });
    lines.push_back(describe(op) + " (" + std::to_string(op.bytes) + " B) has waited " +
                    seconds(stuck->waiting_s) + " (comm.timeout_s = " + seconds(timeout_s) + ") on rank" +
                    (waiting_too.size() > 1 ? "s " : " ") + who);
    bool any_behind = false;
    for (int member : members_of(op.group)) {
      const RankFlightSummary* m = rank_of(member);
      if (!m) continue;  // reported below with the silent ranks
      const uint64_t issued = issued_on(*m, op.group);
      if (is_point_to_point(op.group) ? m->waiting.has_value() : issued >= op.seq) continue;
      any_behind = true;
      std::string where = m->waiting ? "its oldest unfinished operation is " + describe(*m->waiting) + " (" +
                                           seconds(m->waiting_s) + ")"
                                     : "it is in no collective (computing, loading data or stalled)";
      lines.push_back("rank " + std::to_string(member) + " is behind: it issued " + std::to_string(issued) +
                      " of " + std::to_string(op.seq) + " operations on " + op.group + "; " + where);
    }
    if (!any_behind && silent.empty())
      lines.push_back("every member of " + op.group +
                      " entered it: the collective itself is stuck (network, or ranks that issued different "
                      "collectives in the same order)");
  }
  for (int r : silent)
    lines.push_back("rank " + std::to_string(r) + " did not answer the watchdog (dead, or stuck inside MPI)");
  return lines;
}

}  // namespace atl::comm
