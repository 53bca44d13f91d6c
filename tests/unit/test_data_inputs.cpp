// The input readers of `atoll data prepare` (runtime/data/document_source.h): UTF-8 checks, format
// sniffing, JSONL lines and their errors, gzip members and zstd frames (whole, truncated), Parquet
// row groups (a null value named by row and row group), SplitShards' shards, byte for byte what
// write_token_shard writes, and the EncodingPipeline's order. End to end (the same shards from every format):
// tests/cli/data_inputs.sh.
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <gtest/gtest.h>
#include <parquet/arrow/writer.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/data/document_source.h"
#include "runtime/data/encoding_pipeline.h"
#include "runtime/data/split_shards.h"
#include "runtime/data/token_shard.h"
#include "runtime/data/utf8.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/temp_dir_test.h"

namespace fs = std::filesystem;
using atl::runtime::Document;
using atl::runtime::InputFormat;
using atl::runtime::ReadOptions;

namespace {

class DataInputs : public atl::test::TempDirTest {
 protected:
  // The documents of `file` (format sniffed), or the one-line error that stopped the reading.
  std::vector<std::string> documents(const std::string& file, ReadOptions options = {},
                                     int64_t* skipped = nullptr) const {
    const auto reader = atl::runtime::open_documents(file, atl::runtime::input_format(file), options, true);
    std::vector<std::string> texts;
    Document document;
    while (reader->next(document)) texts.push_back(document.text);
    if (skipped) *skipped = reader->skipped();
    return texts;
  }
  std::string error_of(const std::string& file, ReadOptions options = {}) const {
    try {
      documents(file, options);
    } catch (const std::exception& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      return e.what();
    }
    return "no error";
  }
  std::string read_bytes(const std::string& file) const {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Utf8Text, FindsTheFirstByteOfAnIllFormedSequence) {
  using atl::runtime::invalid_utf8_at;
  EXPECT_EQ(invalid_utf8_at("plain ascii, long enough for the 8-byte path"), 44u);
  EXPECT_EQ(invalid_utf8_at("h\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80"), 12u);  // 2-, 3- and 4-byte forms
  EXPECT_EQ(invalid_utf8_at("ab\xE9z"), 2u);                                   // Latin-1
  EXPECT_EQ(invalid_utf8_at("ab\xC0\xAF"), 2u);                                // overlong '/'
  EXPECT_EQ(invalid_utf8_at("ab\xED\xA0\x80"), 2u);                            // a surrogate
  EXPECT_EQ(invalid_utf8_at("ab\xF4\x90\x80\x80"), 2u);                        // above U+10FFFF
  EXPECT_EQ(invalid_utf8_at("abcdefgh\xF0\x9F\x98"), 8u);                      // cut short
  EXPECT_EQ(invalid_utf8_at(std::string("0123456789\0x", 12)), 10u);           // NUL: binary
  EXPECT_EQ(atl::runtime::utf8_boundary("ab\xF0\x9F\x98"), 2u);
  EXPECT_EQ(atl::runtime::utf8_boundary("ab\xF0\x9F\x98\x80"), 6u);
}

TEST_F(DataInputs, TellsFormatsApartByBytesAndName) {
  EXPECT_EQ(atl::runtime::input_format(write_file("a.jsonl", "{}")), InputFormat::kJsonl);
  EXPECT_EQ(atl::runtime::input_format(write_file("a.NDJSON", "{}")), InputFormat::kJsonl);
  EXPECT_EQ(atl::runtime::input_format(write_file("a.txt", "{}")), InputFormat::kText);
  EXPECT_EQ(atl::runtime::input_format(write_file("any-name", "PAR1....")), InputFormat::kParquet);
  EXPECT_EQ(atl::runtime::input_format(write_file("a.jsonl.zst", "\x28\xb5\x2f\xfd")),
            InputFormat::kJsonlZstd);
  EXPECT_EQ(atl::runtime::input_format(write_file("a.json.gz", "\x1f\x8b")), InputFormat::kJsonlGzip);
  const auto refused = [&](const std::string& name, const std::string& bytes, const std::string& part) {
    try {
      atl::runtime::input_format(write_file(name, bytes));
      ADD_FAILURE() << name << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(has(e.what(), path(name)) && has(e.what(), part)) << e.what();
    }
  };
  refused("t.txt.gz", "\x1f\x8b rest", "is gzip-compressed, which Atoll reads as JSONL only");
  refused("t.zst", "\x28\xb5\x2f\xfd rest", "is Zstandard-compressed");
  refused("t.xz", "\xfd\x37\x7a\x58\x5a", "is a xz file");
  refused("t.bin", "BZh91AY", "is a bzip2 file");
  refused("t.parquet", "not parquet", "does not start with Parquet's PAR1");
  refused("t.gz", "plain text", "named as compressed");
}

TEST_F(DataInputs, JsonlGivesOneDocumentPerLineAndNamesTheBadLine) {
  const std::string good =
      write_file("good.jsonl", "{\"text\": \"one\\nline\"}\n\n  \n{\"id\": 2, \"text\": \"\\u00e9\"}");
  EXPECT_EQ(documents(good), (std::vector<std::string>{"one\nline", "\xC3\xA9"}));
  ReadOptions other;
  other.text_field = "body";
  const std::string body = write_file("body.jsonl", "{\"body\": \"b\", \"text\": 1}\n");
  EXPECT_EQ(documents(body, other), std::vector<std::string>{"b"});

  const std::string bad = write_file(
      "bad.jsonl", "{\"text\": \"a\"}\n{\"text\": \nnot json\n[1]\n{\"text\": null}\n{\"text\": \"z\"}\n");
  const std::string error = error_of(bad);
  EXPECT_TRUE(has(error, "input " + bad + " line 2 is not JSON (") && has(error, "--skip-bad-records"))
      << error;
  EXPECT_TRUE(has(error_of(body), "line 1 has a field \"text\" that is number, not a string"))
      << error_of(body);
  EXPECT_TRUE(has(error_of(write_file("arr.jsonl", "[1]\n")), "line 1 is a JSON array, not an object"));
  EXPECT_TRUE(has(error_of(write_file("bytes.jsonl", "{\"text\": \"\xE9\"}\n")), "line 1 is not JSON ("));
  ReadOptions skip;
  skip.skip_bad_records = true;
  int64_t skipped = 0;
  EXPECT_EQ(documents(bad, skip, &skipped), (std::vector<std::string>{"a", "z"}));
  EXPECT_EQ(skipped, 4);  // lines 2 to 5
}

TEST_F(DataInputs, GzipMembersAndZstdFramesReadWholeAndTruncationIsAnError) {
  const std::string lines = "{\"text\": \"first\"}\n{\"text\": \"second\"}\n";
  // Two gzip members, as `cat a.gz b.gz` makes.
  const std::string gz = path("two.jsonl.gz");
  for (const char* mode : {"wb", "ab"}) {
    gzFile file = gzopen(gz.c_str(), mode);
    gzwrite(file, lines.data(), static_cast<unsigned>(lines.size()));
    gzclose(file);
  }
  EXPECT_EQ(documents(gz), (std::vector<std::string>{"first", "second", "first", "second"}));
  const std::string gz_bytes = read_bytes(gz);
  const std::string cut_gz = write_file("cut.jsonl.gz", gz_bytes.substr(0, gz_bytes.size() - 30));
  EXPECT_TRUE(has(error_of(cut_gz), "ends in the middle of a gzip member (truncated)")) << error_of(cut_gz);

  std::string frames;
  for (int i = 0; i < 2; ++i) {
    std::string frame(ZSTD_compressBound(lines.size()), '\0');
    frame.resize(ZSTD_compress(frame.data(), frame.size(), lines.data(), lines.size(), 3));
    frames += frame;
  }
  EXPECT_EQ(documents(write_file("two.jsonl.zst", frames)),
            (std::vector<std::string>{"first", "second", "first", "second"}));
  const std::string cut = write_file("cut.jsonl.zst", frames.substr(0, frames.size() - 5));
  EXPECT_TRUE(has(error_of(cut), "ends in the middle of a zstd frame (truncated)")) << error_of(cut);
}

TEST_F(DataInputs, ParquetReadsEveryRowGroupAndNamesANullByRowAndGroup) {
  arrow::StringBuilder builder;
  for (const char* text : {"a", "b", "c", "d", "e"}) ASSERT_TRUE(builder.Append(text).ok());
  ASSERT_TRUE(builder.AppendNull().ok());  // row 1 of row group 2 (rows of 2)
  ASSERT_TRUE(builder.Append("g").ok());
  std::shared_ptr<arrow::Array> texts;
  ASSERT_TRUE(builder.Finish(&texts).ok());
  const auto table = arrow::Table::Make(arrow::schema({arrow::field("text", arrow::utf8())}), {texts});
  const std::string file = path("t.parquet");
  auto out = arrow::io::FileOutputStream::Open(file);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), *out, 2).ok());
  ASSERT_TRUE((*out)->Close().ok());

  const std::string error = error_of(file);
  EXPECT_TRUE(has(error, "input " + file + " row 1 of row group 2 has a null \"text\"")) << error;
  ReadOptions skip;
  skip.skip_bad_records = true;
  int64_t skipped = 0;
  EXPECT_EQ(documents(file, skip, &skipped), (std::vector<std::string>{"a", "b", "c", "d", "e", "g"}));
  EXPECT_EQ(skipped, 1);
  ReadOptions other;
  other.text_field = "body";
  EXPECT_TRUE(has(error_of(file, other), "(Parquet) has no column \"body\" (its columns: text)"));
  EXPECT_TRUE(has(error_of(write_file("broken.parquet", "PAR1 and then nothing of the sort")),
                  "is not a readable Parquet file ("));
}

