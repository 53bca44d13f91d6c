// Token data: llm.c shards (both widths) and their validation, the global sample order, the
// per-rank batch slices, and byte-level data preparation.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "runtime/data_prepare.h"
#include "runtime/sample_order.h"
#include "runtime/token_shard.h"

namespace fs = std::filesystem;
using atl::runtime::SampleOrder;
using atl::runtime::TokenShard;

namespace {

class TokenData : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("atoll-data-test-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes raw bytes: a header of 256 int32 with the given fields, then `body_bytes` bytes.
  std::string raw_shard(const std::string& name, int32_t magic, int32_t version, int32_t count,
                        size_t body_bytes) {
    std::vector<int32_t> header(256, 0);
    header[0] = magic;
    header[1] = version;
    header[2] = count;
    std::ofstream out(path(name), std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), 1024);
    out << std::string(body_bytes, '\0');
    return path(name);
  }

  // The message TokenShard gives for `file`.
  static std::string error_of(const std::string& file) {
    try {
      TokenShard shard(file);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "no error";
  }

  fs::path dir_;
};

void expect_contains(const std::string& text, const std::vector<std::string>& fragments) {
  for (const std::string& f : fragments) EXPECT_NE(text.find(f), std::string::npos) << text << " lacks " << f;
}

}  // namespace

TEST_F(TokenData, ShardRoundTripsInBothWidths) {
  const std::vector<uint32_t> small = {0, 1, 255, 65535, 7};
  const std::vector<uint32_t> large = {0, 70000, 1u << 31, 3};
  atl::runtime::write_token_shard(path("small.bin"), small);
  atl::runtime::write_token_shard(path("large.bin"), large);
  const TokenShard a(path("small.bin")), b(path("large.bin"));
  EXPECT_EQ(a.bytes_per_token(), 2);
  EXPECT_EQ(b.bytes_per_token(), 4);
  ASSERT_EQ(a.size(), 5);
  std::vector<int64_t> out(5);
  a.read(0, 5, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{0, 1, 255, 65535, 7}));
  EXPECT_EQ(b.token(2), 1u << 31);
  EXPECT_EQ(a.max_token(), 65535u);
  EXPECT_THROW(a.read(3, 3, out.data()), std::out_of_range);
  EXPECT_FALSE(fs::exists(path("small.bin.tmp")));  // written through a temporary, renamed
}

TEST_F(TokenData, BadShardsGetOneLineNamingFileProblemAndFix) {
  expect_contains(error_of(path("missing.bin")), {"missing.bin does not exist", "atoll data prepare"});
  { std::ofstream(path("short.bin")) << "tiny"; }
  expect_contains(error_of(path("short.bin")), {"short.bin", "less than the 1024-byte llm.c header"});
  expect_contains(error_of(raw_shard("magic.bin", 12345, 1, 4, 8)),
                  {"magic.bin has magic 12345", "expected 20240520 (uint16) or 20240801 (uint32)"});
  expect_contains(error_of(raw_shard("version.bin", 20240520, 3, 4, 8)),
                  {"version.bin", "unknown version 3"});
  expect_contains(error_of(raw_shard("empty.bin", 20240520, 1, 0, 0)), {"empty.bin holds no tokens"});
  expect_contains(error_of(raw_shard("cut.bin", 20240520, 1, 1000, 1500)),
                  {"cut.bin is truncated: header says 1000 tokens (2000 bytes)", "1500 bytes", "re-run"});
  expect_contains(error_of(raw_shard("cut32.bin", 20240801, 7, 10, 39)), {"cut32.bin is truncated"});
  for (const std::string& message : {error_of(path("missing.bin")), error_of(path("cut.bin"))})
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line";
}

TEST(SampleOrder, EachEpochIsAPermutationDependingOnlyOnSeedAndEpoch) {
  SampleOrder a(97, 5), b(97, 5), other_seed(97, 6);
  std::vector<int64_t> epoch0, epoch1, seed6;
  for (int64_t p = 0; p < 97; ++p) epoch0.push_back(a.sample_at(p));
  for (int64_t p = 97; p < 194; ++p) epoch1.push_back(a.sample_at(p));
  for (int64_t p = 0; p < 97; ++p) seed6.push_back(other_seed.sample_at(p));
  std::vector<int64_t> sorted = epoch0;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 97; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_NE(epoch0, epoch1);
  EXPECT_NE(epoch0, seed6);
  // Random access in any order gives the same stream (the cursor is all a checkpoint needs).
  for (int64_t p = 193; p >= 0; p -= 7) EXPECT_EQ(b.sample_at(p), p < 97 ? epoch0[p] : epoch1[p - 97]);
}

TEST(BatchSlice, RanksAndMicrobatchesTileEachGlobalBatch) {
  for (int dp : {1, 2, 4}) {
    for (int micro : {1, 2}) {
      for (int64_t step : {0, 3}) {
        std::set<int64_t> seen;
        for (int r = 0; r < dp; ++r) {
          for (int m = 0; m < micro; ++m) {
            const auto slice = atl::runtime::batch_slice(step, 16, r, dp, m, micro);
            EXPECT_EQ(slice.count, 16 / dp / micro);
            for (int64_t i = 0; i < slice.count; ++i) EXPECT_TRUE(seen.insert(slice.first + i).second);
          }
        }
        EXPECT_EQ(seen.size(), 16u);
        EXPECT_EQ(*seen.begin(), step * 16);
        EXPECT_EQ(*seen.rbegin(), step * 16 + 15);
      }
    }
  }
}

TEST_F(TokenData, PrepareSplitsBytesIntoTrainAndVal) {
  {
    std::ofstream(path("a.txt")) << "hello world";
    std::ofstream(path("b.txt")) << "\xC3\xA9t\xC3\xA9!";  // UTF-8 bytes stay bytes
  }
  atl::runtime::PrepareOptions options{{path("a.txt"), path("b.txt")}, path("out"), 0.25};
  const auto result = atl::runtime::prepare_byte_shards(options);
  // "hello world" + "\n" + 6 bytes = 18 bytes; a quarter (4) to val.
  EXPECT_EQ(result.train_tokens, 14);
  EXPECT_EQ(result.val_tokens, 4);
  const TokenShard train(result.train_path), val(result.val_path);
  EXPECT_EQ(train.token(0), static_cast<uint32_t>('h'));
  EXPECT_EQ(train.token(11), static_cast<uint32_t>('\n'));
  EXPECT_EQ(val.token(3), static_cast<uint32_t>('!'));
  EXPECT_EQ(val.token(0), static_cast<uint32_t>('t'));
  EXPECT_EQ(val.token(1), 0xC3u);

  options.val_fraction = 1.5;
  EXPECT_THROW(atl::runtime::prepare_byte_shards(options), std::invalid_argument);
  options = {{path("nope.txt")}, path("out"), 0.1};
  try {
    atl::runtime::prepare_byte_shards(options);
    FAIL();
  } catch (const std::runtime_error& e) {
    expect_contains(e.what(), {"cannot read", "nope.txt"});
  }
}
