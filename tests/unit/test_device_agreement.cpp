// The line every rank stops with when run.device auto chose CUDA on some ranks and the CPU on others:
// the ranks and hosts on each side, each CPU host's reason, the fix.
#include <gtest/gtest.h>

#include "runtime/device_agreement.h"

namespace atl::runtime {
namespace {

const std::string kNoGpu = "no CUDA device is visible to this rank";

TEST(DeviceAgreement, RanksThatAllChoseOneKindAgree) {
  EXPECT_FALSE(device_kind_mismatch({{"node-a", true, ""}, {"node-b", true, ""}}).has_value());
  EXPECT_FALSE(device_kind_mismatch({{"node-a", false, kNoGpu}, {"node-b", false, kNoGpu}}).has_value());
  EXPECT_FALSE(device_kind_mismatch({{"node-a", false, ""}}).has_value());
  EXPECT_FALSE(device_kind_mismatch({}).has_value());
}

TEST(DeviceAgreement, AMismatchNamesTheRanksAndHostsOnEachSideInOneLine) {
  EXPECT_EQ(device_kind_mismatch({{"node-a", true, ""}, {"node-a", true, ""}, {"node-b", false, kNoGpu}})
                .value_or(""),
            "run.device auto chose cuda on ranks 0-1 (node-a) and cpu on rank 2 (node-b: no CUDA device is "
            "visible to this rank); give every rank a GPU or set run.device: cpu");
  // Runs of ranks compressed, hosts grouped by their reason, in order of first appearance.
  const std::string shared = "2 ranks on this node share 1 GPU and NCCL needs a GPU per rank";
  EXPECT_EQ(device_kind_mismatch({{"c", false, kNoGpu},
                                  {"a", true, ""},
                                  {"a", true, ""},
                                  {"d", false, shared},
                                  {"d", false, shared},
                                  {"b", true, ""},
                                  {"e", false, kNoGpu}})
                .value_or(""),
            "run.device auto chose cuda on ranks 1-2, 5 (a, b) and cpu on ranks 0, 3-4, 6 (c, e: no CUDA "
            "device is visible to this rank; d: 2 ranks on this node share 1 GPU and NCCL needs a GPU per "
            "rank); give every rank a GPU or set run.device: cpu");
}

TEST(DeviceAgreement, AThousandRankJobNamesAFewHostsPerSide) {
  std::vector<RankDeviceKind> ranks;
  for (int r = 0; r < 1000; ++r)
    ranks.push_back({"n" + std::to_string(r / 8), r < 992, r < 992 ? "" : kNoGpu});
  EXPECT_EQ(device_kind_mismatch(ranks).value_or(""),
            "run.device auto chose cuda on ranks 0-991 (n0, n1, n2, n3 and 120 more hosts) and cpu on ranks "
            "992-999 (n124: no CUDA device is visible to this rank); give every rank a GPU or set "
            "run.device: cpu");
}

}  // namespace
}  // namespace atl::runtime
