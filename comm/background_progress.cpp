#include "comm/background_progress.h"

#include <mpi.h>

namespace atl::comm {

BackgroundProgress::BackgroundProgress(std::chrono::microseconds interval)
    : thread_([this, interval] {
        while (!stop_.load(std::memory_order_relaxed)) {
          int flag = 0;
          MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
          std::this_thread::sleep_for(interval);
        }
      }) {}

BackgroundProgress::~BackgroundProgress() {
  stop_ = true;
  thread_.join();
}

}  // namespace atl::comm
