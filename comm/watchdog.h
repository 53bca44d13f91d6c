// The watchdog (DESIGN §3): a thread per rank that aborts the job when a recorded operation waits
// longer than the timeout, so a dead or stalled rank never leaves the others hanging silently.
//
// The first rank to see an operation exceed the timeout tells every other rank (on a communicator of
// its own, so it never mixes with training messages); each rank writes its flight records to
// <flight dir>/rank-N.json and sends rank 0 a summary; rank 0 prints which operation is stuck and
// which rank is behind, then aborts the job (its NCCL communicators first, with ncclCommAbort). A rank that
// hears nothing more exits by itself, so every rank is gone within twice the timeout even if rank 0 cannot
// act.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace atl::comm {

class DeviceBackend;
class FlightRecorder;
class MpiCommunicator;

struct WatchdogOptions {
  double timeout_s = 600.0;
  std::string flight_dir;  // where rank-N.json goes
  int exit_code = 4;       // the process exit code of an abort
};

class Watchdog {
 public:
  // Collective over `world` (duplicates it). `recorder` must outlive the watchdog.
  Watchdog(const MpiCommunicator& world, const FlightRecorder& recorder, WatchdogOptions options);
  ~Watchdog();  // stops the thread; collective-free
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Also polls `backends` (NCCL planes) every tick: their completed operations close their flight
  // records, an asynchronous error aborts the job like a hang, and a hang aborts them too (after
  // the other ranks are told and the dump is written). They must outlive the watchdog.
  void watch(const std::vector<DeviceBackend*>& backends);

 private:
  void watch();
  // The first asynchronous error any backend reports ("" if none).
  std::string poll_backends();
  // Tells the other ranks (unless they told us: `tell_others` false), dumps, aborts the device
  // backends without waiting on them, then diagnoses (rank 0) and ends the process.
  [[noreturn]] void abort_job(const std::string& reason, std::chrono::steady_clock::time_point detected,
                              bool tell_others);

  const FlightRecorder& recorder_;
  const WatchdogOptions options_;
  std::unique_ptr<MpiCommunicator> channel_;
  std::mutex backends_mutex_;
  std::vector<DeviceBackend*> backends_;
  // The destructor wakes the watching thread at once (a trainer's exit must not wait out a tick).
  std::mutex stop_mutex_;
  std::condition_variable stop_signal_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace atl::comm
