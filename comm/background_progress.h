// Keeps MPI's progress engine turning while the calling thread computes.
//
// Why: Open MPI moves a large non-blocking message (rendezvous protocol) forward only inside MPI
// calls of the ranks at both ends. A pipeline stage that posts a send and then runs a 100 ms
// forward leaves its peer waiting for that whole forward (measured at PP=2: the bubble of stage
// 0 doubled). A helper thread that probes MPI_COMM_SELF every `interval` (1 ms: at 100 us the
// wake-ups cost 20% throughput on 2 cores) drives the shared
// progress engine (the runtime is MPI_THREAD_MULTIPLE) without touching any request, at a cost of
// a few microseconds per probe.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

namespace atl::comm {

class BackgroundProgress {
 public:
  explicit BackgroundProgress(std::chrono::microseconds interval = std::chrono::microseconds(1000));
  ~BackgroundProgress();  // stops and joins the thread
  BackgroundProgress(const BackgroundProgress&) = delete;
  BackgroundProgress& operator=(const BackgroundProgress&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace atl::comm
