// Megatron's .bin/.idx read in place (runtime/data/megatron_shard.h): tokens and document starts
// from an index written here byte for byte as megatron-core writes it (tests/interop/megatron_check.py
// checks files megatron-core itself writes), positions past 2^32 on a sparse .bin, and one line for
// each way an index can be wrong.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runtime/data/batches.h"
#include "runtime/data/megatron_shard.h"
#include "runtime/data/shard.h"
#include "tests/error_of.h"
#include "tests/megatron_index.h"
#include "tests/temp_dir_test.h"

namespace atl::runtime {
namespace {

using test::error_of;

using Index = test::MegatronIndex;

class MegatronShards : public test::TempDirTest {
 protected:
  // PREFIX.idx from `index` and PREFIX.bin of `tokens` (at their width); returns PREFIX.bin.
  std::string write(const std::string& prefix, const Index& index,
                    const std::vector<uint32_t>& tokens) const {
    return test::write_megatron_shard(path(prefix), index, tokens);
  }
};

TEST_F(MegatronShards, ReadsTokensAndDocumentStartsInPlace) {
  // Three documents: [0, 5) of two sequences, an empty one, and [5, 9).
  const std::string bin = write("web", {8, {2, 3, 4}, {0, 2, 2, 3}}, {10, 11, 12, 13, 14, 15, 16, 17, 18});
  const std::unique_ptr<Shard> shard = open_shard(bin);
  ASSERT_NE(dynamic_cast<const MegatronShard*>(shard.get()), nullptr)
      << "the .idx beside it makes it Megatron's";
  EXPECT_EQ(shard->size(), 9);
  std::vector<int64_t> tokens(9);
  shard->read(0, 9, tokens.data());
  EXPECT_EQ(tokens, (std::vector<int64_t>{10, 11, 12, 13, 14, 15, 16, 17, 18}));
  EXPECT_EQ(shard->max_token(), 18u);
  EXPECT_EQ(*shard->document_starts(0, 9), (std::vector<int64_t>{0, 5}))
      << "the empty document adds no start";
  EXPECT_EQ(*shard->document_starts(1, 5), (std::vector<int64_t>{5}));
  EXPECT_EQ(*shard->document_starts(1, 4), (std::vector<int64_t>{}));
  EXPECT_THROW(shard->read(5, 5, tokens.data()), std::out_of_range);
  // int32 tokens: ids past 65535 (Llama 3's vocabulary).
  const std::unique_ptr<Shard> wide = open_shard(write("wide", {4, {2}, {0, 1}}, {128000, 70000}));
  wide->read(0, 2, tokens.data());
  EXPECT_EQ(tokens[0], 128000);
  EXPECT_EQ(tokens[1], 70000);
}

// Three sequences of 2^31 - 1 tokens in a sparse .bin: 6.4 billion tokens read at its far end
// without writing 12 GB.
TEST_F(MegatronShards, PositionsPastTwoToTheThirtyTwoAreExact) {
  constexpr int32_t size = INT32_MAX;
  write_file("big.idx", Index{8, {size, size, size}, {0, 1, 3}}.bytes());
  const int64_t tokens = 3 * int64_t{size}, far = tokens - 2;
  const int fd = ::open(path("big.bin").c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  const uint16_t marks[2] = {7, 9};
  EXPECT_EQ(::pwrite(fd, marks, sizeof marks, far * 2), static_cast<ssize_t>(sizeof marks));
  EXPECT_EQ(::ftruncate(fd, tokens * 2), 0);
  ::close(fd);
  const MegatronShard shard(path("big.bin"));
  EXPECT_EQ(shard.size(), tokens);
  EXPECT_GT(shard.size(), int64_t{1} << 32);
  std::vector<int64_t> out(2);
  shard.read(far, 2, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{7, 9}));
  EXPECT_EQ(*shard.document_starts(size - 1, 10), (std::vector<int64_t>{size}));
  EXPECT_EQ(*shard.document_starts(far - 10, 12), (std::vector<int64_t>{}));
  EXPECT_EQ(shard.documents(), 2);
}

TEST_F(MegatronShards, EachBadIndexGetsOneLineNamingFileProblemAndFix) {
  const std::vector<uint32_t> tokens = {1, 2, 3};
  const Index good{8, {3}, {0, 1}};
  const auto error_with = [&](const std::string& name, const Index& index) {
    const std::string bin = write(name, index, tokens);
    return error_of([&] { open_shard(bin); });
  };
  Index bad_magic = good;
  bad_magic.magic = std::string("MMIDIDY\0\0", 9);
  EXPECT_EQ(error_with("magic", bad_magic),
            "data: " + path("magic.idx") + " does not start with MMIDIDX; is it a Megatron index (.idx)?");
  Index version = good;
  version.version = 2;
  EXPECT_EQ(error_with("version", version),
            "data: " + path("version.idx") +
                " has version 2, expected 1; write it again with Megatron's tools/preprocess_data.py");
  Index floats = good;
  floats.code = 6;
  EXPECT_EQ(
      error_with("floats", floats),
      "data: " + path("floats.idx") +
          " holds dtype code 6; Atoll reads uint16 (8) and int32 (4) tokens -- write it with one of those");
  EXPECT_NE(error_with("sizes", Index{8, {2, -1}, {0, 2}}).find("sequence 1 has size -1"), std::string::npos);
  EXPECT_NE(error_with("documents", Index{8, {1, 2}, {0, 3, 2}}).find("document index 1 is 3"),
            std::string::npos);
  EXPECT_NE(error_with("long", Index{8, {3, 1}, {0, 2}}).find(path("long.bin") + " holds 6 bytes but"),
            std::string::npos);
  // Cut short: its counts do not fit the bytes it has.
  write_file("cut.bin", std::string(6, '\0'));
  write_file("cut.idx", good.bytes().substr(0, 40));
  EXPECT_EQ(
      error_of([&] { open_shard(path("cut.bin")); }),
      "data: " + path("cut.idx") +
          " is truncated or corrupt: 1 sequences and 2 document indices do not fit its 40 bytes; write it "
          "again with Megatron's tools/preprocess_data.py");
  write_file("tiny.idx", "MMIDIDX");
  write_file("tiny.bin", std::string(6, '\0'));
  EXPECT_NE(
      error_of([&] { open_shard(path("tiny.bin")); }).find("less than the 34-byte Megatron index header"),
      std::string::npos);
  // A Megatron .bin without its .idx reads as what it is not: an llm.c shard, and says so.
  write_file("alone.bin", std::string(2048, '\x05'));
  EXPECT_NE(error_of([&] { open_shard(path("alone.bin")); }).find("a Megatron .bin needs its .idx beside it"),
            std::string::npos);
  for (const char* name :
       {"magic", "version", "floats", "sizes", "documents", "long", "cut", "tiny", "alone"})
    EXPECT_EQ(error_of([&] { open_shard(path(std::string(name) + ".bin")); }).find('\n'), std::string::npos)
        << name;
}

// A Megatron shard's batches take their document starts from its index, whatever the tokens hold.
TEST_F(MegatronShards, BatchesTakeDocumentStartsFromTheIndex) {
  // Documents of 5, 3 and 6 tokens (the second of two sequences); sequences of 4 + 1 tokens.
  std::vector<uint32_t> tokens(14, 9);
  write("docs", {8, {5, 1, 2, 6}, {0, 1, 3, 4}}, tokens);
  const TokenBatch batch =
      open_sequence_source({{path("docs.bin")}}, DataSplit::kVal, 4, 256, 0, {9, -1})->in_order(0, 3);
  // Sequences start at 0, 4, 8: documents at 5 and 8.
  EXPECT_EQ(batch.document_starts, (std::vector<std::vector<int32_t>>{{}, {1}, {}}));
}

}  // namespace
}  // namespace atl::runtime
