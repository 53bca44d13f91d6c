// Hugging Face tokenizer.json in parts: the byte-level alphabet, merging by the merge list, and the
// Tokenizer over a small file made here with refusals of what it does not read
// (tests/interop/tokenizer_json_check.py checks Llama 3's converted file id for id against tokenizers).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/tokenizer/byte_level_alphabet.h"
#include "runtime/tokenizer/merge_list_bpe.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/tokenizer_json_bpe.h"
#include "tests/small_tokenizer_json.h"

namespace {

using atl::runtime::MergeListBpe;
using atl::runtime::TokenizerJsonBpe;
using atl::test::small_tokenizer_json;

TEST(ByteLevelAlphabet, MapsCharactersBackToBytes) {
  EXPECT_EQ(atl::runtime::bytes_of_byte_level_text("\xc4\xa0hello\xc4\x8a"), " hello\n");  // Ġ, Ċ
  EXPECT_EQ(atl::runtime::bytes_of_byte_level_text("\xc4\x80"), std::string(1, '\0'));     // Ā
  EXPECT_EQ(atl::runtime::bytes_of_byte_level_text("\xc3\xa9"), "\xe9");                   // é: Latin-1 byte
  EXPECT_EQ(atl::runtime::bytes_of_byte_level_text(" "), std::nullopt) << "a space is not in the alphabet";
}

TEST(ByteLevelAlphabet, WritesEveryByteAsTheCharacterThatReadsBack) {
  EXPECT_EQ(atl::runtime::byte_level_text(" hello\n"), "\xc4\xa0hello\xc4\x8a");
  EXPECT_EQ(atl::runtime::byte_level_text("\xe9"), "\xc3\xa9");
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte.push_back(static_cast<char>(b));
  EXPECT_EQ(atl::runtime::bytes_of_byte_level_text(atl::runtime::byte_level_text(every_byte)), every_byte);
}

std::unordered_map<std::string, uint32_t> byte_vocab() {
  std::unordered_map<std::string, uint32_t> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace(std::string(1, static_cast<char>(b)), b);
  return vocab;
}

std::vector<uint32_t> merged(const MergeListBpe& bpe, const std::string& word) {
  std::vector<uint32_t> ids;
  bpe.encode(word, ids);
  return ids;
}

TEST(MergeListBpe, MergesTheEarliestMergeLeftmostFirst) {
  auto vocab = byte_vocab();
  vocab.emplace("aa", 300);
  vocab.emplace("bc", 301);
  vocab.emplace("ab", 302);
  const MergeListBpe bpe(vocab, {{"b", "c"}, {"a", "a"}, {"a", "b"}}, false);
  EXPECT_EQ(merged(bpe, "aaa"), (std::vector<uint32_t>{300, 'a'}));
  EXPECT_EQ(merged(bpe, "abcx"), (std::vector<uint32_t>{'a', 301, 'x'}))
      << "merge 0 (b c) before merge 2 (a b)";
  EXPECT_THROW(MergeListBpe(vocab, {{"x", "y"}}, false), std::invalid_argument) << "xy is not in the vocab";
}

TEST(TokenizerJsonBpe, EncodesDecodesAndIsCarried) {
  const std::string file = small_tokenizer_json().dump();
  const auto tokenizer = atl::runtime::tokenizer_from_serialized(file);
  EXPECT_EQ(tokenizer->description(), "tokenizer.json byte-level BPE, Llama 3 pre-tokenizer (vocab 261)");
  EXPECT_EQ(tokenizer->encode("hello hell"), (std::vector<uint32_t>{258, 'o', ' ', 258}));
  EXPECT_EQ(tokenizer->bos_id(), 259);
  EXPECT_EQ(tokenizer->eos_id(), 260);
  EXPECT_EQ(tokenizer->decode({259, 258, 'o', 999}), "<|begin_of_text|>hello");
  EXPECT_EQ(tokenizer->byte_length(258), 4);
  EXPECT_EQ(tokenizer->byte_length(259), 0);
  EXPECT_EQ(tokenizer->encode("<|begin_of_text|>").size(), 17u) << "text spelling a special token is text";
  EXPECT_EQ(tokenizer->serialized(), file);
  EXPECT_THROW(tokenizer->encode("\xff"), std::invalid_argument);
}

TEST(TokenizerJsonBpe, RefusesWhatItDoesNotRead) {
  const auto refusal = [](const nlohmann::json& j) {
    try {
      TokenizerJsonBpe(j.dump(), "tokenizer.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  nlohmann::json gpt2 = small_tokenizer_json();
  gpt2["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  EXPECT_NE(refusal(gpt2).find("not Split then ByteLevel"), std::string::npos);
  nlohmann::json normalized = small_tokenizer_json();
  normalized["normalizer"] = {{"type", "NFC"}};
  EXPECT_NE(refusal(normalized).find("has a normalizer"), std::string::npos);
  nlohmann::json added = small_tokenizer_json();
  added["added_tokens"][0]["special"] = false;
  EXPECT_NE(refusal(added).find("is not special"), std::string::npos);
  nlohmann::json unigram = small_tokenizer_json();
  unigram["model"]["type"] = "Unigram";
  EXPECT_NE(refusal(unigram).find("the model is not BPE"), std::string::npos);
  nlohmann::json far_id = small_tokenizer_json();
  far_id["added_tokens"][0]["id"] = 4000000000u;
  EXPECT_NE(refusal(far_id).find("token id 4000000000 is not below the 261 tokens listed"),
            std::string::npos);
  far_id["added_tokens"][0]["id"] = -1;
  EXPECT_NE(refusal(far_id).find("token id -1 is not below"), std::string::npos);
  EXPECT_THROW(TokenizerJsonBpe("{\"model\": ", "tokenizer.json"), std::invalid_argument);
}

}  // namespace