TEST_F(DataInputs, TextFilesInBlocksCutAfterNewlinesAndRefuseBinary) {
  std::string text;
  while (text.size() < atl::runtime::kTextBlockBytes + 100) text += "a line of text \xE4\xB8\xAD\n";
  const std::string file = write_file("big.txt", text);
  const auto reader = atl::runtime::open_documents(file, InputFormat::kText, {}, false);
  std::string joined;
  Document block;
  int blocks = 0;
  while (reader->next(block)) {
    EXPECT_EQ(block.continues, blocks > 0);
    EXPECT_EQ(block.text.back(), '\n');
    joined += block.text;
    ++blocks;
  }
  EXPECT_EQ(blocks, 2);
  EXPECT_TRUE(joined == text);
  const std::string error = error_of(write_file("nul.txt", std::string("text\0more", 9)));
  EXPECT_TRUE(has(error, "is not UTF-8 text (byte 0x00 at offset 4)")) << error;
  // Read whole (documents mode) a file is a record: skipped and counted with skip_bad_records.
  ReadOptions skip;
  skip.skip_bad_records = true;
  int64_t skipped = 0;
  EXPECT_TRUE(documents(write_file("latin1.html", "<p>caf\xe9</p>"), skip, &skipped).empty());
  EXPECT_EQ(skipped, 1);
}

