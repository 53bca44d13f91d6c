// Saves that do not stop training (DESIGN §7; DataStates-LLM's lazy asynchronous checkpointing).
//
//   async       request() copies the state into a host staging pool (allocated once, reused; pinned
//               when the state is on a GPU, where the copies run on a side stream) and returns; a
//               background thread writes the shards and commits while training goes on.
//   async_lazy  request() returns at once; the background thread takes the copy while the next
//               forward and backward run, which do not touch the saved state. The trainer calls
//               fence() before its next in-place update (the optimizer step) and blocks only if the
//               copy is unfinished.
//
// One save is in flight at a time: a request first waits for the previous commit. The commit's
// collectives run on the store's own communicator from the background thread (MPI is initialised
// with MPI_THREAD_MULTIPLE), so they never interleave with training collectives.
#pragma once

#include <chrono>
#include <exception>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_store.h"

namespace atl::checkpoint {

class StagingCopy;

class AsyncSaver {
 public:
  // `copy_delay`: a pause before copying each piece (tests slow the lazy copy down with it).
  AsyncSaver(const CheckpointStore& store, bool lazy,
             std::chrono::milliseconds copy_delay = std::chrono::milliseconds(0));
  ~AsyncSaver();  // waits for the save in flight (errors are dropped: call wait() to see them)
  AsyncSaver(const AsyncSaver&) = delete;
  AsyncSaver& operator=(const AsyncSaver&) = delete;

  // Starts saving `pieces` (views of the live state, which must not change until the snapshot is
  // taken: at once for async, by fence() for async_lazy). Waits for the previous save to commit
  // and rethrows its error.
  void request(const SaveInfo& info, const std::vector<Piece>& pieces);
  // Blocks until the requested state has been copied (a no-op without a lazy save in flight).
  void fence();
  // Blocks until the save in flight is committed; returns its directory ("" if none) and rethrows
  // its error. Collective through the background thread.
  std::string wait();
  // Seconds the background thread spent on the saves committed so far (copy, write, commit): what
  // the same saves would have stopped training for in sync mode. Read after wait().
  double background_seconds() const { return background_seconds_; }

 private:
  void snapshot(int64_t step, const std::vector<Piece>& pieces, StagingCopy& copier);

  const CheckpointStore& store_;
  bool lazy_;
  std::chrono::milliseconds copy_delay_;
  std::vector<Piece> staged_;  // the pieces with `data` in the staging pool
  std::thread worker_;
  std::future<void> copied_;
  std::future<std::string> committed_;
  double background_seconds_ = 0.0;  // written by the worker before it completes `committed_`
};

}  // namespace atl::checkpoint
