#include "comm/nccl_host_identity.h"

#include <unistd.h>

#include <cstdlib>

namespace atl::comm {

std::string shared_gpu_host_id(const std::string& host_name, int world_rank) {
  return host_name + "/atoll-rank-" + std::to_string(world_rank);
}

void give_rank_own_nccl_host(int world_rank) {
  char host[256] = {};
  const bool named = gethostname(host, sizeof host - 1) == 0 && host[0] != '\0';
  setenv("NCCL_HOSTID", shared_gpu_host_id(named ? host : "localhost", world_rank).c_str(), /*overwrite=*/1);
  setenv("NCCL_SOCKET_IFNAME", "lo", /*overwrite=*/0);
}

}  // namespace atl::comm
