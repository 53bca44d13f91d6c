// The watchdog (DESIGN §3): a thread per rank that aborts the job when a recorded operation waits
// longer than the timeout, so a dead or stalled rank never leaves the others hanging silently.
//
// The first rank to see an operation exceed the timeout tells every other rank (on a communicator of
// its own, so it never mixes with training messages); each rank writes its flight records to
// <flight dir>/rank-N.json and sends rank 0 a summary; rank 0 prints which operation is stuck and
// which rank is behind, then aborts the job. A rank that hears nothing more exits by itself, so
// every rank is gone within twice the timeout even if rank 0 cannot act.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace atl::comm {

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

 private:
  void watch();
  [[noreturn]] void abort_job(const std::string& reason, std::chrono::steady_clock::time_point detected);

  const FlightRecorder& recorder_;
  const WatchdogOptions options_;
  std::unique_ptr<MpiCommunicator> channel_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace atl::comm
