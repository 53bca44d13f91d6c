// What data.train and data.val name: datasets, each a token shard, a directory of shards or a glob,
// with a weight (its share of the sequences is its weight over the sum of the weights). Header-only
// and free of dependencies: the config holds it, the data room opens it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace atl::runtime {

struct DatasetSource {
  std::string path;
  double weight = 1.0;
  bool operator==(const DatasetSource&) const = default;
};
using DatasetList = std::vector<DatasetSource>;

// What a run reads of one dataset: the start-up summary's and `atoll plan`'s line for it.
struct DatasetUse {
  std::string name;  // as data.train names it
  int64_t shards = 0, tokens = 0, sequences = 0;
  double weight = 1.0;  // as given
  double share = 1.0;   // of the stream: the weight over the sum of the weights
  double epochs = 0.0;  // times through its sequences at the run's length
};

// A list of one dataset of weight 1: what a single path means. (A function rather than a braced
// default member initializer, which crashes GCC 12's noexcept check.)
inline DatasetList one_dataset(std::string path) {
  return {DatasetSource{std::move(path), 1.0}};
}

}  // namespace atl::runtime
