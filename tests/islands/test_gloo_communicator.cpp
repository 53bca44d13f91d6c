// The Gloo communicator between separate processes: the test serves a c10d TCPStore on loopback and
// starts itself once per member, as islands in separate jobs would be (no MPI world among them).
// Each member checks every operation against values it computes itself and runs the islands'
// exchange (IslandExchange::mean); the parent checks that every member's mean is bit-identical and
// the exact mean, and that a member that never joins fails the others within the timeout, never
// hangs them.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "comm/gloo_communicator.h"
#include "comm/rendezvous_server.h"
#include "optim/outer/island_exchange.h"
#include "tests/islands/member_processes.h"
#include "tests/temp_dir_test.h"

namespace atl::comm {
namespace {

constexpr int kMembers = 3;
constexpr int64_t kValues = 10007;  // not divisible by the members: uneven chunks
constexpr int kMemberFailed = 1;
constexpr int kGroupTimedOut = 3;  // the exit status of a member whose group could not form

// What member `rank` contributes: distinct per member, with values of many magnitudes.
at::Tensor contribution(int rank) {
  at::Tensor t = at::arange(kValues, at::kFloat).mul_(0.37 + rank).sin_().mul_(std::pow(10.0, rank - 1));
  return t;
}

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// The member's side: every operation against local expectations, then the exchange's mean written
// to its file. Returns the process's exit status.
int run_member(int rank, int port, const std::string& out, bool join) {
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(port);
  store_options.isServer = false;
  store_options.timeout = std::chrono::seconds(10);
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", store_options);
  if (!join) return 0;  // connected, then gone before the group forms
  GlooGroupOptions options;
  options.timeout = std::chrono::seconds(std::atoi(env("ATOLL_GLOO_TIMEOUT_S").c_str()));
  std::unique_ptr<GlooCommunicator> group;
  try {
    group = std::make_unique<GlooCommunicator>(
        c10::make_intrusive<c10d::PrefixStore>("islands/round-0", store), rank, kMembers, "islands", options);
  } catch (const std::runtime_error& e) {
    std::cerr << e.what() << "\n";
    return kGroupTimedOut;
  }
  int failures = 0;
  const auto expect = [&](bool ok, const std::string& what) {
    if (!ok) {
      std::cerr << "member " << rank << ": " << what << "\n";
      ++failures;
    }
  };
  const int n = kMembers;
  // all_reduce: sum, avg (integer truncation too), max.
  at::Tensor sum = at::full({1001}, static_cast<double>(rank + 1), at::kDouble);
  group->all_reduce(sum, ReduceOp::kSum)->wait();
  expect(sum.eq(n * (n + 1) / 2.0).all().item<bool>(), "all_reduce sum");
  at::Tensor avg = at::full({7}, static_cast<float>(rank), at::kFloat);
  group->all_reduce(avg, ReduceOp::kAvg)->wait();
  expect(avg.eq((n - 1) / 2.0f).all().item<bool>(), "all_reduce avg");
  at::Tensor int_avg = at::full({5}, rank + 1, at::kInt);
  group->all_reduce(int_avg, ReduceOp::kAvg)->wait();
  expect(int_avg.eq((n * (n + 1) / 2) / n).all().item<bool>(), "all_reduce avg int");
  at::Tensor max = at::full({3}, 10 * rank, at::kLong);
  group->all_reduce(max, ReduceOp::kMax)->wait();
  expect(max.eq(10 * (n - 1)).all().item<bool>(), "all_reduce max");
  // all_gather of uneven shards (10 over 3: 4, 3, 3), out of place and in place.
  at::Tensor gathered = at::full({10}, -1.0f);
  const ShardRange mine = shard_range(10, n, rank);
  group->all_gather(at::arange(mine.offset, mine.offset + mine.numel, at::kFloat), gathered)->wait();
  expect(gathered.equal(at::arange(10, at::kFloat)), "all_gather uneven");
  at::Tensor in_place = at::zeros({10}, at::kFloat);
  in_place.narrow(0, mine.offset, mine.numel)
      .copy_(at::arange(mine.offset, mine.offset + mine.numel, at::kFloat));
  group->all_gather(in_place.narrow(0, mine.offset, mine.numel), in_place)->wait();
  expect(in_place.equal(at::arange(10, at::kFloat)), "all_gather in place");
  // reduce_scatter: every member's shard of the sum.
  at::Tensor full = at::arange(10, at::kFloat).add_(rank);
  at::Tensor shard = at::empty({mine.numel}, at::kFloat);
  group->reduce_scatter(full, shard, ReduceOp::kSum)->wait();
  expect(shard.equal(
             at::arange(mine.offset, mine.offset + mine.numel, at::kFloat).mul_(n).add_(n * (n - 1) / 2)),
         "reduce_scatter sum");
  // broadcast from the last member.
  at::Tensor root = at::full({4}, static_cast<float>(rank));
  group->broadcast(root, n - 1)->wait();
  expect(root.eq(static_cast<float>(n - 1)).all().item<bool>(), "broadcast");
  // A ring of sends and receives in one batch, both directions.
  at::Tensor from_left = at::empty({6}, at::kFloat), from_right = at::empty({6}, at::kFloat);
  const int left = (rank + n - 1) % n, right = (rank + 1) % n;
  group
      ->batch_p2p({{P2POp::Kind::kSend, at::full({6}, static_cast<float>(rank)), right, 1},
                   {P2POp::Kind::kSend, at::full({6}, static_cast<float>(rank)), left, 2},
                   {P2POp::Kind::kRecv, from_left, left, 1},
                   {P2POp::Kind::kRecv, from_right, right, 2}})
      ->wait();
  expect(from_left.eq(static_cast<float>(left)).all().item<bool>() &&
             from_right.eq(static_cast<float>(right)).all().item<bool>(),
         "batch_p2p ring");
  group->barrier();
  expect(group->bytes().calls(OpKind::kAllReduce) == 4 && group->bytes().bytes(OpKind::kSend) == 2 * 6 * 4,
         "byte counters");

  // The islands' exchange over this group, at full precision and through the bf16 codec.
  optim::outer::IslandExchange exchange(*group, optim::outer::Codec::kNone, optim::outer::SimulatedLink{});
  const at::Tensor mean = exchange.mean(contribution(rank));
  optim::outer::IslandExchange bf16(*group, optim::outer::Codec::kBf16, optim::outer::SimulatedLink{});
  const at::Tensor mean_bf16 = bf16.mean(contribution(rank));
  std::ofstream file(out, std::ios::binary);
  file.write(static_cast<const char*>(mean.data_ptr()), static_cast<std::streamsize>(mean.nbytes()));
  file.write(static_cast<const char*>(mean_bf16.data_ptr()),
             static_cast<std::streamsize>(mean_bf16.nbytes()));
  return failures == 0 && file ? 0 : kMemberFailed;
}

// The parent's side: this binary again, once per member.
pid_t start_member(int rank, int port, const std::string& out, bool join, int timeout_s) {
  return test::start_member(
      {"ATOLL_GLOO_MEMBER=" + std::to_string(rank), "ATOLL_GLOO_PORT=" + std::to_string(port),
       "ATOLL_GLOO_OUT=" + out, "ATOLL_GLOO_JOIN=" + std::string(join ? "1" : "0"),
       "ATOLL_GLOO_TIMEOUT_S=" + std::to_string(timeout_s)},
      out + ".err");
}

class GlooGroup : public test::TempDirTest {};

TEST_F(GlooGroup, SeparateProcessesAgreeOnEveryOperationAndOnTheIslandsMean) {
  RendezvousServer store(0);
  std::vector<pid_t> members;
  for (int r = 0; r < kMembers; ++r)
    members.push_back(start_member(r, store.port(), path("mean-" + std::to_string(r)), true, 30));
  const std::vector<int> statuses = test::wait_all(members, std::chrono::seconds(60));
  for (int r = 0; r < kMembers; ++r)
    ASSERT_EQ(statuses[static_cast<size_t>(r)], 0)
        << "member " << r << ": " << test::read_file(path("mean-" + std::to_string(r) + ".err"));

  const std::string first = test::read_file(path("mean-0"));
  ASSERT_EQ(first.size(), 2 * kValues * sizeof(float));
  for (int r = 1; r < kMembers; ++r)
    EXPECT_EQ(test::read_file(path("mean-" + std::to_string(r))), first)
        << "member " << r << " ends with other bits";
  at::Tensor exact = at::zeros({kValues}, at::kDouble);
  for (int r = 0; r < kMembers; ++r) exact.add_(contribution(r).to(at::kDouble));
  exact.div_(kMembers);
  const at::Tensor mean =
      at::from_blob(const_cast<char*>(first.data()), {kValues}, at::kFloat).to(at::kDouble);
  const at::Tensor mean_bf16 =
      at::from_blob(const_cast<char*>(first.data()) + kValues * sizeof(float), {kValues}, at::kFloat)
          .to(at::kDouble);
  // fp32 sums of three terms: a few ulps; bf16: two roundings of 8 mantissa bits.
  EXPECT_LT((mean - exact).abs().max().item<double>(), 1e-6 * exact.abs().max().item<double>());
  EXPECT_LT((mean_bf16 - exact).abs().max().item<double>(), 2e-2 * exact.abs().max().item<double>());
  EXPECT_GT((mean_bf16 - exact).abs().max().item<double>(), 0.0) << "the bf16 codec rounded nothing";
}

TEST_F(GlooGroup, AMemberThatNeverJoinsFailsTheOthersWithinTheTimeout) {
  RendezvousServer store(0);
  std::vector<pid_t> members;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < kMembers; ++r)
    members.push_back(start_member(r, store.port(), path("mean-" + std::to_string(r)), r != 2, 3));
  const std::vector<int> statuses = test::wait_all(members, std::chrono::seconds(60));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(statuses[0], kGroupTimedOut);
  EXPECT_EQ(statuses[1], kGroupTimedOut);
  EXPECT_EQ(statuses[2], 0);
  EXPECT_LT(seconds, 30.0) << "the members waited far beyond their 3 s timeout";
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(test::last_line(test::read_file(path("mean-" + std::to_string(r) + ".err")))
                  .rfind("Gloo group islands: member " + std::to_string(r) +
                             " of 3 could not connect to its peers within 3 s: wait timeout",
                         0),
              0u)
        << test::read_file(path("mean-" + std::to_string(r) + ".err"));
}

}  // namespace
}  // namespace atl::comm

int main(int argc, char** argv) {
  if (const char* member = std::getenv("ATOLL_GLOO_MEMBER")) {
    return atl::comm::run_member(std::atoi(member), std::atoi(std::getenv("ATOLL_GLOO_PORT")),
                                 std::getenv("ATOLL_GLOO_OUT"),
                                 std::string(std::getenv("ATOLL_GLOO_JOIN")) == "1");
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
