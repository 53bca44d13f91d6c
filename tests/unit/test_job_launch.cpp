// atoll launch's launcher lines: mpirun on this host never leaves Open MPI's default binding in place
// (it would put a rank's threads on one core), oversubscribes only past the cores, and hostfile and
// Slurm lines carry their own placement.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "launcher/job_launch.h"

namespace {

using atl::launcher::LaunchMode;
using atl::launcher::LaunchRequest;

std::string line(const LaunchRequest& request) {
  return atl::launcher::command_line(atl::launcher::launcher_prefix(request));
}

}  // namespace

TEST(JobLaunch, LocalMpirunUnbindsRanksAndOversubscribesOnlyPastTheCores) {
  LaunchRequest request;
  request.ranks = 2;
  request.cores = 16;
  EXPECT_EQ(line(request), "mpirun -np 2 -x ATOLL_PROGRESS --bind-to none");
  request.ranks = 4;
  request.cores = 2;
  request.as_root = true;
  EXPECT_EQ(line(request),
            "mpirun -np 4 --allow-run-as-root -x ATOLL_PROGRESS --oversubscribe --bind-to none");
}

TEST(JobLaunch, HostfileAndSlurmLinesKeepTheirOwnPlacement) {
  LaunchRequest hostfile;
  hostfile.mode = LaunchMode::kHostfile;
  hostfile.ranks = 8;
  hostfile.hostfile = "hosts";
  EXPECT_EQ(line(hostfile), "mpirun -np 8 -x ATOLL_PROGRESS --hostfile hosts");
  LaunchRequest slurm;
  slurm.mode = LaunchMode::kSlurm;
  slurm.ranks = 8;
  EXPECT_EQ(line(slurm), "srun --ntasks=8 --kill-on-bad-exit=1");
}
