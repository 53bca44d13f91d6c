// Shared set-up for multi-rank training tests: a small synthetic corpus written as llm.c shards
// and a tiny Llama config that trains in seconds on one core.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/data/token_shard.h"

namespace atl::test {

// Token stream with learnable structure: repeated "words" drawn from a fixed vocabulary of
// byte strings, so the loss falls quickly from ln(256).
inline std::vector<uint32_t> synthetic_tokens(int64_t count, uint64_t seed) {
  std::vector<uint32_t> tokens;
  tokens.reserve(count);
  uint64_t state = seed;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  while (static_cast<int64_t>(tokens.size()) < count) {
    const uint32_t word = next() % 40;
    const uint32_t length = 2 + word % 5;
    for (uint32_t i = 0; i < length && static_cast<int64_t>(tokens.size()) < count; ++i)
      tokens.push_back(97 + (word * 7 + i * 3) % 26);
    tokens.push_back(32);
  }
  tokens.resize(count);
  return tokens;
}

// This process's scratch directory, removed by mpi_test_main when every rank has finished.
inline std::filesystem::path process_scratch_dir() {
  return std::filesystem::temp_directory_path() / ("atoll-test-" + std::to_string(getpid()));
}

// A directory of its own for this process and tag, holding train.bin and val.bin.
inline std::string write_synthetic_dataset(const std::string& tag) {
  const std::string dir = (process_scratch_dir() / tag).string();
  std::filesystem::create_directories(dir);
  runtime::write_token_shard(dir + "/train.bin", synthetic_tokens(60000, 1));
  runtime::write_token_shard(dir + "/val.bin", synthetic_tokens(8000, 2));
  return dir;
}

// The device the trainer-based tests train on: the CPU, or each rank's GPU when ATOLL_TEST_DEVICE=cuda
// (how tests/gpu registers the same binaries under the CTest label gpu).
inline runtime::DeviceKind test_device() {
  const char* device = std::getenv("ATOLL_TEST_DEVICE");
  return device && std::string(device) == "cuda" ? runtime::DeviceKind::kCuda : runtime::DeviceKind::kCpu;
}

// Whether this test's ranks share the node's GPUs (tests/gpu/with_gpus.sh sets ATOLL_TEST_SHARE_GPU=1
// where the node has fewer GPUs than ranks): run.share_gpu in the trainer-based tests, and a NCCL host
// id per rank for the tests that make NCCL communicators themselves (mpi_test_main.cpp).
inline bool test_shares_gpu() {
  const char* share = std::getenv("ATOLL_TEST_SHARE_GPU");
  return share && std::string(share) == "1";
}

inline runtime::Config tiny_config(const std::string& data_dir) {
  runtime::Config c;
  c.run.device = test_device();
  c.run.share_gpu = test_shares_gpu();
  c.run.dir = data_dir + "/run";
  c.run.seed = 7;
  c.run.threads = 1;
  c.run.mfu_peak_tflops = 1.0;  // no start-up matmul probe (half a second per trainer)
  // A hung collective stops the test within 2 minutes with the watchdog's dump naming it (a test's
  // slowest operation, on a shared GPU, waits seconds), not at CTest's timeout without a word.
  c.comm.timeout_s = 120;
  c.model.vocab = 256;
  c.model.dim = 64;
  c.model.layers = 2;
  c.model.heads = 4;
  c.model.kv_heads = 2;
  c.model.ffn = 160;
  c.model.seq = 32;
  c.parallel.dp = 1;
  c.parallel.bucket_mb = 0.05;  // several buckets, so overlap and ordering are exercised
  c.train.steps = 20;
  c.train.global_batch = 8;
  c.train.log_every = 10;
  c.train.eval_every = 0;
  c.train.eval_sequences = 8;
  c.optim.lr = 2e-3;
  c.optim.min_lr = 2e-4;
  c.optim.warmup = 3;
  c.data.train = {{data_dir + "/train.bin"}};
  c.data.val = {{data_dir + "/val.bin"}};
  return c;
}

}  // namespace atl::test
