// How an Atoll process ends: the exit codes of `atoll train`, which `atoll launch --max-restarts` reads
// to decide whether a relaunch can help (bad input and a non-finite stop fail again the same way, a
// crash or hang may not), and the names of the signals that end or preempt a rank.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

namespace atl::runtime {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,    // a runtime error (I/O, MPI, a peer that died): worth a restart
  kExitBadInput = 2,   // config, layout, data or checkpoint the user must fix
  kExitNonFinite = 3,  // train.on_nonfinite = stop: a checkpoint of the state before it was committed
  kExitHang = 4,       // the watchdog aborted the job: a collective exceeded comm.timeout_s
};

// Whether a job whose first failing rank exited with `code` (or died of a signal) may succeed when
// relaunched from its last checkpoint.
inline bool restart_may_help(bool signaled, int code) {
  return signaled || code == kExitFailure || code == kExitHang;
}

// "SIGKILL" for 9; "signal N" for a number without a name.
inline std::string signal_name(int signal) {
  const char* name = sigabbrev_np(signal);
  return name ? "SIG" + std::string(name) : "signal " + std::to_string(signal);
}

// Ends the process with `code` once main's work is done (every thread joined, MPI finalized, files
// closed), flushing the standard streams but skipping the static destructors: LibTorch's and the
// CUDA libraries' teardown takes 0.3-0.7 s of CPU in every process (measured on a 2-core VM), which
// every rank of every job pays at its end. Sanitizer builds exit normally, for their leak check.
[[noreturn]] inline void end_process(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  std::exit(code);
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  std::exit(code);
#endif
#endif
  std::_Exit(code);
}

}  // namespace atl::runtime
