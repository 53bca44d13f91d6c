// Token data: llm.c shards (both widths) and their validation messages, the global sample order,
// the per-rank batch slices, and byte-level data preparation.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "runtime/data/data_prepare.h"
#include "runtime/data/sample_order.h"
#include "runtime/data/token_shard.h"
#include "tests/temp_dir_test.h"

namespace fs = std::filesystem;
using atl::runtime::batch_slice;
using atl::runtime::prepare_shards;
using atl::runtime::PrepareOptions;
using atl::runtime::SampleOrder;
using atl::runtime::TokenShard;
using atl::runtime::write_token_shard;

namespace {

class DataFiles : public atl::test::TempDirTest {
 protected:
  // A header of 256 int32 with the given fields, then `body_bytes` zero bytes.
  std::string raw_shard(const std::string& name, int32_t magic, int32_t version, int32_t count,
                        size_t body_bytes) const {
    std::vector<int32_t> header(256, 0);
    header[0] = magic;
    header[1] = version;
    header[2] = count;
    return write_file(name, std::string(reinterpret_cast<const char*>(header.data()), 1024) +
                                std::string(body_bytes, '\0'));
  }
};

class TokenShardFiles : public DataFiles {};
class PrepareByteShards : public DataFiles {};

// The message of the exception `action` throws, or "no error".
std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

std::string shard_error(const std::string& file) {
  return error_of([&] { TokenShard shard(file); });
}

void expect_contains(const std::string& text, const std::vector<std::string>& fragments) {
  for (const std::string& f : fragments)
    EXPECT_NE(text.find(f), std::string::npos) << text << "\n lacks: " << f;
  EXPECT_EQ(text.find('\n'), std::string::npos) << "not one line: " << text;
}

std::vector<int64_t> read_all(const TokenShard& shard) {
  std::vector<int64_t> out(static_cast<size_t>(shard.size()));
  shard.read(0, shard.size(), out.data());
  return out;
}

std::vector<int64_t> epoch_of(SampleOrder& order, int64_t epoch) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < order.num_samples(); ++i)
    out.push_back(order.sample_at(epoch * order.num_samples() + i));
  return out;
}

TEST_F(TokenShardFiles, RoundTripUint16) {
  write_token_shard(path("small.bin"), {0, 1, 255, 65535, 7});
  const TokenShard shard(path("small.bin"));
  EXPECT_EQ(shard.bytes_per_token(), 2);
  EXPECT_EQ(shard.size(), 5);
  EXPECT_EQ(fs::file_size(path("small.bin")), 1024u + 5 * 2);
  EXPECT_EQ(read_all(shard), (std::vector<int64_t>{0, 1, 255, 65535, 7}));
  EXPECT_EQ(shard.token(3), 65535u);
  EXPECT_EQ(shard.max_token(), 65535u);
  EXPECT_EQ(shard.path(), path("small.bin"));
  // Written through a temporary that was renamed: nothing else is left in the directory.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(TokenShardFiles, RoundTripUint32) {
  write_token_shard(path("large.bin"), {0, 70000, 1u << 31, 3});
  write_token_shard(path("forced.bin"), {4, 5, 6}, /*force_uint32=*/true);
  const TokenShard large(path("large.bin")), forced(path("forced.bin"));
  EXPECT_EQ(large.bytes_per_token(), 4);
  EXPECT_EQ(read_all(large), (std::vector<int64_t>{0, 70000, int64_t{1} << 31, 3}));
  EXPECT_EQ(large.max_token(), 1u << 31);
  EXPECT_EQ(forced.bytes_per_token(), 4);
  EXPECT_EQ(fs::file_size(path("forced.bin")), 1024u + 3 * 4);
  EXPECT_EQ(read_all(forced), (std::vector<int64_t>{4, 5, 6}));
}

