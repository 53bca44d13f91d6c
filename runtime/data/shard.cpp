#include "runtime/data/shard.h"

#include "runtime/data/token_shard.h"

namespace atl::runtime {

std::unique_ptr<Shard> open_shard(const std::string& path) {
  return std::make_unique<TokenShard>(path);
}

}  // namespace atl::runtime
