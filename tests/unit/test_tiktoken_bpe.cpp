// Llama 3's tokenizer in parts: the split pattern's pieces, UTF-8 validation, byte-pair merging by
// rank, and the Tokenizer over a rank file of Llama 3's size made here (tests/interop/
// tiktoken_check.py checks the real file id for id against tiktoken).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/tokenizer/byte_pair_encoding.h"
#include "runtime/tokenizer/llama3_split.h"
#include "runtime/tokenizer/tiktoken_bpe.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/utf8.h"
#include "tests/temp_dir_test.h"

namespace {

using atl::runtime::BytePairEncoding;
using atl::runtime::TiktokenBpe;

std::vector<std::string> pieces(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view piece : atl::runtime::llama3_pieces(text)) out.emplace_back(piece);
  return out;
}

// Expected pieces as Python's regex module cuts them with Meta's pattern.
TEST(Llama3Split, CutsAsThePattern) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(pieces("I'm  here"), (V{"I", "'m", " ", " here"}));
  EXPECT_EQ(pieces("x   \n\ny"), (V{"x", "   \n\n", "y"}));
  EXPECT_EQ(pieces("abc1234567"), (V{"abc", "123", "456", "7"}));
  EXPECT_EQ(pieces("  \t x"), (V{"  \t", " x"}));
  EXPECT_EQ(pieces("it's ok?!\n\n"), (V{"it", "'s", " ok", "?!\n\n"}));
  EXPECT_EQ(pieces("日本語 テキスト"), (V{"日本語", " テキスト"}));
  EXPECT_EQ(pieces("a\u3000\u3000b"), (V{"a", "\u3000", "\u3000b"}));
  EXPECT_EQ(pieces("'START"), (V{"'S", "TART"}));
  EXPECT_EQ(pieces("   "), (V{"   "}));
}

TEST(Utf8, FindsTheFirstInvalidByte) {
  constexpr size_t kValid = std::string_view::npos;
  EXPECT_EQ(atl::runtime::invalid_utf8_offset("abc caf\xc3\xa9 \xf0\x9f\x98\x80"), kValid);
  EXPECT_EQ(atl::runtime::invalid_utf8_offset("ab\xff"), 2u);
  EXPECT_EQ(atl::runtime::invalid_utf8_offset("caf\xc3"), 3u) << "truncated";
  EXPECT_EQ(atl::runtime::invalid_utf8_offset("\xc0\xaf"), 0u) << "overlong";
  EXPECT_EQ(atl::runtime::invalid_utf8_offset("\xe0\x80\xaf"), 0u) << "overlong";
  EXPECT_EQ(atl::runtime::invalid_utf8_offset("\xed\xa0\x80"), 0u) << "surrogate";
  EXPECT_EQ(atl::runtime::invalid_utf8_offset("\xf4\x90\x80\x80"), 0u) << "past U+10FFFF";
  EXPECT_EQ(atl::runtime::invalid_utf8_offset("x\x80"), 1u) << "lone continuation";
}

// Single bytes at ranks 0-255 (rank = byte value), then `extra` from rank 256.
std::vector<std::string> byte_tokens_and(const std::vector<std::string>& extra) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  return tokens;
}

std::vector<uint32_t> merged(const BytePairEncoding& bpe, const std::string& piece) {
  std::vector<uint32_t> ranks;
  bpe.encode(piece, ranks);
  return ranks;
}

TEST(BytePairEncoding, MergesTheLowestRankLeftmostFirst) {
  const BytePairEncoding bpe(byte_tokens_and({"aa", "aaaa", "bc", "ab"}));  // 256, 257, 258, 259
  EXPECT_EQ(merged(bpe, "aaa"), (std::vector<uint32_t>{256, 'a'})) << "leftmost pair on a tie";
  EXPECT_EQ(merged(bpe, "abcx"), (std::vector<uint32_t>{'a', 258, 'x'})) << "bc (258) before ab (259)";
  EXPECT_EQ(merged(bpe, "aaaaaaaaaa"), (std::vector<uint32_t>{257, 257, 256}));
  // 100 bytes and more take the heap; the result is the same rule's.
  std::vector<uint32_t> long_piece(37, 257);
  long_piece.push_back(256);
  EXPECT_EQ(merged(bpe, std::string(150, 'a')), long_piece);
  EXPECT_EQ(merged(bpe, "aa"), (std::vector<uint32_t>{256}));
  EXPECT_EQ(bpe.rank("zz"), BytePairEncoding::kNoRank);
}

TEST(BytePairEncoding, RefusesRepeatedTokensAndMissingBytes) {
  EXPECT_THROW(BytePairEncoding(byte_tokens_and({"aa", "aa"})), std::invalid_argument);
  std::vector<std::string> no_zero = byte_tokens_and({});
  no_zero[0] = "zz";
  EXPECT_THROW(BytePairEncoding{no_zero}, std::invalid_argument);
}

