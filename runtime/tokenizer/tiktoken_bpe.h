// Llama 3's tokenizer: a tiktoken BPE rank file (its tokenizer.model, one "base64(token) rank" per
// line), Llama 3's split pattern (llama3_split.h) and its 256 special tokens after the ranks
// (<|begin_of_text|> = bos, <|end_of_text|> = eos, ...; as Meta's tokenizer.py in llama-models
// defines them). Text that spells a special token is encoded as ordinary text, as Meta's encode does
// by default. Ids equal tiktoken's (tests/interop/tiktoken_check.py).
#pragma once

#include <string>
#include <string_view>

#include "runtime/tokenizer/byte_pair_encoding.h"
#include "runtime/tokenizer/tokenizer.h"

namespace atl::runtime {

class TiktokenBpe final : public Tokenizer {
 public:
  // Ranks in Llama 3's tokenizer.model; another count is another model (Llama 4's has 200000 and
  // another split pattern), refused rather than encoded wrong.
  static constexpr size_t kLlama3Ranks = 128000;
  static constexpr int kSpecialTokens = 256;

  // Whether `bytes` is a rank file (its first line "base64 rank") or this class's serialized form.
  static bool recognizes(std::string_view bytes);
  // `bytes`: a rank file or serialized(); `source` names it in errors. std::invalid_argument with one
  // line for a malformed file or one that is not Llama 3's.
  TiktokenBpe(std::string_view bytes, const std::string& source);

  int vocab_size() const override;
  // std::invalid_argument naming the byte offset if `text` is not UTF-8: tiktoken encodes Unicode
  // strings, so bytes that are not UTF-8 have no ids to match.
  std::vector<uint32_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<uint32_t>& ids) const override;  // specials as their text
  int byte_length(uint32_t id) const override;
  std::string description() const override;
  // A header line naming the kind, then the rank file.
  std::string serialized() const override;
  // A tokenizer.json of the same byte-level BPE (what transformers' TikTokenConverter writes) and a
  // tokenizer_config.json for PreTrainedTokenizerFast.
  std::vector<HuggingFaceFile> hugging_face_files(int max_length) const override;
  int bos_id() const override { return static_cast<int>(ranks_.size()); }
  int eos_id() const override { return static_cast<int>(ranks_.size()) + 1; }

 private:
  std::string rank_file_;
  BytePairEncoding ranks_;
};

}  // namespace atl::runtime
