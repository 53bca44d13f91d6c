// One dataset of a blend: the shards a data.train / data.val entry names, cut into sequences.
//
// A sequence is seq + 1 tokens (inputs, and targets shifted by one) starting every seq tokens of a
// shard; none spans two shards. Sequence i of the dataset is found by a binary search over the
// shards' first sequence numbers (64-bit), so a dataset of many shards holds any number of tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/dataset_source.h"
#include "runtime/data/shard.h"

namespace atl::runtime {

// Which side of a prepared directory a dataset reads: its train*.bin or its val*.bin.
enum class DataSplit { kTrain, kVal };

// The shard files `path` names, in order: a file as it is; a directory's train*.bin (or val*.bin)
// when it has any, else every *.bin in it, sorted; a glob's matches, sorted. Throws
// std::runtime_error (one line: the path, the problem, the fix) for a glob that matches nothing or
// a directory without shards.
std::vector<std::string> dataset_files(const std::string& path, DataSplit split);

class Dataset {
 public:
  // `name`: the entry as the config wrote it. Throws std::runtime_error when the shards together
  // hold no sequence of seq + 1 tokens.
  Dataset(std::string name, std::vector<std::unique_ptr<Shard>> shards, int seq);

  const std::string& name() const { return name_; }
  const std::vector<std::unique_ptr<Shard>>& shards() const { return shards_; }
  int64_t num_sequences() const { return first_sequence_.back(); }
  int64_t tokens() const { return tokens_; }

  // Where sequence `index` starts: its shard and the token position in it.
  struct Location {
    const Shard* shard;
    int64_t position;
  };
  Location locate(int64_t index) const;
  // Copies the seq + 1 tokens of sequence `index` into `out`; std::out_of_range outside
  // [0, num_sequences()).
  void read_sequence(int64_t index, int64_t* out) const;

 private:
  std::string name_;
  std::vector<std::unique_ptr<Shard>> shards_;
  int seq_;
  int64_t tokens_ = 0;
  std::vector<int64_t> first_sequence_;  // shard k's first sequence; the total last
};

// What a run of `sequences_in_run` sequences draws from each of `datasets` blended by `weights`
// (each one's share of the run; the blend keeps it within one sequence).
std::vector<DatasetUse> dataset_uses(const std::vector<Dataset>& datasets, const std::vector<double>& weights,
                                     int64_t sequences_in_run);

// The dataset `path` names (dataset_files, each opened with open_shard).
Dataset open_dataset(const std::string& path, DataSplit split, int seq);

}  // namespace atl::runtime
