// How an Atoll process ends: the exit codes of `atoll train`, which `atoll launch --max-restarts` reads
// to decide whether a relaunch can help (bad input and a non-finite stop fail again the same way, a
// crash or hang may not), and the names of the signals that end or preempt a rank.
#pragma once

#include <cstring>
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

}  // namespace atl::runtime
