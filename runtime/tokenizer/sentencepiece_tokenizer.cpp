#include "runtime/tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <stdexcept>

#include "runtime/tokenizer/hugging_face_tokenizer_files.h"
#include "text/one_line.h"

namespace atl::runtime {
namespace {

// Bytes of text a piece stands for: "▁" (U+2581, 3 bytes in UTF-8) is one space; a byte-fallback
// piece ("<0x0A>") one byte; control and unknown pieces none.
int piece_bytes(const sentencepiece::SentencePieceProcessor& sp, int id) {
  if (sp.IsControl(id) || sp.IsUnknown(id)) return 0;
  if (sp.IsByte(id)) return 1;
  static constexpr std::string_view kSpace = "\xe2\x96\x81";
  const std::string& piece = sp.IdToPiece(id);
  int bytes = 0;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpace.size(), kSpace) == 0) {
      bytes += 1;
      i += kSpace.size();
    } else {
      bytes += 1;
      i += 1;
    }
  }
  return bytes;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& serialized, const std::string& source)
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()), serialized_(serialized) {
  sentencepiece::util::Status status;
  try {
    status = processor_->LoadFromSerializedProto(serialized);
  } catch (const std::exception& e) {
    // Its trie builder (Darts) throws on some damaged models, e.g. one holding an empty piece.
    status = sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal, e.what());
  }
  if (!status.ok())
    throw std::invalid_argument(source + " is not a SentencePiece model (" +
                                text::one_line(status.ToString()) +
                                "); pass a SentencePiece model (atoll tokenizer train), Llama 3's "
                                "tokenizer.model or a tokenizer.json");
  byte_lengths_.resize(static_cast<size_t>(processor_->GetPieceSize()));
  for (int id = 0; id < processor_->GetPieceSize(); ++id) byte_lengths_[id] = piece_bytes(*processor_, id);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

int SentencePieceTokenizer::vocab_size() const {
  return processor_->GetPieceSize();
}

std::vector<uint32_t> SentencePieceTokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  if (!status.ok())
    throw std::runtime_error("tokenizer: encoding failed: " + text::one_line(status.ToString()));
  return std::vector<uint32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const std::vector<uint32_t>& ids) const {
  std::vector<int> valid;
  for (uint32_t id : ids)
    if (id < static_cast<uint32_t>(vocab_size())) valid.push_back(static_cast<int>(id));
  std::string text;
  const auto status = processor_->Decode(valid, &text);
  if (!status.ok())
    throw std::runtime_error("tokenizer: decoding failed: " + text::one_line(status.ToString()));
  return text;
}

int SentencePieceTokenizer::byte_length(uint32_t id) const {
  return id < byte_lengths_.size() ? byte_lengths_[id] : 0;
}

std::string SentencePieceTokenizer::description() const {
  return "sentencepiece (vocab " + std::to_string(vocab_size()) + ")";
}

int SentencePieceTokenizer::bos_id() const {
  return processor_->bos_id();
}

int SentencePieceTokenizer::eos_id() const {
  return processor_->eos_id();
}

std::vector<HuggingFaceFile> SentencePieceTokenizer::hugging_face_files(int max_length) const {
  return {{"tokenizer.model", serialized_},
          {"tokenizer_config.json", sentencepiece_tokenizer_config(max_length)}};
}

}  // namespace atl::runtime
