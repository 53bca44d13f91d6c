// Runs a command as a child process while this process stays responsive: SIGTERM, SIGUSR1 and SIGINT
// sent to us are handed to the child (mapped by `forward`), and the child's output can be captured. Used
// by `atoll launch` (around mpirun/srun) and `atoll-supervise` (around one rank).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace atl::launcher {

struct ChildExit {
  bool signaled = false;
  int code = 0;             // exit code, or the signal that killed it
  long pid = 0;             // the child's process id
  int received_signal = 0;  // the last SIGTERM/SIGUSR1/SIGINT this process received meanwhile (0: none)
  bool abandoned = false;   // ended by us because ChildOptions::abandon said so
  // The shell convention: 128 + signal for a killed child.
  int status() const { return signaled ? 128 + code : code; }
};

struct ChildOptions {
  // The signal to send the child for a SIGTERM, SIGUSR1 or SIGINT we receive.
  std::function<int(int)> forward = [](int signal) { return signal; };
  // When set, the child's stdout (stream 1) and stderr (stream 2) arrive here instead of our own.
  std::function<void(int stream, const char* data, size_t size)> output;
  // Kill the child if this process dies (a rank must not outlive its supervisor).
  bool die_with_parent = false;
  // Put the child in a process group of its own, so signals sent to our group (mpirun signals the
  // group of each rank it started) reach it once, forwarded by us, not twice.
  bool own_process_group = false;
  // Asked about ten times a second while the child runs (without captured output): true ends the
  // child (its whole process group with own_process_group): SIGTERM, then SIGKILL if it is still
  // there `end_grace_s` later; ChildExit::abandoned says so.
  std::function<bool()> abandon;
  double end_grace_s = 0.0;
  // Told the child's process id as soon as it exists.
  std::function<void(long pid)> started;
};

// Throws std::runtime_error naming the command when it cannot be started.
ChildExit run_child(const std::vector<std::string>& command, const ChildOptions& options);

// When process `pid` started (/proc/PID/stat's starttime, clock ticks since boot); 0 when there is no
// such process.
unsigned long long process_start_time(long pid);

// Whether process `pid` is alive, and is the one that started at `start` (0: whichever holds the
// pid): neither gone, nor a zombie, nor a later process given the same pid.
bool process_alive(long pid, unsigned long long start);

}  // namespace atl::launcher
