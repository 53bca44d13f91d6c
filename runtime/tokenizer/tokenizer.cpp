#include "runtime/tokenizer/tokenizer.h"

#include <fstream>
#include <iterator>
#include <stdexcept>

#include "runtime/tokenizer/sentencepiece_tokenizer.h"
#include "runtime/tokenizer/tiktoken_bpe.h"
#include "runtime/tokenizer/tokenizer_json_bpe.h"

namespace atl::runtime {
namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  int vocab_size() const override { return 256; }
  std::vector<uint32_t> encode(const std::string& text) const override {
    return std::vector<uint32_t>(reinterpret_cast<const unsigned char*>(text.data()),
                                 reinterpret_cast<const unsigned char*>(text.data()) + text.size());
  }
  std::string decode(const std::vector<uint32_t>& ids) const override {
    std::string text;
    for (uint32_t id : ids)
      if (id < 256) text.push_back(static_cast<char>(id));
    return text;
  }
  int byte_length(uint32_t) const override { return 1; }
  std::string description() const override { return kByteTokenizer; }
  std::string serialized() const override { return ""; }
  std::vector<HuggingFaceFile> hugging_face_files(int) const override { return {}; }
};

std::unique_ptr<Tokenizer> model_tokenizer(const std::string& serialized, const std::string& source) {
  if (TiktokenBpe::recognizes(serialized)) return std::make_unique<TiktokenBpe>(serialized, source);
  if (TokenizerJsonBpe::recognizes(serialized)) return std::make_unique<TokenizerJsonBpe>(serialized, source);
  return std::make_unique<SentencePieceTokenizer>(serialized, source);
}

}  // namespace

std::unique_ptr<Tokenizer> byte_tokenizer() {
  return std::make_unique<ByteTokenizer>();
}

std::unique_ptr<Tokenizer> tokenizer_from_serialized(const std::string& serialized) {
  if (serialized.empty()) return byte_tokenizer();
  return model_tokenizer(serialized, "the checkpoint's tokenizer");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  if (spec == kByteTokenizer) return byte_tokenizer();
  std::ifstream in(spec, std::ios::binary);
  if (!in)
    throw std::invalid_argument(
        "data.tokenizer: " + spec +
        " cannot be read; pass a SentencePiece model (atoll tokenizer train), Llama 3's tokenizer.model or "
        "bytes");
  const std::string serialized{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return model_tokenizer(serialized, spec);
}

// Every tokenizer with a BOS frames documents with it (SentencePiece's <s> as Llama 2 does, Llama 3's
// <|begin_of_text|>), so the loader finds each document's start by that token; bytes have none.
int document_bos(const Tokenizer& tokenizer) {
  return tokenizer.bos_id();
}

int document_eos(const Tokenizer& tokenizer) {
  return tokenizer.bos_id() >= 0 ? -1 : tokenizer.eos_id();
}

std::vector<uint32_t> encode_prompt(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<uint32_t> ids;
  if (const int bos = document_bos(tokenizer); bos >= 0) ids.push_back(static_cast<uint32_t>(bos));
  const std::vector<uint32_t> text_ids = tokenizer.encode(text);
  ids.insert(ids.end(), text_ids.begin(), text_ids.end());
  return ids;
}

}  // namespace atl::runtime
