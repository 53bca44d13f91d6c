#include "checkpoint/async_saver.h"

#include <ATen/ATen.h>

#include "checkpoint/staging_copy.h"

namespace atl::checkpoint {

AsyncSaver::AsyncSaver(const CheckpointStore& store, bool lazy, std::chrono::milliseconds copy_delay)
    : store_(store), lazy_(lazy), copy_delay_(copy_delay) {}

AsyncSaver::~AsyncSaver() {
  try {
    wait();
  } catch (...) {  // a destructor cannot report; wait() is where errors surface
  }
}

void AsyncSaver::snapshot(int64_t step, const std::vector<Piece>& pieces, StagingCopy& copier) {
  // The staging pool is allocated on the first save and reused as long as the pieces keep their sizes.
  bool reuse = staged_.size() == pieces.size();
  for (size_t i = 0; reuse && i < pieces.size(); ++i)
    reuse = staged_[i].data.numel() == pieces[i].data.numel();
  if (!reuse) {
    staged_ = pieces;
    for (Piece& p : staged_) p.data = host_staging_like(p.data);
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (copy_delay_.count() > 0) std::this_thread::sleep_for(copy_delay_);
    if (i == pieces.size() / 2) store_.die_if_fault("copy", step);
    staged_[i].name = pieces[i].name;
    staged_[i].role = pieces[i].role;
    staged_[i].island = pieces[i].island;
    staged_[i].global_shape = pieces[i].global_shape;
    staged_[i].piece = pieces[i].piece;
    staged_[i].begin = pieces[i].begin;
    staged_[i].end = pieces[i].end;
    copier.copy(staged_[i].data, pieces[i].data);
  }
}

void AsyncSaver::request(const SaveInfo& info, const std::vector<Piece>& pieces) {
  wait();
  std::promise<void> copied;
  std::promise<std::string> committed;
  copied_ = copied.get_future();
  committed_ = committed.get_future();
  // Here, on the thread that updates the state: the copies come after its last update.
  StagingCopy copier(pieces.empty() ? c10::Device(c10::kCPU) : pieces.front().data.device());
  if (!lazy_) {
    at::NoGradGuard no_grad;
    snapshot(info.step, pieces, copier);  // done on the CPU; queued on a GPU's side stream
  }
  // The worker owns the promises; the live pieces are captured by value (views: cheap).
  worker_ = std::thread([this, info, pieces, lazy = lazy_, copier = std::move(copier),
                         copied = std::move(copied), committed = std::move(committed)]() mutable {
    const auto start = std::chrono::steady_clock::now();
    const auto add_elapsed = [&] {
      background_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    std::string snapshot_error;
    try {
      at::NoGradGuard no_grad;
      if (lazy) snapshot(info.step, pieces, copier);
      copier.wait();
    } catch (const std::exception& e) {
      snapshot_error = std::string("checkpoint: cannot take the snapshot: ") + e.what();
    }
    copied.set_value();  // the trainer may go on either way; the error surfaces with the commit
    try {
      // A failed snapshot still takes part in the save's agreement, so no rank waits for it forever.
      const std::string dir = store_.save(info, staged_, snapshot_error);
      add_elapsed();
      committed.set_value(dir);
    } catch (...) {
      add_elapsed();
      committed.set_exception(std::current_exception());
    }
  });
}

void AsyncSaver::fence() {
  if (copied_.valid()) copied_.wait();  // the copy's error, if any, surfaces through wait()
}

std::string AsyncSaver::wait() {
  if (!worker_.joinable()) return "";
  worker_.join();
  copied_ = {};
  return committed_.get();  // rethrows the save's error
}

}  // namespace atl::checkpoint