TEST_F(TokenShardFiles, ReadsInsideTheShardOnlyAndMoves) {
  write_token_shard(path("s.bin"), {10, 11, 12, 13});
  TokenShard shard(path("s.bin"));
  std::vector<int64_t> out(2);
  shard.read(2, 2, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{12, 13}));
  EXPECT_THROW(shard.read(3, 2, out.data()), std::out_of_range);
  EXPECT_THROW(shard.read(-1, 1, out.data()), std::out_of_range);
  EXPECT_THROW(shard.token(4), std::out_of_range);
  const TokenShard moved(std::move(shard));
  EXPECT_EQ(moved.token(1), 11u);
  EXPECT_THROW(write_token_shard(path("none.bin"), {}), std::invalid_argument);
}

TEST_F(TokenShardFiles, EachBadShardGetsOneLineNamingFileProblemAndFix) {
  expect_contains(shard_error(path("missing.bin")),
                  {"data: " + path("missing.bin") + " does not exist", "run `atoll data prepare`"});
  expect_contains(shard_error(dir_.string()), {dir_.string() + " is not a regular file"});
  expect_contains(shard_error(write_file("short.bin", "tiny")),
                  {"short.bin holds 4 bytes, less than the 1024-byte llm.c header", "re-run"});
  expect_contains(shard_error(raw_shard("magic.bin", 12345, 1, 4, 8)),
                  {"magic.bin has magic 12345, expected 20240520 (uint16) or 20240801 (uint32)",
                   "is it an llm.c token shard?"});
  expect_contains(shard_error(raw_shard("version16.bin", 20240520, 7, 4, 8)),
                  {"version16.bin has magic 20240520 with unknown version 7"});
  expect_contains(shard_error(raw_shard("version32.bin", 20240801, 1, 4, 16)),
                  {"version32.bin has magic 20240801 with unknown version 1"});
  expect_contains(shard_error(raw_shard("empty.bin", 20240520, 1, 0, 0)),
                  {"empty.bin holds no tokens (header count 0)", "re-run"});
  expect_contains(shard_error(raw_shard("negative.bin", 20240801, 7, -3, 0)),
                  {"negative.bin holds no tokens"});
  expect_contains(shard_error(raw_shard("cut.bin", 20240520, 1, 1000, 1500)),
                  {"cut.bin is truncated: header says 1000 tokens (2000 bytes) but the file holds 1500 bytes "
                   "after the header; re-run `atoll data prepare`"});
  expect_contains(shard_error(raw_shard("cut32.bin", 20240801, 7, 10, 39)),
                  {"cut32.bin is truncated: header says 10 tokens (40 bytes)"});
  // A body longer than the header says is fine (trailing bytes are ignored).
  EXPECT_EQ(TokenShard(raw_shard("long.bin", 20240520, 1, 2, 10)).size(), 2);
}

TEST(SampleOrder, EachEpochIsAPermutationThatDependsOnlyOnSeedAndEpoch) {
  constexpr int64_t n = 97;
  SampleOrder a(n, 5), same_seed(n, 5), other_seed(n, 6);
  std::vector<int64_t> identity(n);
  for (int64_t i = 0; i < n; ++i) identity[i] = i;
  std::vector<std::vector<int64_t>> epochs;
  for (int64_t e = 0; e < 3; ++e) {
    epochs.push_back(epoch_of(a, e));
    std::vector<int64_t> sorted = epochs.back();
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, identity) << "epoch " << e << " is not a permutation";
    EXPECT_NE(epochs.back(), identity) << "epoch " << e << " is not shuffled";
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
  EXPECT_NE(epochs[0], epoch_of(other_seed, 0));
  // Another instance walking the stream backwards (resuming from a checkpoint cursor) agrees.
  for (int64_t p = 3 * n - 1; p >= 0; --p) EXPECT_EQ(same_seed.sample_at(p), epochs[p / n][p % n]) << p;

  SampleOrder single(1, 0);
  EXPECT_EQ(single.sample_at(5), 0);
  EXPECT_THROW(SampleOrder(0, 1), std::invalid_argument);
  EXPECT_THROW(a.sample_at(-1), std::out_of_range);
}

