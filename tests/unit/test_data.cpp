// Token data: llm.c shards (both widths) and their validation messages, the global sample order,
// the per-rank batch slices, byte-level data preparation, and documents mode (HTML, the split by
// document, dedupe, --files-from, a tokenizer trained on the way) with `atoll data prepare`'s flags.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/data/batches.h"
#include "runtime/data/data_prepare.h"
#include "runtime/data/sample_order.h"
#include "runtime/data/token_shard.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/error_of.h"
#include "tests/small_tokenizer_json.h"
#include "tests/temp_dir_test.h"

namespace fs = std::filesystem;
using atl::runtime::batch_slice;
using atl::runtime::DocumentCounts;
using atl::runtime::prepare_shards;
using atl::runtime::PrepareOptions;
using atl::runtime::PrepareResult;
using atl::runtime::SampleOrder;
using atl::runtime::TokenShard;
using atl::runtime::write_token_shard;
using atl::test::error_of;

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
class PrepareDocuments : public DataFiles {};

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
  expect_contains(prepare_error({"/dev/null"}, 0.1), {"is not a regular file"});
  fs::create_directory(path("nothing"));
  expect_contains(prepare_error({path("nothing")}, 0.1),
                  {"directory " + path("nothing") + " holds no files"});
  expect_contains(prepare_error({}, 0.1), {"no input files"});
  for (double fraction : {0.0, 1.0, -0.5, 1.5, std::nan("")})
    expect_contains(prepare_error({text}, fraction), {"--val-fraction", "between 0 and 1"});
  expect_contains(prepare_error({write_file("tiny.txt", "abc")}, 0.5), {"3 bytes, too few"});
  EXPECT_FALSE(fs::exists(path("out"))) << "nothing is written when the input is bad";
}

// --- Documents mode -------------------------------------------------------------------------------

