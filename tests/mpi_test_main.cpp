// main() for multi-rank GoogleTest binaries run under mpirun.
//
// Each test's verdict is agreed across ranks: a listener all-reduces "this rank failed" at the end
// of every test, and a rank whose peers failed records a failure too, so every rank reports the
// same result and the process exit codes agree. Only rank 0 prints the usual progress output;
// other ranks print only their own failures.
//
// No case skips: those written for some rank counts (ATOLL_RUNS_AT, tests/world_sizes.h) are left
// out of the other rank counts' runs here, by name, and any case that skips all the same fails the
// binary, so a passing CTest entry means that every case it selected ran.
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <iostream>

#include "checkpoint/remove_tree.h"
#include "comm/mpi_runtime.h"
#include "comm/nccl_host_identity.h"
#include "runtime/process_exit.h"
#include "tests/mpi_test_env.h"
#include "tests/training_fixture.h"
#include "tests/world_sizes.h"

namespace {

class AgreeOnVerdict : public testing::EmptyTestEventListener {
  void OnTestEnd(const testing::TestInfo& info) override {
    int failed = info.result()->Failed() ? 1 : 0;
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_failed && !failed) ADD_FAILURE() << "another rank failed this test";
  }
};

// The cases that skipped, by name (the same on every rank).
class SkippedCases : public testing::EmptyTestEventListener {
 public:
  const std::vector<std::string>& names() const { return names_; }

 private:
  void OnTestEnd(const testing::TestInfo& info) override {
    if (info.result()->Skipped()) names_.push_back(std::string(info.test_suite_name()) + "." + info.name());
  }
  std::vector<std::string> names_;
};

// Leaves the cases written for other rank counts out of this run (one line on rank 0 says which).
// False when a registration names no case of this binary.
bool select_cases_for_world_size(int rank, int world_size) {
  if (const std::string unknown = atl::test::unknown_registered_cases(); !unknown.empty()) {
    if (rank == 0) std::cerr << "ATOLL_RUNS_AT names no case of this binary: " << unknown << "\n";
    return false;
  }
  const std::string elsewhere = atl::test::cases_for_other_world_sizes(world_size);
  if (elsewhere.empty()) return true;
  std::string filter = GTEST_FLAG_GET(filter);
  filter += (filter.find('-') == std::string::npos ? "-" : ":") + elsewhere;
  GTEST_FLAG_SET(filter, filter);
  if (rank == 0)
    std::cout << "[ ATOLL    ] at " << world_size
              << " ranks, leaving out the cases written for other rank counts: " << elsewhere << std::endl;
  return true;
}

// The whole run, MPI's lifetime with it; main ends the process when it returns.
int run_tests(int argc, char** argv) {
  atl::comm::MpiRuntime runtime(&argc, &argv);
  atl::test::MpiTestEnv::set_runtime(&runtime);
  testing::InitGoogleTest(&argc, argv);
  // On a GPU, bitwise claims (resume, dp replicas) need deterministic kernels, as on the CPU by
  // construction; strict, as run.deterministic is (runtime/device.h: warn-only leaves the fused
  // attention backward adding with atomics in whatever order they land).
  if (atl::test::test_device() == atl::runtime::DeviceKind::kCuda)
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  int rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (!select_cases_for_world_size(rank, world_size)) return 1;
  if (atl::test::test_shares_gpu()) atl::comm::give_rank_own_nccl_host(rank);  // before any NCCL call
  testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
  }
  listeners.Append(new AgreeOnVerdict);
  auto* skipped = new SkippedCases;  // owned by the listener list, which outlives main's use
  listeners.Append(skipped);
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  if (!skipped->names().empty()) {
    if (rank == 0)
      std::cerr << "cases skipped, which fails this run (a case must run or be left out): "
                << atl::test::joined(skipped->names(), ", ") << "\n";
    failed = 1;
  }
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  // Every rank is past its last read of any rank's files (rank 0's run directories are shared).
  // Not std::filesystem::remove_all, which can crash at exit beside LibTorch (checkpoint/remove_tree.h
  // says why).
  try {
    atl::checkpoint::remove_tree(atl::test::process_scratch_dir().string());
  } catch (const std::exception& e) {
    std::cerr << "scratch directory not removed: " << e.what() << "\n";
  }
  return any_failed;
}

}  // namespace

int main(int argc, char** argv) {
  atl::runtime::end_process(run_tests(argc, argv));
}
