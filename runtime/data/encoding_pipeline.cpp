#include "runtime/data/encoding_pipeline.h"

#include <algorithm>

namespace atl::runtime {

EncodingPipeline::EncodingPipeline(const Tokenizer& tokenizer, unsigned threads, size_t bytes_in_flight)
    : tokenizer_(tokenizer), bytes_in_flight_(bytes_in_flight) {
  for (unsigned t = 0; t < std::max(1u, threads); ++t) workers_.emplace_back([this] { work(); });
}

EncodingPipeline::~EncodingPipeline() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  job_waiting_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void EncodingPipeline::work() {
  for (;;) {
    Job* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      job_waiting_.wait(lock, [this] { return stop_ || !untaken_.empty(); });
      if (stop_) return;
      job = untaken_.front();
      untaken_.pop_front();
    }
    // The job is this worker's alone until `done` is set under the lock.
    std::vector<std::vector<uint32_t>> tokens(job->pieces.size());
    std::exception_ptr failure;
    try {
      for (size_t i = 0; i < job->pieces.size(); ++i) {
        const Piece& piece = job->pieces[i];
        if (piece.bos >= 0) tokens[i].push_back(static_cast<uint32_t>(piece.bos));
        const std::vector<uint32_t> ids = tokenizer_.encode(piece.text);
        tokens[i].insert(tokens[i].end(), ids.begin(), ids.end());
        if (piece.eos >= 0) tokens[i].push_back(static_cast<uint32_t>(piece.eos));
      }
    } catch (...) {
      failure = std::current_exception();
    }
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      job->tokens = std::move(tokens);
      job->failure = failure;
      job->done = true;
    }
    job_done_.notify_one();
  }
}

void EncodingPipeline::submit(std::vector<Piece> pieces, SplitShards& shards) {
  auto job = std::make_unique<Job>();
  for (const Piece& piece : pieces) job->bytes += piece.text.size();
  job->pieces = std::move(pieces);
  job->shards = &shards;
  // Room first, so that text in flight stays within the bound (one job over it at most).
  while (!in_order_.empty() && bytes_ + job->bytes > bytes_in_flight_) retire_oldest();
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    bytes_ += job->bytes;
    untaken_.push_back(job.get());
    in_order_.push_back(std::move(job));
  }
  job_waiting_.notify_one();
}

void EncodingPipeline::retire_oldest() {
  std::unique_ptr<Job> job;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    job_done_.wait(lock, [this] { return in_order_.front()->done; });
    job = std::move(in_order_.front());
    in_order_.pop_front();
    bytes_ -= job->bytes;
  }
  if (job->failure) std::rethrow_exception(job->failure);
  for (size_t i = 0; i < job->pieces.size(); ++i)
    job->shards->add(job->tokens[i], job->pieces[i].sources, job->pieces[i].documents);
}

void EncodingPipeline::finish() {
  while (!in_order_.empty()) retire_oldest();
}

}  // namespace atl::runtime