std::string read_text(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The split's rule, written out again: FNV-1a 64 of the document's text, modulo 2^20.
uint64_t split_key(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash % (uint64_t{1} << 20);
}

// A val fraction that sends exactly the `count` documents of smallest key to val.
double fraction_for(const std::vector<std::string>& texts, size_t count) {
  std::vector<uint64_t> keys;
  for (const std::string& text : texts) keys.push_back(split_key(text));
  std::sort(keys.begin(), keys.end());
  return static_cast<double>(keys[count - 1] + 1) / static_cast<double>(uint64_t{1} << 20);
}

// A number as text that reads back as the same double.
std::string exact(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

std::string joined(const std::vector<std::string>& documents) {
  std::string text;
  for (const std::string& d : documents) text += (text.empty() ? "" : "\n\n") + d;
  return text;
}

PrepareOptions documents_for(std::vector<std::string> inputs, std::string out, double val_fraction) {
  PrepareOptions options = options_for(std::move(inputs), std::move(out), val_fraction);
  options.documents = true;
  return options;
}

std::vector<int64_t> bytes_of(const std::string& text) {
  return std::vector<int64_t>(reinterpret_cast<const unsigned char*>(text.data()),
                              reinterpret_cast<const unsigned char*>(text.data()) + text.size());
}

TEST_F(PrepareDocuments, SplitsByDocumentWhateverTheOrder) {
  std::vector<std::string> files, texts;
  for (int i = 0; i < 12; ++i) {
    texts.push_back("Document " + std::to_string(i) + " says something.\nIts second line, number " +
                    std::to_string(i * 7) + ".");
    files.push_back(write_file("doc" + std::to_string(i) + ".txt", texts.back() + "\n"));
  }
  const double fraction = 0.3;
  std::vector<std::string> train, val;
  for (const std::string& text : texts)
    (split_key(text) < static_cast<uint64_t>(fraction * (1 << 20)) ? val : train).push_back(text);
  ASSERT_FALSE(train.empty());
  ASSERT_FALSE(val.empty());

  PrepareOptions options = documents_for(files, path("out"), fraction);
  options.threads = 3;
  const PrepareResult result = prepare_shards(options);
  // Whole documents in input order, a blank line between two: none is cut across the sides.
  EXPECT_EQ(read_text(result.train_text_path), joined(train));
  EXPECT_EQ(read_text(result.val_text_path), joined(val));
  EXPECT_EQ(result.train_text_path, path("out/train.txt"));
  EXPECT_EQ(result.documents.train, static_cast<int64_t>(train.size()));
  EXPECT_EQ(result.documents.val, static_cast<int64_t>(val.size()));
  EXPECT_EQ(result.documents.inputs, 12);
  EXPECT_EQ(result.documents.html, 0);
  EXPECT_EQ(read_all(TokenShard(result.train_path)), bytes_of(joined(train)));
  EXPECT_EQ(read_all(TokenShard(result.val_path)), bytes_of(joined(val)));
  EXPECT_EQ(result.train_bytes, static_cast<int64_t>(joined(train).size()));
  const std::string manifest = read_text(path("out/MANIFEST.txt"));
  EXPECT_NE(manifest.find("documents kept: 12 (train " + std::to_string(train.size()) + ", val " +
                          std::to_string(val.size()) + ")\n"),
            std::string::npos)
      << manifest;

  // The other order, on one thread: each document on the same side, the files byte for byte the
  // same but for the order of the documents.
  std::reverse(files.begin(), files.end());
  options = documents_for(files, path("reversed"), fraction);
  options.threads = 1;
  prepare_shards(options);
  std::reverse(train.begin(), train.end());
  std::reverse(val.begin(), val.end());
  EXPECT_EQ(read_text(path("reversed/train.txt")), joined(train));
  EXPECT_EQ(read_text(path("reversed/val.txt")), joined(val));
  EXPECT_EQ(read_text(path("reversed/MANIFEST.txt")), manifest);
}

TEST_F(PrepareDocuments, ConvertsHtmlNormalizesTextAndSkipsEmptyDocuments) {
  const std::vector<std::string> files = {
      write_file("a.html",
                 "<html><head><title>T</title></head><body><nav>menu</nav><h1>Title</h1>"
                 "<p>Body &amp; soul.</p></body></html>"),
      write_file("b.txt", "\xEF\xBB\xBFplain  \n\n\n\nsecond line\t\r\n\n"),
      write_file("c.txt", ""),
      write_file("d.htm", "<nav>only navigation</nav>\n"),
      write_file("e", "  <!DOCTYPE html><p>sniffed</p>"),
      write_file("f.txt", " \n\t\n"),
  };
  const std::vector<std::string> texts = {"Title\n\nBody & soul.", "plain\n\nsecond line", "sniffed"};
  const PrepareResult result = prepare_shards(documents_for(files, path("out"), fraction_for(texts, 1)));
  const DocumentCounts& counts = result.documents;
  EXPECT_EQ(counts.inputs, 6);
  EXPECT_EQ(counts.html, 3);
  EXPECT_EQ(counts.empty, 3);
  EXPECT_EQ(counts.train, 2);
  EXPECT_EQ(counts.val, 1);
  // The document of smallest key goes to val, the others to train in input order.
  std::vector<std::string> train;
  std::string val;
  for (const std::string& t : texts) {
    if (split_key(t) == std::min({split_key(texts[0]), split_key(texts[1]), split_key(texts[2])})) {
      val = t;
    } else {
      train.push_back(t);
    }
  }
  EXPECT_EQ(read_text(result.train_text_path), joined(train));
  EXPECT_EQ(read_text(result.val_text_path), val);
  EXPECT_NE(read_text(result.manifest_path).find("empty documents skipped: 3\n"), std::string::npos);
}

TEST_F(PrepareDocuments, DedupesDocumentsAndLongLinesWithExactCounts) {
  const std::string licence = "This line is exactly forty-eight bytes long....";  // + "!" below
  const std::string l1 = licence + "!", l2 = "Another repeated line of boilerplate, long enough: sixty bytes";
  const std::string short_line = std::string(47, 's');
  ASSERT_EQ(l1.size(), 48u);
  const std::string doc1 = "Intro one.\n" + l1 + "\n" + short_line + "\n" + short_line;
  const std::vector<std::string> files = {
      write_file("1.txt", doc1),
      write_file("2.txt", doc1 + "\n\n"),  // the same text once normalized
      write_file("3.txt", "Intro three.\n\n" + l1 + "\n\nOutro three.\n" + l2 + "\n" + l2),
      write_file("4.txt", l2 + "\n\n" + l1),
  };
  const std::string doc3 = "Intro three.\n\nOutro three.\n" + l2;
  PrepareOptions options = documents_for(files, path("out"), fraction_for({doc1, doc3}, 1));
  options.dedupe = true;
  const PrepareResult result = prepare_shards(options);
  const DocumentCounts& counts = result.documents;
  EXPECT_EQ(counts.duplicate, 1);
  EXPECT_EQ(counts.emptied, 1);
  EXPECT_EQ(counts.duplicate_lines, 4);  // 3.txt: l1 and its second l2; 4.txt: both
  EXPECT_EQ(counts.duplicate_line_bytes, static_cast<int64_t>(2 * l1.size() + 2 * l2.size()));
  EXPECT_EQ(counts.train + counts.val, 2);
  const std::string& first_val = split_key(doc1) < split_key(doc3) ? doc1 : doc3;
  const std::string& first_train = split_key(doc1) < split_key(doc3) ? doc3 : doc1;
  EXPECT_EQ(read_text(result.val_text_path), first_val);
  EXPECT_EQ(read_text(result.train_text_path), first_train);
  const std::string manifest = read_text(result.manifest_path);
  for (const std::string& line : {std::string("duplicate documents dropped: 1\n"),
                                  std::string("documents emptied by dropping duplicate lines: 1\n"),
                                  "duplicate lines dropped (of at least 48 bytes): 4 (" +
                                      std::to_string(2 * l1.size() + 2 * l2.size()) + " bytes)\n"})
    EXPECT_NE(manifest.find(line), std::string::npos) << manifest << "\n lacks: " << line;

  // Without dedupe every document stays, lines and all.
  options = documents_for(
      files, path("kept"),
      fraction_for(
          {doc1, doc1, "Intro three.\n\n" + l1 + "\n\nOutro three.\n" + l2 + "\n" + l2, l2 + "\n\n" + l1},
          1));
  const PrepareResult all = prepare_shards(options);
  EXPECT_EQ(all.documents.train + all.documents.val, 4);
  EXPECT_EQ(all.documents.duplicate_lines, 0);
}

TEST_F(PrepareDocuments, ReadsInputsFromAListAfterTheNamedOnes) {
  const std::string a = write_file("a.txt", "first document");
  const std::string b = write_file("b.txt", "second document");
  const std::string c = write_file("c.txt", "third document");
  const std::string relative = fs::relative(c, fs::current_path()).string();
  ASSERT_FALSE(fs::path(relative).is_absolute());
  const std::string list = write_file("list.txt", b + "\r\n\n   \n" + relative + "\n");
  PrepareOptions options = documents_for(
      {a}, path("out"), fraction_for({"first document", "second document", "third document"}, 1));
  options.files_from = list;
  const PrepareResult result = prepare_shards(options);
  EXPECT_EQ(result.documents.inputs, 3);
  const std::string all = read_text(result.train_text_path) + "\n\n" + read_text(result.val_text_path);
  for (const char* text : {"first document", "second document", "third document"})
    EXPECT_NE(all.find(text), std::string::npos) << all;
}

// A prepared side's documents (its .txt: documents with a blank line between them), each encoded as
// `atoll sample` encodes a prompt and followed by the EOS where the tokenizer frames documents with
// that, one after another -- joined by the blank line where the tokenizer has neither BOS nor EOS.
std::vector<int64_t> prompts_of(const std::string& text, const atl::runtime::Tokenizer& tokenizer) {
  const int eos = atl::runtime::document_eos(tokenizer);
  const bool framed = atl::runtime::document_bos(tokenizer) >= 0 || eos >= 0;
  std::vector<int64_t> ids;
  for (size_t start = 0, end = 0; start < text.size(); start = end + 2) {
    end = std::min(text.find("\n\n", start), text.size());
    if (!framed && !ids.empty()) ids.insert(ids.end(), {'\n', '\n'});
    const std::vector<uint32_t> prompt =
        atl::runtime::encode_prompt(tokenizer, text.substr(start, end - start));
    ids.insert(ids.end(), prompt.begin(), prompt.end());
    if (eos >= 0) ids.push_back(eos);
  }
  return ids;
}

TEST_F(PrepareDocuments, TrainsATokenizerOnTheTrainingTextReproducibly) {
  std::vector<std::string> files, texts;
  for (int d = 0; d < 8; ++d) {
    std::string text;
    for (int i = 0; i < 40; ++i)
      text +=
          "def function_" + std::to_string(d * 40 + i) + "(x):\n    return x * " + std::to_string(i) + "\n";
    files.push_back(write_file("doc" + std::to_string(d) + ".py", text));
    texts.push_back(text.substr(0, text.size() - 1));  // normalized: no final newline
  }
  PrepareOptions options = documents_for(files, path("out"), fraction_for(texts, 2));
  options.tokenizer_vocab = 300;
  options.threads = 2;
  const PrepareResult result = prepare_shards(options);
  EXPECT_EQ(result.tokenizer_path, path("out/tokenizer.model"));
  EXPECT_EQ(result.vocab, 300);
  const std::unique_ptr<atl::runtime::Tokenizer> tokenizer =
      atl::runtime::load_tokenizer(result.tokenizer_path);
  EXPECT_EQ(tokenizer->vocab_size(), 300);
  ASSERT_GT(result.documents.val, 0);
  // The shards are the text files' documents encoded, each after SentencePiece's BOS, in fewer tokens
  // than bytes.
  ASSERT_EQ(atl::runtime::document_bos(*tokenizer), 1);
  for (const auto& [shard, text] : {std::pair{result.train_path, result.train_text_path},
                                    std::pair{result.val_path, result.val_text_path}}) {
    const std::vector<int64_t> tokens = read_all(TokenShard(shard));
    EXPECT_EQ(tokens, prompts_of(read_text(text), *tokenizer));
    EXPECT_LT(tokens.size(), read_text(text).size());
  }
  const std::vector<int64_t> train_tokens = read_all(TokenShard(result.train_path));
  EXPECT_EQ(std::count(train_tokens.begin(), train_tokens.end(), 1), result.documents.train);
  // So the loader finds where each document starts (what model.document_mask needs): in every
  // sequence of 32 (+1) tokens in file order, at the offsets of the BOS tokens inside it.
  constexpr int kSeq = 32;
  const atl::runtime::TokenBatch batch =
      atl::runtime::open_sequence_source({{result.train_path}}, atl::runtime::DataSplit::kVal, kSeq, 300, 0,
                                         {tokenizer->bos_id(), tokenizer->eos_id()})
          ->in_order(0, static_cast<int64_t>(train_tokens.size() - 1) / kSeq);
  int64_t found = 0;
  for (size_t i = 0; i < batch.document_starts.size(); ++i) {
    std::vector<int32_t> expected;
    for (size_t k = 1; k < kSeq; ++k)
      if (train_tokens[i * kSeq + k] == 1) expected.push_back(static_cast<int32_t>(k));
    EXPECT_EQ(batch.document_starts[i], expected) << "sequence " << i;
    found += static_cast<int64_t>(expected.size());
  }
  EXPECT_GT(found, 0);
  const std::string manifest = read_text(result.manifest_path);
  EXPECT_NE(manifest.find("tokenizer: sentencepiece (vocab 300), trained on train.txt\n"), std::string::npos)
      << manifest;

  // Again, on one thread, into the same directory: every file byte for byte the same.
  std::map<std::string, std::string> first;
  for (const auto& entry : fs::directory_iterator(path("out")))
    first[entry.path().filename().string()] = read_text(entry.path().string());
  EXPECT_EQ(first.size(), 6u);  // train/val .bin and .txt, tokenizer.model, MANIFEST.txt
  for (const auto& [name, bytes] : first) fs::remove(path("out/" + name));
  options.threads = 1;
  prepare_shards(options);
  for (const auto& [name, bytes] : first) EXPECT_TRUE(read_text(path("out/" + name)) == bytes) << name;

  // Without documents too: the bytes split as before, the model trained on train.txt.
  PrepareOptions plain = options_for({files[0], files[1]}, path("plain"), 0.1);
  plain.tokenizer_vocab = 300;
  const PrepareResult plain_result = prepare_shards(plain);
  EXPECT_EQ(read_text(plain_result.train_text_path) + read_text(plain_result.val_text_path),
            read_text(files[0]) + "\n" + read_text(files[1]));
  EXPECT_TRUE(fs::exists(path("plain/tokenizer.model")));
  EXPECT_EQ(plain_result.manifest_path, path("plain/MANIFEST.txt"));
}

// `atoll sample` begins a prompt as `data prepare --documents` began each training document: after
// the BOS with a Llama-3-style tokenizer, with nothing before it with bytes (documents joined) or with
// a Qwen-2-style tokenizer (an EOS, no BOS: the EOS after each document marks where the next starts).
TEST_F(PrepareDocuments, APromptBeginsAsEachPreparedDocumentBegan) {
  std::vector<std::string> files;
  for (int d = 0; d < 10; ++d)
    files.push_back(
        write_file("doc" + std::to_string(d) + ".txt",
                   "hello number " + std::to_string(d) + "\nhell " + std::to_string(d * d) + "\n"));
  nlohmann::json eos_only = atl::test::small_tokenizer_json();
  eos_only["added_tokens"][0]["content"] = "<|im_start|>";
  eos_only["added_tokens"][1]["content"] = "<|endoftext|>";
  struct Case {
    std::string model;
    int bos, eos;  // document_bos and document_eos
    const char* framing;
  };
  for (const Case& c : {Case{write_file("llama.json", atl::test::small_tokenizer_json().dump()), 259, -1,
                             "BOS token before each"},
                        Case{write_file("qwen.json", eos_only.dump()), -1, 260, "EOS token after each"},
                        Case{"bytes", -1, -1, "joined as text"}}) {
    SCOPED_TRACE(c.model);
    PrepareOptions options = documents_for(files, path("out-" + std::to_string(c.model.size())), 0.5);
    options.tokenizer = c.model;
    const PrepareResult result = prepare_shards(options);
    const std::unique_ptr<atl::runtime::Tokenizer> tokenizer = atl::runtime::load_tokenizer(c.model);
    EXPECT_EQ(atl::runtime::document_bos(*tokenizer), c.bos);
    EXPECT_EQ(atl::runtime::document_eos(*tokenizer), c.eos);
    const std::vector<int64_t> shard = read_all(TokenShard(result.train_path));
    ASSERT_FALSE(shard.empty());
    EXPECT_EQ(shard.front(), c.bos >= 0 ? c.bos : static_cast<int64_t>(tokenizer->encode("hello").front()))
        << "every document begins with hello";
    EXPECT_EQ(shard, prompts_of(read_text(result.train_text_path), *tokenizer));
    if (c.eos >= 0) {
      EXPECT_EQ(std::count(shard.begin(), shard.end(), c.eos), result.documents.train);
    }
    EXPECT_NE(read_text(result.manifest_path).find(std::string("documents framed: ") + c.framing + "\n"),
              std::string::npos);
  }
}

TEST_F(PrepareDocuments, RejectsBadInputWithOneLineAndWritesNothing) {
  const std::string text = write_file("text.txt", "some text to split");
  const std::string out = path("out");
  const auto error = [&](const std::function<void(PrepareOptions&)>& change) {
    PrepareOptions options = documents_for({text}, out, 0.5);
    change(options);
    return error_of([&] { prepare_shards(options); });
  };
  expect_contains(error([](PrepareOptions& o) {
                    o.tokenizer = "some.model";
                    o.tokenizer_vocab = 300;
                  }),
                  {"--tokenizer some.model and --tokenizer-vocab 300 exclude each other"});
  expect_contains(error([](PrepareOptions& o) {
                    o.documents = false;
                    o.dedupe = true;
                  }),
                  {"--dedupe", "add --documents"});
  expect_contains(error([&](PrepareOptions& o) { o.files_from = path("none.list"); }),
                  {"--files-from " + path("none.list") + " does not exist"});
  const std::string list = write_file("list.txt", text + "\n" + path("gone.txt") + "\n");
  expect_contains(error([&](PrepareOptions& o) { o.files_from = list; }),
                  {"input " + path("gone.txt") + " (line 2 of " + list + ") does not exist; check the path"});
  const std::string folder_list = write_file("devices.txt", "/dev/null\n");
  expect_contains(error([&](PrepareOptions& o) { o.files_from = folder_list; }), {"is not a regular file"});
  for (int vocab : {-5, 100, 259, 1'048'577})
    expect_contains(error([&](PrepareOptions& o) { o.tokenizer_vocab = vocab; }),
                    {"--tokenizer-vocab " + std::to_string(vocab) + " is outside [260, 1048576]"});
  expect_contains(error([&](PrepareOptions& o) { o.val_fraction = 1e-6; }),
                  {"none of the 1 documents kept fell into val", "raise --val-fraction"});
  expect_contains(error([&](PrepareOptions& o) { o.inputs = {write_file("empty.html", "<nav>x</nav>")}; }),
                  {"none of the 0 documents kept"});
  // Found out only by training: what was written on the way is removed again.
  expect_contains(error([&](PrepareOptions& o) {
                    o.inputs = {text, write_file("more.txt", "more text for the other side")};
                    o.val_fraction = fraction_for({"some text to split", "more text for the other side"}, 1);
                    o.tokenizer_vocab = 5000;
                  }),
                  {"training a tokenizer of 5000 pieces", "lower --tokenizer-vocab"});
  EXPECT_FALSE(fs::exists(out)) << "nothing is written when the input is bad";
}

// `atoll data prepare` itself, run as the binary beside this one (build/bin/atoll): each bad flag
// one line on stderr and exit 2, nothing written; the switches take no value.
TEST_F(PrepareDocuments, CommandRejectsBadFlagsWithOneLineExit2AndWritesNothing) {
  const fs::path atoll = fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "bin" / "atoll";
  ASSERT_TRUE(fs::exists(atoll)) << atoll << " is not built: build the atoll target with the tests";
  const std::string text = write_file("text.txt", "some text");
  const std::string out = path("out");
  // Runs `atoll data prepare --out OUT FLAGS...`; returns the exit code and what it wrote to stderr.
  const auto prepare = [&](const std::vector<std::string>& flags) {
    std::string command = "'" + atoll.string() + "' data prepare --out '" + out + "'";
    for (const std::string& flag : flags) command += " '" + flag + "'";
    command += " >/dev/null 2>'" + path("stderr.txt") + "'";
    const int status = std::system(command.c_str());
    return std::pair{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(path("stderr.txt"))};
  };
  const auto expect_bad = [&](const std::vector<std::string>& flags, const std::string& message) {
    const auto [code, error] = prepare(flags);
    EXPECT_EQ(code, 2) << error;
    EXPECT_EQ(error, "atoll: error: data prepare: " + message + "\n");
  };
  expect_bad({"--documents", "--tokenizer", "bytes", "--tokenizer-vocab", "300", text},
             "--tokenizer bytes and --tokenizer-vocab 300 exclude each other; pass a model to use or a "
             "vocabulary to train, not both");
  expect_bad({"--tokenizer-vocab", "0", "--documents", text},
             "--tokenizer-vocab 0 is outside [260, 1048576]; pick e.g. 8192");
  expect_bad({"--tokenizer-vocab", "2000000", "--documents", text},
             "--tokenizer-vocab 2000000 is outside [260, 1048576]; pick e.g. 8192");
  expect_bad({"--dedupe", text},
             "--dedupe works on documents; add --documents (each input one document) or drop --dedupe");
  expect_bad(
      {"--documents", "--files-from", path("no.list")},
      "--files-from " + path("no.list") + " does not exist; pass a file listing one input path a line");
  const std::string list = write_file("list.txt", "\n" + path("gone.txt") + "\n");
  expect_bad({"--documents", "--files-from", list},
             "input " + path("gone.txt") + " (line 2 of " + list + ") does not exist; check the path");
  expect_bad({"--tokenizer-vocab", "lots", text},
             "--tokenizer-vocab lots is not a whole number; pick e.g. 8192");
  EXPECT_FALSE(fs::exists(out)) << "nothing is written when the input is bad";

  // The file after --dedupe is an input, not the switch's value.
  const std::string other = write_file("other.txt", "other text");
  const std::string others = write_file("others.txt", other + "\n");
  const auto [ok, quiet] = prepare({"--documents", "--dedupe", text, "--files-from", others, "--val-fraction",
                                    exact(fraction_for({"some text", "other text"}, 1))});
  EXPECT_EQ(ok, 0) << quiet;
  EXPECT_NE(
      read_text(path("out/MANIFEST.txt")).find("inputs: 2 (html 0)\ndocuments kept: 2 (train 1, val 1)\n"),
      std::string::npos);
}

}  // namespace