std::string base64(const std::string& bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t group = 0;
    for (size_t j = 0; j < 3; ++j)
      group = group << 8 | (i + j < bytes.size() ? static_cast<unsigned char>(bytes[i + j]) : 0u);
    for (size_t j = 0; j < 4; ++j) out += j <= bytes.size() - i ? kAlphabet[group >> (18 - 6 * j) & 63] : '=';
  }
  return out;
}

// A rank file of Llama 3's size: bytes, "hi" at 256, then tokens text never forms (0xFF is not UTF-8).
std::string rank_file(size_t ranks = TiktokenBpe::kLlama3Ranks) {
  std::vector<std::string> tokens = byte_tokens_and({"hi"});
  for (uint32_t i = 0; tokens.size() < ranks; ++i)
    tokens.push_back(std::string("\xff") + static_cast<char>(i >> 16) + static_cast<char>(i >> 8) +
                     static_cast<char>(i));
  tokens.resize(ranks);
  std::string file;
  for (size_t r = 0; r < tokens.size(); ++r) file += base64(tokens[r]) + " " + std::to_string(r) + "\n";
  return file;
}

class TiktokenBpeTest : public atl::test::TempDirTest {};

TEST_F(TiktokenBpeTest, EncodesDecodesAndCarriesLlama3sSpecialTokens) {
  const std::string file = rank_file();
  const TiktokenBpe tokenizer(file, "tokenizer.model");
  EXPECT_EQ(tokenizer.vocab_size(), 128256);
  EXPECT_EQ(tokenizer.bos_id(), 128000);
  EXPECT_EQ(tokenizer.eos_id(), 128001);
  EXPECT_EQ(tokenizer.description(), "tiktoken BPE, Llama 3 (vocab 128256)");
  EXPECT_EQ(tokenizer.encode("hi hi"), (std::vector<uint32_t>{256, ' ', 256}));
  EXPECT_EQ(atl::runtime::encode_prompt(tokenizer, "hi hi"), (std::vector<uint32_t>{128000, 256, ' ', 256}))
      << "a prompt begins as a prepared document: <|begin_of_text|> first";
  EXPECT_EQ(tokenizer.decode({128000, 256, 128011, 128012, 128255, 128256}),
            "<|begin_of_text|>hi<|image|><|reserved_special_token_2|><|reserved_special_token_245|>")
      << "specials decode to their text, ids past the vocab to nothing";
  EXPECT_EQ(tokenizer.byte_length(256), 2);
  EXPECT_EQ(tokenizer.byte_length(128000), 0);
  const std::string spelled = "<|begin_of_text|>";
  const std::vector<uint32_t> ids = tokenizer.encode(spelled);
  EXPECT_EQ(ids.size(), spelled.size()) << "text spelling a special token is text";
  EXPECT_EQ(tokenizer.decode(ids), spelled);
  const std::string text = "caf\xc3\xa9 \xf0\x9f\x98\x80  hi\n\n";
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text);
  try {
    tokenizer.encode("ok \xff");
    FAIL() << "not UTF-8";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("not UTF-8 at byte 3"), std::string::npos) << e.what();
  }

  // A checkpoint carries it; data.tokenizer tells it from SentencePiece by content.
  const auto restored = atl::runtime::tokenizer_from_serialized(tokenizer.serialized());
  EXPECT_EQ(restored->description(), tokenizer.description());
  EXPECT_EQ(restored->serialized(), tokenizer.serialized());
  EXPECT_EQ(atl::runtime::load_tokenizer(write_file("tokenizer.model", file))->encode("hi hi"),
            tokenizer.encode("hi hi"));
}

TEST_F(TiktokenBpeTest, RefusesFilesThatAreNotLlama3s) {
  const auto refusal = [&](const std::string& file) {
    try {
      atl::runtime::load_tokenizer(write_file("bad.model", file));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal(rank_file(300)).find("has 300 ranks; Atoll reads Llama 3's"), std::string::npos);
  EXPECT_NE(refusal("QQ== 0\nQg== x\n").find("line 2 is not"), std::string::npos);
  EXPECT_NE(refusal("QQ== 0\nQQ== 0\n").find("line 2 repeats rank 0"), std::string::npos);
  EXPECT_NE(refusal("QQ== 1\n").find("has no token of rank 0"), std::string::npos);
  EXPECT_TRUE(TiktokenBpe::recognizes("QQ== 0\n"));
  EXPECT_FALSE(TiktokenBpe::recognizes("\x0a\x0b<unk>"));
}

}  // namespace
