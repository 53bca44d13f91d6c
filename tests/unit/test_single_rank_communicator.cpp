// A group of one process (the device plane of a one-rank mesh group, and `atoll eval`'s): every
// collective leaves the data as a collective of one would, and counts its call as every plane does,
// with no bytes on the wire -- so a group's call counts do not depend on which plane carried them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "comm/single_rank_communicator.h"

namespace atl::comm {
namespace {

TEST(SingleRankCommunicator, CollectivesKeepTheDataAndCountEachCallWithoutBytes) {
  SingleRankCommunicator self("dp");
  const at::Tensor values = at::arange(8, at::kFloat);
  at::Tensor reduced = values.clone();
  self.all_reduce(reduced, ReduceOp::kSum)->wait();
  EXPECT_TRUE(reduced.equal(values));
  at::Tensor shard = at::zeros({8});
  self.reduce_scatter(values, shard, ReduceOp::kAvg)->wait();
  EXPECT_TRUE(shard.equal(values));
  at::Tensor gathered = at::zeros({8});
  self.all_gather(values, gathered)->wait();
  EXPECT_TRUE(gathered.equal(values));
  self.broadcast(reduced, 0)->wait();
  EXPECT_TRUE(reduced.equal(values));
  for (OpKind op : {OpKind::kAllReduce, OpKind::kReduceScatter, OpKind::kAllGather, OpKind::kBroadcast}) {
    EXPECT_EQ(self.bytes().calls(op), 1u);
    EXPECT_EQ(self.bytes().bytes(op), 0u);
  }
}

TEST(SingleRankCommunicator, RefusesAPeerAndARootOtherThanItself) {
  SingleRankCommunicator self;
  at::Tensor t = at::zeros({2});
  EXPECT_THROW(self.send(t, 1), std::logic_error);
  EXPECT_THROW(self.broadcast(t, 1), std::invalid_argument);
}

}  // namespace
}  // namespace atl::comm
