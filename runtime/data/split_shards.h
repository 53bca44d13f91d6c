// The tokens of one side of `atoll data prepare` (train or val) written as llm.c shards of at most
// `shard_tokens` tokens each, streamed to disk as they come so that memory holds none of them. A
// side that fits one shard is DIR/SIDE.bin, as always; a larger one is DIR/SIDE-00000.bin,
// SIDE-00001.bin, ... Each shard is written as SIDE.partial.PID and renamed when complete, so an
// interrupted run never leaves a half shard under a shard's name.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace atl::runtime {

struct ShardSummary {
  std::string path;
  int64_t tokens = 0;
  int64_t documents = 0;  // documents whose first token is in this shard
  std::set<int> sources;  // indices of the inputs whose tokens are in it
};

class SplitShards {
 public:
  // `output(name)` registers DIR/name as an output (removed if the run fails) and returns its path.
  SplitShards(std::function<std::string(const std::string&)> output, std::string side, int64_t shard_tokens,
              bool wide);
  ~SplitShards();
  SplitShards(const SplitShards&) = delete;
  SplitShards& operator=(const SplitShards&) = delete;

  // Appends tokens of the inputs `sources`; `documents` of them start there (counted in the shard
  // that gets the first of these tokens).
  void add(const std::vector<uint32_t>& tokens, const std::vector<int>& sources, int64_t documents);
  int64_t tokens() const { return total_; }
  // Completes the last shard and names them all; removes shards of an earlier run into the same
  // directory that this one did not write (SIDE.bin beside SIDE-NNNNN.bin, or higher numbers) and
  // the partial shards of interrupted runs (SIDE.partial.PID of a process that is gone).
  std::vector<ShardSummary> finish();

 private:
  void open_shard();
  void close_shard(const std::string& name);

  std::function<std::string(const std::string&)> output_;
  std::string side_;
  int64_t shard_tokens_;
  bool wide_;
  std::vector<ShardSummary> shards_;
  std::FILE* file_ = nullptr;
  std::string temporary_;
  int64_t total_ = 0;
};

// The name of shard `index` of `side` when it has more than one: side-00000.bin.
std::string numbered_shard_name(const std::string& side, size_t index);

}  // namespace atl::runtime