TEST_F(DataInputs, SplitShardsWritesWhatWriteTokenShardWritesAndNumbersThemWhenFull) {
  std::vector<std::string> registered;
  const auto output = [&](const std::string& name) {
    registered.push_back(name);
    return path(name);
  };
  const std::vector<uint32_t> tokens = {1, 2, 3, 70000, 5, 6, 7};
  for (const bool wide : {false, true}) {
    std::vector<uint32_t> narrow_tokens = tokens;
    if (!wide) narrow_tokens[3] = 4;
    atl::runtime::SplitShards one(output, "one", 100, wide);
    one.add(narrow_tokens, {0}, 2);
    const auto shards = one.finish();
    ASSERT_EQ(shards.size(), 1u);
    EXPECT_EQ(shards[0].path, path("one.bin"));
    atl::runtime::write_token_shard(path("reference.bin"), narrow_tokens, wide);
    EXPECT_TRUE(read_bytes(path("one.bin")) == read_bytes(path("reference.bin"))) << "wide " << wide;
  }
  atl::runtime::SplitShards three(output, "train", 3, true);
  three.add({1, 2}, {0}, 1);
  three.add({3, 4, 5, 6, 7}, {1, 2}, 2);
  const auto shards = three.finish();
  ASSERT_EQ(shards.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(shards[i].path, path(atl::runtime::numbered_shard_name("train", i)));
  EXPECT_EQ(shards[0].tokens, 3);
  EXPECT_EQ(shards[2].tokens, 1);
  EXPECT_EQ(shards[0].documents, 3);  // both adds start in shard 0
  EXPECT_EQ(shards[0].sources, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(shards[2].sources, (std::set<int>{1, 2}));
  EXPECT_EQ(atl::runtime::TokenShard(shards[1].path).token(0), 4u);
  for (const auto& entry : fs::directory_iterator(dir_))
    EXPECT_EQ(entry.path().filename().string().find(".partial."), std::string::npos) << entry.path();
}

// Pieces of 1 byte and of 1 MB, two sides interleaved, a bound that holds a 1 MB piece and a few
// small ones (each later small piece is encoded before the large one ahead of it is, on 3 workers):
// each side's shard is its pieces in submission order, whatever the number of workers; a pipeline
// dropped with work queued (a failed run) stops without writing it.
TEST_F(DataInputs, EncodingPipelineWritesEachSidesPiecesInSubmissionOrderWhateverTheThreads) {
  const auto tokenizer = atl::runtime::load_tokenizer("bytes");
  std::vector<std::string> shard_bytes;
  for (const unsigned threads : {1u, 3u}) {
    const std::string dir = path("threads-" + std::to_string(threads));
    fs::create_directories(dir);
    const auto output = [&](const std::string& name) { return dir + "/" + name; };
    atl::runtime::SplitShards train(output, "train", 1 << 30, false), val(output, "val", 1 << 30, false);
    std::vector<uint32_t> expected[2];
    int64_t documents[2] = {0, 0};
    {
      atl::runtime::EncodingPipeline pipeline(*tokenizer, threads, (1 << 20) + 1000);
      for (int i = 0; i < 160; ++i) {
        const size_t size = i % 20 == 4 ? 1 << 20 : 1 + static_cast<size_t>(i * 131 % 500);
        const int side = i % 3 == 0;
        std::vector<atl::runtime::Piece> pieces;
        for (int p = 0; p < 1 + i % 2; ++p) {
          atl::runtime::Piece piece;
          piece.text = std::string(size, static_cast<char>('a' + (i + p) % 26));
          piece.sources = {i % 5};
          piece.documents = 1;
          piece.bos = p == 0 ? 256 : -1;
          if (piece.bos >= 0) expected[side].push_back(256);
          expected[side].insert(expected[side].end(), size, static_cast<uint32_t>('a' + (i + p) % 26));
          ++documents[side];
          pieces.push_back(std::move(piece));
        }
        pipeline.submit(std::move(pieces), side ? val : train);
      }
      pipeline.finish();
    }
    for (const auto& [side, shards] : {std::pair{0, train.finish()}, std::pair{1, val.finish()}}) {
      ASSERT_EQ(shards.size(), 1u);
      EXPECT_EQ(shards[0].documents, documents[side]);
      const atl::runtime::TokenShard shard(shards[0].path);
      std::vector<int64_t> tokens(static_cast<size_t>(shard.size()));
      shard.read(0, shard.size(), tokens.data());
      EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), expected[side].begin(), expected[side].end()))
          << "threads " << threads << ", side " << side;
      shard_bytes.push_back(read_bytes(shards[0].path));
    }
  }
  EXPECT_TRUE(shard_bytes[0] == shard_bytes[2] && shard_bytes[1] == shard_bytes[3]);

  atl::runtime::SplitShards dropped([&](const std::string& name) { return path(name); }, "dropped", 100,
                                    false);
  {
    atl::runtime::EncodingPipeline pipeline(*tokenizer, 2, 64 << 20);  // room for all: none written by submit
    for (int i = 0; i < 8; ++i) pipeline.submit({{std::string(200000, 'x'), {0}, 1, -1}}, dropped);
  }
  EXPECT_EQ(dropped.tokens(), 0);
}

}  // namespace
