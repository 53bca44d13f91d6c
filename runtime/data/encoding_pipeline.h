// Encodes the pieces of text `atoll data prepare` reads on `threads` worker threads while the reading
// thread goes on reading, and hands each piece's tokens to its shards in the order the pieces were
// submitted -- so the shards are the same whatever the thread count. At most about
// `bytes_in_flight` of text (and its tokens) wait or are being encoded: a submit past that first
// writes out the oldest pieces, waiting for them if they are not encoded yet.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/data/split_shards.h"
#include "runtime/tokenizer/tokenizer.h"

namespace atl::runtime {

// Text to encode as one unit, and what its tokens count in the shards.
struct Piece {
  std::string text;
  std::vector<int> sources;  // the inputs whose text is in it
  int64_t documents = 0;     // documents that start in it
  int bos = -1;              // a token written before the text's own (Llama 3's BOS), or -1
  int eos = -1;              // a token written after them (an EOS where there is no BOS), or -1
};

class EncodingPipeline {
 public:
  EncodingPipeline(const Tokenizer& tokenizer, unsigned threads, size_t bytes_in_flight);
  // Stops the workers (after the piece each is encoding) without writing what is left: the run
  // failed, or finish() wrote everything.
  ~EncodingPipeline();
  EncodingPipeline(const EncodingPipeline&) = delete;
  EncodingPipeline& operator=(const EncodingPipeline&) = delete;

  // Queues `pieces` (encoded together by one worker) for `shards`. Rethrows a worker's failure.
  void submit(std::vector<Piece> pieces, SplitShards& shards);
  // Waits for every piece and writes it out.
  void finish();

 private:
  struct Job {
    std::vector<Piece> pieces;
    SplitShards* shards = nullptr;
    std::vector<std::vector<uint32_t>> tokens;  // one per piece, once encoded
    size_t bytes = 0;
    bool done = false;
    std::exception_ptr failure;
  };
  void work();
  // Writes the oldest job out, waiting for it first.
  void retire_oldest();

  const Tokenizer& tokenizer_;
  size_t bytes_in_flight_;
  std::mutex mutex_;
  std::condition_variable job_waiting_;        // workers: a job to take, or stop
  std::condition_variable job_done_;           // the submitting thread: a job encoded
  std::deque<std::unique_ptr<Job>> in_order_;  // every job not written yet, oldest first
  std::deque<Job*> untaken_;                   // those no worker has taken yet
  size_t bytes_ = 0;                           // text in in_order_
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace atl::runtime
