#include "runtime/device_agreement.h"

#include <algorithm>
#include <sstream>

#include "comm/mpi_communicator.h"
#include "comm/string_gather.h"
#include "runtime/startup.h"
#include "text/joined.h"

namespace atl::runtime {

namespace {

// A thousand-rank job names a few hosts per side, not all of them.
constexpr size_t kHostsNamed = 4;

// "rank 2", "ranks 0-1, 4, 6-9": ascending world ranks, runs compressed.
std::string rank_list(const std::vector<int>& ranks) {
  std::vector<std::string> runs;
  for (size_t first = 0; first < ranks.size();) {
    size_t last = first;
    while (last + 1 < ranks.size() && ranks[last + 1] == ranks[last] + 1) ++last;
    runs.push_back(std::to_string(ranks[first]) +
                   (last > first ? "-" + std::to_string(ranks[last]) : std::string()));
    first = last + 1;
  }
  return (ranks.size() == 1 ? "rank " : "ranks ") + text::joined(runs, ", ");
}

// "node-a, node-b and 3 more hosts": distinct hosts in order of first appearance.
std::string host_list(const std::vector<std::string>& hosts) {
  std::vector<std::string> named(hosts.begin(), hosts.begin() + std::min(hosts.size(), kHostsNamed));
  const size_t more = hosts.size() - named.size();
  return text::joined(named, ", ") +
         (more > 0 ? " and " + std::to_string(more) + " more host" + (more == 1 ? "" : "s") : "");
}

// One side's ranks and hosts: "ranks 0-1 (node-a)", "rank 2 (node-b: no CUDA device is visible to
// this rank)" -- hosts grouped by their reason.
std::string side(const std::vector<RankDeviceKind>& ranks, bool cuda) {
  std::vector<int> numbers;
  std::vector<std::pair<std::string, std::vector<std::string>>> by_reason;  // reason, its hosts
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankDeviceKind& rank = ranks[r];
    if (rank.cuda != cuda) continue;
    numbers.push_back(static_cast<int>(r));
    auto group = std::find_if(by_reason.begin(), by_reason.end(),
                              [&rank](const auto& entry) { return entry.first == rank.cpu_reason; });
    if (group == by_reason.end()) group = by_reason.insert(by_reason.end(), {rank.cpu_reason, {}});
    std::vector<std::string>& hosts = group->second;
    if (std::find(hosts.begin(), hosts.end(), rank.host) == hosts.end()) hosts.push_back(rank.host);
  }
  const std::string hosts = text::joined(by_reason, "; ", [](const auto& entry) {
    return host_list(entry.second) + (entry.first.empty() ? "" : ": " + entry.first);
  });
  return rank_list(numbers) + " (" + hosts + ")";
}

// A rank's record: "HOST\nKIND\nREASON" (host names and reasons hold no newline).
std::string record_of(const DeviceChoice& choice, const std::string& host) {
  return host + "\n" + (choice.device.is_cuda() ? "cuda" : "cpu") + "\n" + choice.cpu_reason;
}

RankDeviceKind parse_record(const std::string& record) {
  std::istringstream in(record);
  RankDeviceKind rank;
  std::string kind;
  std::getline(in, rank.host);
  std::getline(in, kind);
  std::getline(in, rank.cpu_reason);
  rank.cuda = kind == "cuda";
  return rank;
}

}  // namespace

std::optional<std::string> device_kind_mismatch(const std::vector<RankDeviceKind>& ranks) {
  const auto cuda = [](const RankDeviceKind& rank) { return rank.cuda; };
  if (std::all_of(ranks.begin(), ranks.end(), cuda) || std::none_of(ranks.begin(), ranks.end(), cuda))
    return std::nullopt;
  return "run.device auto chose cuda on " + side(ranks, true) + " and cpu on " + side(ranks, false) +
         "; give every rank a GPU or set run.device: cpu";
}

void agree_on_device_kind(const comm::MpiCommunicator& world, const DeviceChoice& choice,
                          const std::string& host) {
  std::vector<RankDeviceKind> ranks;
  for (const std::string& record : comm::all_gather_strings(world.handle(), record_of(choice, host)))
    ranks.push_back(parse_record(record));
  if (const std::optional<std::string> mismatch = device_kind_mismatch(ranks))
    throw AgreedStartupError(*mismatch);
}

}  // namespace atl::runtime
