#include "runtime/data/shard.h"

#include <filesystem>
#include <stdexcept>

#include "runtime/data/megatron_shard.h"
#include "runtime/data/token_shard.h"

namespace atl::runtime {

void shard_error(const std::string& path, const std::string& problem) {
  throw std::runtime_error("data: " + path + " " + problem);
}

// A .bin with its .idx beside it is Megatron's; anything else must be llm.c's (whose reader says,
// for a file that is neither, that a Megatron .bin needs its .idx).
std::unique_ptr<Shard> open_shard(const std::string& path) {
  std::error_code error;
  if (path.ends_with(".bin") && std::filesystem::exists(megatron_index_path(path), error))
    return std::make_unique<MegatronShard>(path);
  return std::make_unique<TokenShard>(path);
}

}  // namespace atl::runtime
