// atoll launch's launcher lines: mpirun on this host never leaves Open MPI's default binding in place
// (it would put a rank's threads on one core), oversubscribes only past the cores, and hostfile and
// Slurm lines carry their own placement; each rank's supervisor is told the attempt on its command
// line. And how it reads the ranks' records: each attempt's own files, the straggler grace and the
// cause by when it first read a failure on its own clock, the exit status of the rank that failed
// first.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "launcher/job_launch.h"
#include "tests/temp_dir_test.h"

namespace {

using atl::launcher::choose_srun_mpi;
using atl::launcher::LaunchMode;
using atl::launcher::LaunchRequest;
using atl::launcher::srun_mpi_plugins;

std::string line(const LaunchRequest& request) {
  return atl::launcher::command_line(atl::launcher::launcher_prefix(request));
}

using atl::launcher::RankExit;

// A record of rank `rank` (pid 100 + rank, on node0 or node1) of no attempt.
RankExit exit_of(int rank, bool signaled, int code, double time_s) {
  RankExit e;
  e.rank = rank;
  e.pid = 100 + rank;
  e.host = rank < 2 ? "node0" : "node1";
  e.signaled = signaled;
  e.code = code;
  e.time_s = time_s;
  return e;
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

// The attempt reaches every rank on its supervisor's command line, never through the environment:
// srun under `sbatch --export=NONE` passes no variable, and mpirun only those named with -x.
TEST(JobLaunch, EachRanksSupervisorIsToldTheAttemptOnItsCommandLine) {
  atl::launcher::JobCommand command;
  command.launcher = {"srun", "--ntasks=2"};
  command.supervisor = "/bin/atoll-supervise";
  command.run_dir = "/runs/a";
  command.rank = {"/bin/atoll", "train", "c.yaml"};
  EXPECT_EQ(atl::launcher::command_line(command.words("100-7.1")),
            "srun --ntasks=2 /bin/atoll-supervise --attempt 100-7.1 /runs/a -- /bin/atoll train c.yaml");
  EXPECT_TRUE(atl::launcher::valid_attempt_name("1795818832-25929.1"));
  EXPECT_FALSE(atl::launcher::valid_attempt_name(""));
  EXPECT_FALSE(atl::launcher::valid_attempt_name("../x"));
  EXPECT_FALSE(atl::launcher::valid_attempt_name("a b"));
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

// A job is ended only once its first failed rank has been on record for longer than the grace, on
// the launcher's clock from when it first read the record: a clean exit, or a failure inside the
// grace, leaves the launcher waiting for mpirun, whatever time another host's clock wrote.
TEST(JobLaunch, AJobIsOverdueOnlyOnceItsFirstFailureOutlivedTheGraceOnTheLaunchersClock) {
  using atl::launcher::FailureWatch;
  RankExit clean = exit_of(0, false, 0, 1000.0), hung = exit_of(2, false, 4, 1010.0),
           killed = exit_of(3, true, 9, 1012.0);
  FailureWatch none(20.0);
  EXPECT_FALSE(none.outlived(5000.0));
  none.observe({clean}, 5000.0);
  EXPECT_FALSE(none.outlived(9000.0));
  EXPECT_FALSE(none.cause());
  // Records written 100 s before the launcher's clock reads them (another host's clock behind, or
  // a write that landed late): the grace starts when they are first seen, at 500.
  FailureWatch watch(20.0);
  watch.observe({clean, hung}, 500.0);
  EXPECT_FALSE(watch.outlived(500.0));
  watch.observe({clean, hung, killed}, 510.0);
  EXPECT_FALSE(watch.outlived(520.0));    // 20 s after the first failure was seen
  EXPECT_TRUE(watch.outlived(520.5));     // counted from rank 2's, not 3's
  watch.observe({clean, killed}, 521.0);  // rank 2's record gone: the grace runs from rank 3's
  EXPECT_FALSE(watch.outlived(521.0));
  EXPECT_EQ(watch.cause()->rank, 3);
  FailureWatch later(20.0);
  later.observe({clean}, 500.0);
  later.observe({killed}, 510.0);
  EXPECT_FALSE(later.outlived(529.0));
  EXPECT_TRUE(later.outlived(530.5));
}

// The cause is the failure the launcher read first, whatever the times its ranks' hosts wrote: a
// host whose clock is 100 s behind does not make its rank, failing later, the cause. Failures first
// read together are ordered by their records' times.
TEST(JobLaunch, TheCauseIsTheFailureReadFirstNotTheOneWithTheEarliestClock) {
  using atl::launcher::FailureWatch;
  const RankExit hung = exit_of(0, false, 4, 2000.0), behind = exit_of(2, true, 15, 1900.0),
                 also_first = exit_of(1, false, 1, 1999.0);
  FailureWatch watch(20.0);
  watch.observe({hung}, 10.0);
  watch.observe({hung, behind}, 11.0);
  EXPECT_EQ(watch.cause()->rank, 0);
  watch.observe({behind, hung}, 12.0);  // read again: still first read at 10
  EXPECT_EQ(watch.cause()->rank, 0);
  FailureWatch together(20.0);
  together.observe({hung, also_first, exit_of(3, false, 0, 1000.0)}, 10.0);
  together.observe({hung, also_first, behind}, 11.0);
  EXPECT_EQ(together.cause()->rank, 1);
}

// A record names the attempt it belongs to and reads back as written; one from before attempts were
// named reads with none; anything else after the time is not a record.
TEST(JobLaunch, AnExitRecordCarriesItsAttempt) {
  RankExit e = exit_of(3, true, 9, 1732745394.25);
  e.attempt = "1732745390-4242.1";
  const std::string line = atl::launcher::to_line(e);
  EXPECT_EQ(line, "rank 3 pid 103 host node1 signal 9 time 1732745394.25 attempt 1732745390-4242.1\n");
  const std::optional<RankExit> back = atl::launcher::rank_exit_from_line(line);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->attempt, e.attempt);
  EXPECT_EQ(back->status(), 137);
  const std::optional<RankExit> old = atl::launcher::rank_exit_from_line("rank 1 pid 7 host h code 4 time 5");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->attempt, "");
  EXPECT_EQ(old->status(), 4);
  EXPECT_FALSE(atl::launcher::rank_exit_from_line("rank 1 pid 7 host h code 4 time 5 attempt"));
  EXPECT_FALSE(atl::launcher::rank_exit_from_line("rank 1 pid 7 host h code 4 time 5 attempt a b"));
  EXPECT_FALSE(atl::launcher::rank_exit_from_line("rank 1 pid 7 host h code 4 time 5 tries a"));
}

class JobLaunchRecords : public atl::test::TempDirTest {};

// The launcher reads only the records of the attempt running: one of another attempt -- a rank of
// the previous attempt that ended late, a partitioned node's write landing after the relaunch, a
// supervisor from before attempts were named -- is not this attempt's failure. Each attempt's
// records are files of their own, so an old attempt's late write cannot replace the current one's.
TEST_F(JobLaunchRecords, TheReaderKeepsTheRecordsOfOneAttempt) {
  using atl::launcher::exit_record_path;
  std::filesystem::create_directories(path("logs"));
  RankExit current = exit_of(0, false, 2, 2000.0), stale = exit_of(0, false, 1, 1000.0),
           other = exit_of(1, false, 1, 1000.0);
  current.attempt = "100-7.1";
  stale.attempt = other.attempt = "100-7.0";
  const std::string dir = dir_.string();
  EXPECT_EQ(exit_record_path(dir, 0, "100-7.1"), dir + "/logs/rank-0.attempt-100-7.1.exit");
  EXPECT_EQ(exit_record_path(dir, 0, ""), dir + "/logs/rank-0.exit");
  std::ofstream(exit_record_path(dir, 0, "100-7.1")) << atl::launcher::to_line(current);
  // Rank 0 of the attempt before, written after the current one's: it lands in a file of its own.
  std::ofstream(exit_record_path(dir, 0, "100-7.0")) << atl::launcher::to_line(stale);
  std::ofstream(exit_record_path(dir, 1, "100-7.0")) << atl::launcher::to_line(other);
  write_file("logs/rank-2.exit", "rank 2 pid 9 host node0 code 1 time 1500\n");
  write_file("logs/rank-3.exit", "not a record\n");
  // A record of this attempt in a file named for another rank, or for no attempt, is not read as one.
  write_file("logs/rank-4.attempt-100-7.1.exit",
             "rank 5 pid 9 host node0 code 1 time 1500 attempt 100-7.1\n");
  write_file("logs/rank-6.exit", "rank 6 pid 9 host node0 code 1 time 1500 attempt 100-7.1\n");
  EXPECT_EQ(atl::launcher::read_rank_exits(dir).size(), 6u);
  const std::vector<RankExit> exits = atl::launcher::read_rank_exits(dir, "100-7.1");
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].rank, 0);
  EXPECT_EQ(exits[0].code, 2);
  EXPECT_EQ(atl::launcher::first_failure(exits)->code, 2);
  EXPECT_EQ(atl::launcher::read_rank_exits(dir, "100-7.0").size(), 2u);
  EXPECT_EQ(atl::launcher::first_failure(atl::launcher::read_rank_exits(dir, "100-7.0"))->code, 1);

  atl::launcher::RankProcesses processes;
  processes.rank = 1;
  processes.attempt = "100-7.1";
  processes.host = "node0";
  processes.supervisor_pid = 4240;
  processes.supervisor_pgid = 4240;
  processes.supervisor_start = 123456;
  processes.child_pid = 4242;
  processes.child_start = 123457;
  const std::string line = atl::launcher::to_line(processes);
  EXPECT_EQ(line, "rank 1 attempt 100-7.1 host node0 supervisor 4240 4240 123456 child 4242 123457 step -\n");
  EXPECT_EQ(atl::launcher::processes_record_path(dir, 1, "100-7.1"),
            dir + "/logs/rank-1.attempt-100-7.1.pids");
  std::ofstream(atl::launcher::processes_record_path(dir, 1, "100-7.1")) << line;
  write_file("logs/rank-1.pids", line);  // named for no attempt: not read as 100-7.1's
  processes.rank = 2;
  processes.attempt = "100-7.0";
  processes.slurm_step = "42.0";
  std::ofstream(atl::launcher::processes_record_path(dir, 2, "100-7.0")) << atl::launcher::to_line(processes);
  const std::vector<atl::launcher::RankProcesses> read = atl::launcher::read_rank_processes(dir, "100-7.1");
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].child_pid, 4242);
  EXPECT_EQ(read[0].child_start, 123457u);
  EXPECT_EQ(read[0].slurm_step, "");
  EXPECT_EQ(atl::launcher::read_rank_processes(dir, "100-7.0")[0].slurm_step, "42.0");

  atl::launcher::clear_rank_records(dir);
  EXPECT_TRUE(atl::launcher::read_rank_exits(dir).empty());
  EXPECT_TRUE(atl::launcher::read_rank_processes(dir, "100-7.0").empty());
  EXPECT_TRUE(std::filesystem::exists(path("logs")));
}

// After a failed job `atoll launch` exits with the status of the rank that failed first -- also when
// it ended mpirun itself, which then reports 137 -- and with mpirun's status only when no record
// names a failed rank.
TEST(JobLaunch, AFailedJobExitsWithItsFirstFailedRanksStatus) {
  using atl::launcher::job_exit_status;
  EXPECT_EQ(job_exit_status(137, exit_of(2, false, 4, 1.0)), 4);
  EXPECT_EQ(job_exit_status(137, exit_of(2, false, 2, 1.0)), 2);
  EXPECT_EQ(job_exit_status(1, exit_of(2, true, 9, 1.0)), 137);
  EXPECT_EQ(job_exit_status(137, std::nullopt), 137);
}
