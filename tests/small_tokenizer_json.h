// A small Hugging Face tokenizer.json made in tests: byte-level BPE with Llama 3's pre-tokenizer and
// its BOS and EOS, for tests of the tokenizer and of what is prepared and sampled with it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace atl::test {

// A byte-level tokenizer.json with Llama 3's pre-tokenizer: the 256 bytes, "he", "ll", "hell".
inline nlohmann::json small_tokenizer_json() {
  std::string alphabet[256];
  int shifted = 0;
  for (int b = 0; b < 256; ++b) {
    const bool itself = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const char32_t c = itself ? static_cast<char32_t>(b) : static_cast<char32_t>(0x100 + shifted++);
    alphabet[b] = c < 0x80
                      ? std::string(1, static_cast<char>(c))
                      : std::string{static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
  }
  nlohmann::json vocab;
  for (int b = 0; b < 256; ++b) vocab[alphabet[b]] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  const std::string pattern =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  return {
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", {"h e", {"l", "l"}, "he ll"}},
        {"ignore_merges", true}}},
      {"added_tokens",
       {{{"id", 259}, {"content", "<|begin_of_text|>"}, {"special", true}},
        {{"id", 260}, {"content", "<|end_of_text|>"}, {"special", true}}}}};
}

}  // namespace atl::test