TEST(BatchSlice, RanksAndMicrobatchesTileEachGlobalBatch) {
  constexpr int global_batch = 16;
  for (int dp : {1, 2, 4}) {
    for (int microbatches : {1, 2}) {
      for (int64_t step : {0, 3}) {
        std::vector<int64_t> seen;
        for (int rank = 0; rank < dp; ++rank) {
          for (int m = 0; m < microbatches; ++m) {
            const auto slice = batch_slice(step, global_batch, rank, dp, m, microbatches);
            EXPECT_EQ(slice.count, global_batch / dp / microbatches);
            for (int64_t i = 0; i < slice.count; ++i) seen.push_back(slice.first + i);
          }
        }
        std::vector<int64_t> expected(global_batch);
        for (int i = 0; i < global_batch; ++i) expected[i] = step * global_batch + i;
        // Rank-major, then microbatch order: already sorted, and each position exactly once.
        EXPECT_EQ(seen, expected) << "dp " << dp << " microbatches " << microbatches << " step " << step;
      }
    }
  }
  EXPECT_THROW(batch_slice(0, 10, 0, 4, 0, 1), std::invalid_argument);
  EXPECT_THROW(batch_slice(0, 8, 2, 2, 0, 1), std::out_of_range);
  EXPECT_THROW(batch_slice(0, 8, 0, 2, 2, 2), std::out_of_range);
}

PrepareOptions options_for(std::vector<std::string> inputs, std::string out, double val_fraction) {
  PrepareOptions options;
  options.inputs = std::move(inputs);
  options.out_dir = std::move(out);
  options.val_fraction = val_fraction;
  return options;
}

TEST_F(PrepareByteShards, SplitsTheConcatenatedBytesIntoTrainAndVal) {
  const std::string a = write_file("a.txt", "hello world");
  const std::string b = write_file("b.txt", "\xC3\xA9t\xC3\xA9!");  // UTF-8 bytes stay bytes
  const auto result = prepare_shards(options_for({a, b}, path("out/nested"), 0.25));
  // "hello world" + "\n" + 6 bytes = 18 bytes; floor(18 * 0.25) = 4 go to val.
  EXPECT_EQ(result.train_tokens, 14);
  EXPECT_EQ(result.val_tokens, 4);
  EXPECT_EQ(result.train_path, path("out/nested/train.bin"));
  EXPECT_EQ(result.val_path, path("out/nested/val.bin"));
  const TokenShard train(result.train_path), val(result.val_path);
  EXPECT_EQ(train.bytes_per_token(), 2);
  EXPECT_EQ(read_all(train),
            (std::vector<int64_t>{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '\n', 0xC3, 0xA9}));
  EXPECT_EQ(read_all(val), (std::vector<int64_t>{'t', 0xC3, 0xA9, '!'}));
}

TEST_F(PrepareByteShards, RejectsBadInputWithOneLine) {
  const std::string text = write_file("text.txt", "some text to split");
  auto prepare_error = [&](std::vector<std::string> inputs, double fraction) {
    return error_of([&] { prepare_shards(options_for(inputs, path("out"), fraction)); });
  };
  expect_contains(prepare_error({text, path("nope.txt")}, 0.1),
                  {"input " + path("nope.txt") + " does not exist"});
  expect_contains(prepare_error({write_file("empty.txt", ""), text}, 0.1), {"empty.txt is empty"});
  expect_contains(prepare_error({dir_.string()}, 0.1), {"is not a regular file"});
  expect_contains(prepare_error({}, 0.1), {"no input files"});
  for (double fraction : {0.0, 1.0, -0.5, 1.5, std::nan("")})
    expect_contains(prepare_error({text}, fraction), {"--val-fraction", "between 0 and 1"});
  expect_contains(prepare_error({write_file("tiny.txt", "abc")}, 0.5), {"3 bytes, too few"});
  EXPECT_FALSE(fs::exists(path("out"))) << "nothing is written when the input is bad";
}

}  // namespace
