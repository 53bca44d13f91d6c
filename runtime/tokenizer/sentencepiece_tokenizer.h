// A SentencePiece model as a Tokenizer (Debian's libsentencepiece).
#pragma once

#include <memory>
#include <string>

#include "runtime/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace atl::runtime {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // `serialized`: a .model file's bytes; `source` names it in errors. std::invalid_argument with
  // one line if it is not a SentencePiece model.
  SentencePieceTokenizer(const std::string& serialized, const std::string& source);
  ~SentencePieceTokenizer() override;

  int vocab_size() const override;
  std::vector<uint32_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<uint32_t>& ids) const override;
  int byte_length(uint32_t id) const override;
  std::string description() const override;
  std::string serialized() const override { return serialized_; }
  // tokenizer.model and a tokenizer_config.json for transformers' LlamaTokenizer.
  std::vector<HuggingFaceFile> hugging_face_files(int max_length) const override;
  int bos_id() const override;
  int eos_id() const override;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::string serialized_;
  std::vector<int> byte_lengths_;  // per id, computed once
};

}  // namespace atl::runtime
