// run.share_gpu's NCCL host identity: distinct per rank, set before NCCL reads it, and the user's own
// socket interface kept.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "comm/nccl_host_identity.h"

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "<unset>";
}

}  // namespace

TEST(NcclHostIdentity, EveryRankOfAHostGetsAnIdOfItsOwn) {
  EXPECT_EQ(atl::comm::shared_gpu_host_id("gpu-node", 0), "gpu-node/atoll-rank-0");
  EXPECT_NE(atl::comm::shared_gpu_host_id("gpu-node", 1), atl::comm::shared_gpu_host_id("gpu-node", 10));
  EXPECT_NE(atl::comm::shared_gpu_host_id("gpu-node", 3), atl::comm::shared_gpu_host_id("gpu-node2", 3));
}

TEST(NcclHostIdentity, SetsTheHostIdAndLoopbackUnlessAnInterfaceIsChosen) {
  unsetenv("NCCL_HOSTID");
  unsetenv("NCCL_SOCKET_IFNAME");
  atl::comm::give_rank_own_nccl_host(5);
  const std::string id = env("NCCL_HOSTID");
  EXPECT_NE(id.find("/atoll-rank-5"), std::string::npos) << id;
  EXPECT_EQ(env("NCCL_SOCKET_IFNAME"), "lo");
  // A user's interface stays; the host id follows the rank.
  setenv("NCCL_SOCKET_IFNAME", "eth1", 1);
  atl::comm::give_rank_own_nccl_host(6);
  EXPECT_EQ(env("NCCL_SOCKET_IFNAME"), "eth1");
  EXPECT_NE(env("NCCL_HOSTID").find("/atoll-rank-6"), std::string::npos);
  unsetenv("NCCL_HOSTID");
  unsetenv("NCCL_SOCKET_IFNAME");
}
