#include "runtime/gpu_assignment.h"

#include <map>
#include <set>

namespace atl::runtime {

namespace {

class Matching {
 public:
  explicit Matching(const std::vector<std::vector<std::string>>& node_gpus)
      : node_gpus_(node_gpus), taken_(node_gpus.size()) {}

  // Gives `rank` a GPU of its own, moving ranks that hold one it sees along an augmenting path.
  bool place(size_t rank) {
    std::set<std::string> visited;
    return augment(rank, visited);
  }

  std::vector<std::optional<int>> indices() const { return taken_; }

 private:
  bool augment(size_t rank, std::set<std::string>& visited) {
    const std::vector<std::string>& gpus = node_gpus_[rank];
    // A free GPU first (a path of length one), so nothing moves that need not.
    for (size_t i = 0; i < gpus.size(); ++i)
      if (!holder_.count(gpus[i])) return take(rank, i);
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (!visited.insert(gpus[i]).second) continue;
      if (augment(holder_.at(gpus[i]), visited)) return take(rank, i);
    }
    return false;
  }

  bool take(size_t rank, size_t index) {
    holder_[node_gpus_[rank][index]] = rank;
    taken_[rank] = static_cast<int>(index);
    return true;
  }

  const std::vector<std::vector<std::string>>& node_gpus_;
  std::map<std::string, size_t> holder_;   // GPU identity -> the rank holding it
  std::vector<std::optional<int>> taken_;  // rank -> index of its GPU in its own list
};

}  // namespace

std::vector<std::optional<int>> assign_gpus(const std::vector<std::vector<std::string>>& node_gpus) {
  Matching matching(node_gpus);
  for (size_t rank = 0; rank < node_gpus.size(); ++rank) matching.place(rank);
  return matching.indices();
}

}  // namespace atl::runtime
