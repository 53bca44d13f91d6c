#include "runtime/tokenizer/tiktoken_bpe.h"

#include <array>
#include <charconv>
#include <stdexcept>

#include "runtime/tokenizer/hugging_face_tokenizer_files.h"
#include "runtime/tokenizer/llama3_split.h"

namespace atl::runtime {
namespace {

constexpr std::string_view kSerializedHeader = "atoll-tokenizer tiktoken-bpe llama3\n";

// Meta's tokenizer.py: these, then <|reserved_special_token_2|> onwards up to 256 in all.
constexpr std::array<std::string_view, 12> kNamedSpecialTokens = {"<|begin_of_text|>",
                                                                  "<|end_of_text|>",
                                                                  "<|reserved_special_token_0|>",
                                                                  "<|reserved_special_token_1|>",
                                                                  "<|finetune_right_pad_id|>",
                                                                  "<|step_id|>",
                                                                  "<|start_header_id|>",
                                                                  "<|end_header_id|>",
                                                                  "<|eom_id|>",
                                                                  "<|eot_id|>",
                                                                  "<|python_tag|>",
                                                                  "<|image|>"};

std::string special_token(int index) {
  if (index < static_cast<int>(kNamedSpecialTokens.size())) return std::string(kNamedSpecialTokens[index]);
  return "<|reserved_special_token_" +
         std::to_string(2 + index - static_cast<int>(kNamedSpecialTokens.size())) + "|>";
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with padding; false if `text` is not that.
bool decode_base64(std::string_view text, std::string& out) {
  out.clear();
  if (text.empty() || text.size() % 4 != 0) return false;
  size_t padding = 0;
  while (padding < 2 && text[text.size() - 1 - padding] == '=') ++padding;
  uint32_t bits = 0;
  int count = 0;
  for (size_t i = 0; i < text.size() - padding; ++i) {
    const int value = base64_value(text[i]);
    if (value < 0) return false;
    bits = bits << 6 | static_cast<uint32_t>(value);
    if ((count += 6) >= 8) {
      count -= 8;
      out.push_back(static_cast<char>(bits >> count & 0xFF));
    }
  }
  return true;
}

bool parse_rank_line(std::string_view line, std::string& token, size_t& rank) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || !decode_base64(line.substr(0, space), token)) return false;
  const std::string_view digits = line.substr(space + 1);
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  return error == std::errc() && end == digits.data() + digits.size() && !digits.empty();
}

std::string_view first_line(std::string_view bytes) {
  return bytes.substr(0, bytes.find('\n'));
}

std::string_view without_header(std::string_view bytes) {
  return bytes.starts_with(kSerializedHeader) ? bytes.substr(kSerializedHeader.size()) : bytes;
}

// tokens[rank] of a rank file whose ranks are 0..n-1, each once.
std::vector<std::string> parse_rank_file(std::string_view file, const std::string& source) {
  std::vector<std::string> tokens;
  std::vector<bool> seen;
  std::string token;
  size_t line_number = 0;
  for (size_t at = 0; at < file.size();) {
    const size_t newline = std::min(file.find('\n', at), file.size());
    const std::string_view line = file.substr(at, newline - at);
    at = newline + 1;
    ++line_number;
    size_t rank = 0;
    if (!parse_rank_line(line, token, rank) || rank >= file.size())
      throw std::invalid_argument(source + " line " + std::to_string(line_number) +
                                  " is not \"base64(token) rank\"; pass Llama 3's tokenizer.model");
    if (rank >= tokens.size()) tokens.resize(rank + 1), seen.resize(rank + 1);
    if (seen[rank])
      throw std::invalid_argument(source + " line " + std::to_string(line_number) + " repeats rank " +
                                  std::to_string(rank));
    seen[rank] = true;
    tokens[rank] = token;
  }
  for (size_t rank = 0; rank < seen.size(); ++rank)
    if (!seen[rank]) throw std::invalid_argument(source + " has no token of rank " + std::to_string(rank));
  if (tokens.size() != TiktokenBpe::kLlama3Ranks)
    throw std::invalid_argument(
        source + " has " + std::to_string(tokens.size()) + " ranks; Atoll reads Llama 3's tokenizer.model (" +
        std::to_string(TiktokenBpe::kLlama3Ranks) + " ranks, its split pattern and special tokens)");
  return tokens;
}

BytePairEncoding ranks_of(std::string_view rank_file, const std::string& source) {
  try {
    return BytePairEncoding(parse_rank_file(rank_file, source));
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    throw std::invalid_argument(what.starts_with(source) ? what : source + ": " + what);
  }
}

}  // namespace

bool TiktokenBpe::recognizes(std::string_view bytes) {
  std::string token;
  size_t rank = 0;
  return bytes.starts_with(kSerializedHeader) || parse_rank_line(first_line(bytes), token, rank);
}

TiktokenBpe::TiktokenBpe(std::string_view bytes, const std::string& source)
    : rank_file_(without_header(bytes)), ranks_(ranks_of(rank_file_, source)) {}

int TiktokenBpe::vocab_size() const {
  return static_cast<int>(ranks_.size()) + kSpecialTokens;
}

std::vector<uint32_t> TiktokenBpe::encode(const std::string& text) const {
  return encode_llama3_pieces(
      text, "Llama 3's tokenizer",
      [this](std::string_view piece, std::vector<uint32_t>& ids) { ranks_.encode(piece, ids); });
}

std::string TiktokenBpe::decode(const std::vector<uint32_t>& ids) const {
  std::string text;
  for (uint32_t id : ids) {
    if (id < ranks_.size())
      text += ranks_.token(id);
    else if (id < static_cast<uint32_t>(vocab_size()))
      text += special_token(static_cast<int>(id - ranks_.size()));
  }
  return text;
}

int TiktokenBpe::byte_length(uint32_t id) const {
  return id < ranks_.size() ? static_cast<int>(ranks_.token(id).size()) : 0;
}

std::string TiktokenBpe::description() const {
  return "tiktoken BPE, Llama 3 (vocab " + std::to_string(vocab_size()) + ")";
}

std::string TiktokenBpe::serialized() const {
  return std::string(kSerializedHeader) + rank_file_;
}

std::vector<HuggingFaceFile> TiktokenBpe::hugging_face_files(int max_length) const {
  std::vector<std::string> specials;
  for (int i = 0; i < kSpecialTokens; ++i) specials.push_back(special_token(i));
  return {{"tokenizer.json", byte_level_bpe_tokenizer_json(ranks_, specials, kLlama3SplitPattern)},
          {"tokenizer_config.json", fast_tokenizer_config(specials[0], specials[1], max_length)}};
}

}  // namespace atl::runtime
