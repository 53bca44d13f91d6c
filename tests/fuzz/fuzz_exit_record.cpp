// The exit records `atoll-supervise` leaves in <run dir>/logs/rank-N.attempt-A.exit, which `atoll launch`
// reads to name the rank that failed first. An unreadable record is skipped (never an error); one that reads
// must describe itself and survive its own line format unchanged.
#include <cstdio>
#include <cstdlib>

#include "launcher/job_launch.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const atl::fuzz::ScratchDir scratch;
  const std::string run_dir = scratch.hold_files(data, size);
  atl::fuzz::expect_clean(
      [&] {
        const auto exits = atl::launcher::read_rank_exits(run_dir);
        for (const atl::launcher::RankExit& e : exits) {
          atl::launcher::describe(e);
          const auto again = atl::launcher::rank_exit_from_line(atl::launcher::to_line(e));
          if (!again || again->rank != e.rank || again->pid != e.pid || again->host != e.host ||
              again->signaled != e.signaled || again->code != e.code || again->attempt != e.attempt) {
            std::fprintf(stderr, "fuzz: an exit record did not survive its own line format\n");
            std::abort();
          }
        }
        atl::launcher::first_failure(exits);
      },
      {});
  return 0;
}
