// A Hugging Face tokenizer.json with a byte-level BPE model (merges, the ByteLevel alphabet) and
// Llama 3's pre-tokenizer (Split by its pattern, then ByteLevel without its own regex): what
// transformers' converter writes for Llama 3's tokenizer.model. Ids equal the tokenizers package's
// with encode_special_tokens (tests/interop/tokenizer_json_check.py): text spelling a special token
// is text; the post-processor (a bos template) is not applied, as with add_special_tokens=False.
// Other pre-tokenizers, normalizers, and added tokens that are not special or strip spaces are
// refused in one line rather than encoded differently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/merge_list_bpe.h"
#include "runtime/tokenizer/tokenizer.h"

namespace atl::runtime {

class TokenizerJsonBpe final : public Tokenizer {
 public:
  // Whether `bytes` looks like a tokenizer.json (a JSON object naming a "model").
  static bool recognizes(std::string_view bytes);
  // `json`: the file's text; `source` names it in errors. std::invalid_argument with one line for
  // a file that is not JSON or holds what this class does not read.
  TokenizerJsonBpe(std::string json, const std::string& source);

  int vocab_size() const override { return static_cast<int>(token_bytes_.size()); }
  // std::invalid_argument naming the byte offset if `text` is not UTF-8 (tokenizers encodes strings).
  std::vector<uint32_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<uint32_t>& ids) const override;  // added tokens as their text
  int byte_length(uint32_t id) const override;
  std::string description() const override;
  std::string serialized() const override { return json_; }  // the file itself
  // The file itself and a tokenizer_config.json for PreTrainedTokenizerFast.
  std::vector<HuggingFaceFile> hugging_face_files(int max_length) const override;
  // The added tokens named <|begin_of_text|> / <s> and <|end_of_text|> / </s> / <|endoftext|>.
  int bos_id() const override { return bos_id_; }
  int eos_id() const override { return eos_id_; }

 private:
  std::string json_;
  std::unique_ptr<MergeListBpe> bpe_;
  std::vector<std::string> token_bytes_;  // by id
  std::vector<bool> added_;               // by id: an added (special) token
  int bos_id_ = -1;
  int eos_id_ = -1;
};

}  // namespace atl::runtime
