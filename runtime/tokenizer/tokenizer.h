// Text <-> token ids: the byte-level tokenizer (token = byte value, vocab 256), a SentencePiece
// model (subwords with byte fallback, Llama-style, `atoll tokenizer train`), Llama 3's tiktoken BPE
// (tiktoken_bpe.h) or a Hugging Face tokenizer.json (tokenizer_json_bpe.h). A checkpoint carries the
// model it was trained with (its serialized form), so sampling and export need nothing else.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace atl::runtime {

// A file of a Hugging Face model directory, by name (tokenizer.json, tokenizer_config.json, ...).
struct HuggingFaceFile {
  std::string name;
  std::string contents;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual int vocab_size() const = 0;
  virtual std::vector<uint32_t> encode(const std::string& text) const = 0;
  // Invalid ids (>= vocab_size) decode to nothing.
  virtual std::string decode(const std::vector<uint32_t>& ids) const = 0;
  // Bytes of text token `id` stands for (bits per byte: a loss in nats per token over bytes);
  // control tokens (bos, eos) stand for none.
  virtual int byte_length(uint32_t id) const = 0;
  // "bytes", "sentencepiece (vocab N)", "tiktoken BPE, Llama 3 (vocab N)" or "tokenizer.json ...".
  virtual std::string description() const = 0;
  // The model as bytes, for the checkpoint's manifest; empty for the byte-level tokenizer.
  virtual std::string serialized() const = 0;
  // What `atoll ckpt export` writes beside the weights so that transformers' AutoTokenizer loads
  // this tokenizer with the same ids; none for the byte-level one (transformers has no such class).
  // `max_length`: the model's sequence length.
  virtual std::vector<HuggingFaceFile> hugging_face_files(int max_length) const = 0;
  virtual int bos_id() const { return -1; }  // -1: none
  virtual int eos_id() const { return -1; }
};

// The byte-level tokenizer.
std::unique_ptr<Tokenizer> byte_tokenizer();
// The tokenizer of a serialized model (SentencePiece, tiktoken BPE or tokenizer.json, told apart by
// content), or the byte-level one for "". std::invalid_argument if the bytes are none of them.
std::unique_ptr<Tokenizer> tokenizer_from_serialized(const std::string& serialized);
// data.tokenizer's value: "bytes", or the path of a SentencePiece .model file, Llama 3's tiktoken
// tokenizer.model or a tokenizer.json (told apart by content). std::invalid_argument naming the file
// for a missing or malformed model.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec);
constexpr const char* kByteTokenizer = "bytes";

// The token `atoll data prepare --documents` writes before each document for this tokenizer, or -1
// when it joins documents as text.
int document_bos(const Tokenizer& tokenizer);
// A prompt's ids, begun as a prepared document begins (the document BOS, when there is one), so that
// the model continues it as it learned to continue a document's text.
std::vector<uint32_t> encode_prompt(const Tokenizer& tokenizer, const std::string& text);
// The token `atoll data prepare --documents` writes after each document when the tokenizer has an EOS
// but no BOS to put before it (Qwen 2's <|endoftext|>), or -1.
int document_eos(const Tokenizer& tokenizer);

}  // namespace atl::runtime
