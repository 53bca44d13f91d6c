// main() for multi-rank GoogleTest binaries run under mpirun.
//
// Each test's verdict is agreed across ranks: a listener all-reduces "this rank failed" at the end
// of every test, and a rank whose peers failed records a failure too, so every rank reports the
// same result and the process exit codes agree. Only rank 0 prints the usual progress output;
// other ranks print only their own failures.
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <iostream>

#include "checkpoint/remove_tree.h"
#include "comm/mpi_runtime.h"
#include "comm/nccl_host_identity.h"
#include "tests/mpi_test_env.h"
#include "tests/training_fixture.h"

namespace {

class AgreeOnVerdict : public testing::EmptyTestEventListener {
  void OnTestEnd(const testing::TestInfo& info) override {
    int failed = info.result()->Failed() ? 1 : 0;
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_failed && !failed) ADD_FAILURE() << "another rank failed this test";
  }
};

}  // namespace

int main(int argc, char** argv) {
  atl::comm::MpiRuntime runtime(&argc, &argv);
  atl::test::MpiTestEnv::set_runtime(&runtime);
  testing::InitGoogleTest(&argc, argv);
  // On a GPU, bitwise claims (resume, dp replicas) need deterministic kernels, as on the CPU by
  // construction (embedding backward otherwise adds with atomics in whatever order they land).
  if (atl::test::test_device() == atl::runtime::DeviceKind::kCuda)
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (atl::test::test_shares_gpu()) atl::comm::give_rank_own_nccl_host(rank);  // before any NCCL call
  testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
  }
  listeners.Append(new AgreeOnVerdict);
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  // Every rank is past its last read of any rank's files (rank 0's run directories are shared).
  // Not std::filesystem::remove_all, which crashed every test binary here at exit beside torch 2.11
  // on the GPU machine (checkpoint/remove_tree.h says why).
  try {
    atl::checkpoint::remove_tree(atl::test::process_scratch_dir().string());
  } catch (const std::exception& e) {
    std::cerr << "scratch directory not removed: " << e.what() << "\n";
  }
  return any_failed;
}
