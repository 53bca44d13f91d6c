// atoll launch's launcher lines: mpirun on this host never leaves Open MPI's default binding in place
// (it would put a rank's threads on one core), oversubscribes only past the cores, and hostfile and
// Slurm lines carry their own placement.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "launcher/job_launch.h"

namespace {

using atl::launcher::choose_srun_mpi;
using atl::launcher::LaunchMode;
using atl::launcher::LaunchRequest;
using atl::launcher::srun_mpi_plugins;

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

// Slurm's default MpiDefault is none, under which Open MPI's ranks die in MPI_Init: srun is told the
// plugin, read from what `srun --mpi=list` offers. The listings below are each Slurm's format as its
// src/common/plugrack.c prints it (plugrack_print_mpi_plugins): 20.11 and 21.08 log through info(),
// so srun puts "srun: " before every line, and list the pmix versions as plugins of their own; 22.05
// prints to stdout, one tab-indented name per line, the versions on a line of their own; 23.02 to
// 24.11 likewise, 23.11 on with "none" printed first whether or not a plugin file names it.
TEST(JobLaunch, SrunGetsThePmixPluginOrOneLineSayingItIsMissing) {
  const std::string slurm_20_11 =
      "srun: MPI types are...\nsrun: cray_shasta\nsrun: none\nsrun: pmi2\nsrun: pmix\nsrun: pmix_v3\n";
  EXPECT_EQ(srun_mpi_plugins(slurm_20_11),
            (std::vector<std::string>{"cray_shasta", "none", "pmi2", "pmix", "pmix_v3"}));
  EXPECT_EQ(choose_srun_mpi(srun_mpi_plugins(slurm_20_11)), "pmix");
  // 21.08 as Ubuntu 22.04 ships it (21.08.5), no "pmix" link beside the versioned plugin.
  const std::string slurm_21_08 =
      "srun: MPI types are...\nsrun: none\nsrun: pmi2\nsrun: cray_shasta\nsrun: pmix_v3\n";
  EXPECT_EQ(srun_mpi_plugins(slurm_21_08),
            (std::vector<std::string>{"none", "pmi2", "cray_shasta", "pmix_v3"}));
  EXPECT_EQ(choose_srun_mpi(srun_mpi_plugins(slurm_21_08)), "pmix_v3");
  const std::string slurm_22_05 =
      "MPI plugin types are...\n\tpmix\n\tnone\n\tcray_shasta\n\tpmi2\nspecific pmix plugin versions "
      "available: pmix_v4\n";
  EXPECT_EQ(srun_mpi_plugins(slurm_22_05),
            (std::vector<std::string>{"pmix", "none", "cray_shasta", "pmi2", "pmix_v4"}));
  EXPECT_EQ(choose_srun_mpi(srun_mpi_plugins(slurm_22_05)), "pmix");
  const std::string slurm_23_02 =
      "MPI plugin types are...\n\tcray_shasta\n\tnone\n\tpmi2\n\tpmix\nspecific pmix plugin versions "
      "available: pmix_v3,pmix_v4\n";
  EXPECT_EQ(srun_mpi_plugins(slurm_23_02),
            (std::vector<std::string>{"cray_shasta", "none", "pmi2", "pmix", "pmix_v3", "pmix_v4"}));
  EXPECT_EQ(choose_srun_mpi(srun_mpi_plugins(slurm_23_02)), "pmix");
  const std::string slurm_24_11 =
      "MPI plugin types are...\n\tnone\n\tcray_shasta\n\tpmi2\n\tpmix\nspecific pmix plugin versions "
      "available: pmix_v5\n";
  EXPECT_EQ(srun_mpi_plugins(slurm_24_11),
            (std::vector<std::string>{"none", "cray_shasta", "pmi2", "pmix", "pmix_v5"}));
  // Only versioned plugins installed: the newest, by number (v10 after v5).
  EXPECT_EQ(choose_srun_mpi(srun_mpi_plugins("MPI plugin types are...\n\tnone\n\tpmi2\nspecific pmix plugin "
                                             "versions available: pmix_v5,pmix_v10,pmix_v4\n")),
            "pmix_v10");
  // What srun says besides the listing (a plugin it could not read, a warning) names no plugin.
  EXPECT_EQ(
      srun_mpi_plugins("srun: error: Couldn't stat plugin dir\nsrun: MPI types are...\nsrun: error: bad "
                       "file /usr/lib/slurm/mpi_x.so\nsrun: none\nsrun: pmix\n"),
      (std::vector<std::string>{"none", "pmix"}));
  LaunchRequest slurm;
  slurm.mode = LaunchMode::kSlurm;
  slurm.ranks = 4;
  slurm.srun_mpi = "pmix";
  EXPECT_EQ(line(slurm), "srun --ntasks=4 --kill-on-bad-exit=1 --mpi=pmix");
  const auto refusal = [](const std::string& listing) {
    try {
      choose_srun_mpi(srun_mpi_plugins(listing));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal("MPI plugin types are...\n\tnone\n\tpmi2\n")
                .rfind("--slurm: srun has no pmix MPI plugin (srun --mpi=list offers: none, pmi2)", 0),
            0u)
      << refusal("MPI plugin types are...\n\tnone\n\tpmi2\n");
  EXPECT_EQ(
      refusal("srun: MPI types are...\nsrun: cray_shasta\nsrun: none\nsrun: pmi2\n")
          .rfind("--slurm: srun has no pmix MPI plugin (srun --mpi=list offers: cray_shasta, none, pmi2)", 0),
      0u)
      << refusal("srun: MPI types are...\nsrun: cray_shasta\nsrun: none\nsrun: pmi2\n");
  EXPECT_EQ(refusal("srun: fatal: Could not establish a configuration source\n")
                .rfind("--slurm: srun has no pmix MPI plugin (srun --mpi=list offers: nothing)", 0),
            0u);
}

// A job is ended only once its first failed rank has been on record for longer than the grace: a
// clean exit, or a failure inside the grace, leaves the launcher waiting for mpirun.
TEST(JobLaunch, AJobIsOverdueOnlyOnceItsFirstFailureOutlivedTheGrace) {
  using atl::launcher::outlived_failure;
  using atl::launcher::RankExit;
  const RankExit clean{0, 100, "node0", false, 0, 1000.0};
  const RankExit hung{2, 102, "node1", false, 4, 1010.0};
  const RankExit killed{3, 103, "node1", true, 9, 1012.0};
  EXPECT_FALSE(outlived_failure({}, 5000.0, 20.0));
  EXPECT_FALSE(outlived_failure({clean}, 5000.0, 20.0));
  EXPECT_FALSE(outlived_failure({clean, killed, hung}, 1030.0, 20.0));  // 20 s after the first failure
  EXPECT_TRUE(outlived_failure({clean, killed, hung}, 1030.5, 20.0));   // counted from rank 2's, not 3's
  EXPECT_TRUE(outlived_failure({killed}, 1032.5, 20.0));
}
