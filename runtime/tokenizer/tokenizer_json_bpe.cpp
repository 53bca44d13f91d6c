#include "runtime/tokenizer/tokenizer_json_bpe.h"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_map>

#include "runtime/tokenizer/byte_level_alphabet.h"
#include "runtime/tokenizer/hugging_face_tokenizer_files.h"
#include "runtime/tokenizer/llama3_split.h"
#include "text/one_line.h"

namespace atl::runtime {
namespace {

using nlohmann::json;

class Refusal {
 public:
  explicit Refusal(const std::string& source) : source_(source) {}
  [[noreturn]] void operator()(const std::string& what) const {
    throw std::invalid_argument(
        source_ + ": " + what +
        "; Atoll reads byte-level BPE tokenizer.json files with Llama 3's pre-tokenizer");
  }

 private:
  std::string source_;
};

bool is_null_or(const json& j, const char* key, const json& value) {
  return !j.contains(key) || j[key].is_null() || j[key] == value;
}

// Split by Llama 3's pattern (isolated), then ByteLevel without its own regex or prefix space.
void check_pre_tokenizer(const json& pre, const Refusal& refuse) {
  const json steps =
      pre.value("type", "") == "Sequence" ? pre.value("pretokenizers", json::array()) : json::array();
  if (steps.size() != 2) refuse("the pre-tokenizer is not Split then ByteLevel");
  const json& split = steps[0];
  const json& byte_level = steps[1];
  if (split.value("type", "") != "Split" || !split.contains("pattern") ||
      !split["pattern"].contains("Regex") || split["pattern"]["Regex"] != kLlama3SplitPattern ||
      split.value("behavior", "") != "Isolated" || split.value("invert", true))
    refuse("the pre-tokenizer's Split is not by Llama 3's pattern (Isolated, not inverted)");
  if (byte_level.value("type", "") != "ByteLevel" || byte_level.value("use_regex", true) ||
      byte_level.value("add_prefix_space", true))
    refuse("the pre-tokenizer's ByteLevel uses its own regex or adds a prefix space");
}

std::string token_bytes(const std::string& text, const Refusal& refuse) {
  std::optional<std::string> bytes = bytes_of_byte_level_text(text);
  if (!bytes) refuse("token '" + text::one_line(text) + "' is not in the byte-level alphabet");
  return *bytes;
}

std::pair<std::string, std::string> merge_pair(const json& merge, const Refusal& refuse) {
  if (merge.is_array() && merge.size() == 2)
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  if (merge.is_string()) {
    const std::string s = merge.get<std::string>();
    const size_t space = s.find(' ');
    if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos)
      return {s.substr(0, space), s.substr(space + 1)};
  }
  refuse("a merge is neither \"left right\" nor [left, right]");
}

// An id below `limit` (the number of tokens the file lists): ids index a table.
uint32_t token_id(const json& id, size_t limit, const Refusal& refuse) {
  if (!id.is_number_unsigned() || id.get<uint64_t>() >= limit)
    refuse("token id " + text::one_line(id.dump()) + " is not below the " + std::to_string(limit) +
           " tokens listed");
  return id.get<uint32_t>();
}

}  // namespace

bool TokenizerJsonBpe::recognizes(std::string_view bytes) {
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && bytes[first] == '{' &&
         bytes.find("\"model\"") != std::string_view::npos;
}

TokenizerJsonBpe::TokenizerJsonBpe(std::string json_text, const std::string& source)
    : json_(std::move(json_text)) {
  const Refusal refuse(source);
  json j;
  try {
    j = json::parse(json_);
  } catch (const json::exception& e) {
    throw std::invalid_argument(source + " is not JSON (" + text::one_line(e.what()) + ")");
  }
  try {
    const json& model = j.at("model");
    if (model.value("type", "") != "BPE") refuse("the model is not BPE");
    for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"})
      if (!is_null_or(model, key, json())) refuse(std::string("the model sets ") + key);
    if (!is_null_or(model, "byte_fallback", false)) refuse("the model sets byte_fallback");
    if (!is_null_or(j, "normalizer", json())) refuse("it has a normalizer");
    check_pre_tokenizer(j.at("pre_tokenizer"), refuse);

    const size_t listed = model.at("vocab").size() + j.value("added_tokens", json::array()).size();
    std::unordered_map<std::string, uint32_t> vocab;
    for (const auto& [text, id] : model.at("vocab").items()) {
      const uint32_t i = token_id(id, listed, refuse);
      std::string bytes = token_bytes(text, refuse);
      if (i >= token_bytes_.size()) token_bytes_.resize(i + 1), added_.resize(i + 1);
      token_bytes_[i] = bytes;
      vocab.emplace(std::move(bytes), i);
    }
    std::vector<std::pair<std::string, std::string>> merges;
    for (const json& merge : model.at("merges")) {
      const auto [left, right] = merge_pair(merge, refuse);
      merges.emplace_back(token_bytes(left, refuse), token_bytes(right, refuse));
    }
    bpe_ = std::make_unique<MergeListBpe>(vocab, merges, model.value("ignore_merges", false));

    for (const json& added : j.value("added_tokens", json::array())) {
      const std::string content = added.at("content").get<std::string>();
      if (!added.value("special", false) || added.value("lstrip", false) || added.value("rstrip", false) ||
          added.value("single_word", false))
        refuse("added token '" + text::one_line(content) + "' is not special or strips spaces");
      const uint32_t i = token_id(added.at("id"), listed, refuse);
      if (i >= token_bytes_.size()) token_bytes_.resize(i + 1), added_.resize(i + 1);
      token_bytes_[i] = content;
      added_[i] = true;
      if (content == "<|begin_of_text|>" || content == "<s>") bos_id_ = static_cast<int>(i);
      if (content == "<|end_of_text|>" || content == "</s>" || content == "<|endoftext|>")
        eos_id_ = static_cast<int>(i);
    }
  } catch (const json::exception& e) {
    throw std::invalid_argument(source + " is not a tokenizer.json (" + text::one_line(e.what()) + ")");
  }
}

std::vector<uint32_t> TokenizerJsonBpe::encode(const std::string& text) const {
  return encode_llama3_pieces(
      text, "a tokenizer.json",
      [this](std::string_view piece, std::vector<uint32_t>& ids) { bpe_->encode(piece, ids); });
}

std::string TokenizerJsonBpe::decode(const std::vector<uint32_t>& ids) const {
  std::string text;
  for (uint32_t id : ids)
    if (id < token_bytes_.size()) text += token_bytes_[id];
  return text;
}

int TokenizerJsonBpe::byte_length(uint32_t id) const {
  return id < token_bytes_.size() && !added_[id] ? static_cast<int>(token_bytes_[id].size()) : 0;
}

std::string TokenizerJsonBpe::description() const {
  return "tokenizer.json byte-level BPE, Llama 3 pre-tokenizer (vocab " + std::to_string(vocab_size()) + ")";
}

std::vector<HuggingFaceFile> TokenizerJsonBpe::hugging_face_files(int max_length) const {
  const auto text_of = [&](int id) { return id < 0 ? std::string() : token_bytes_[static_cast<size_t>(id)]; };
  return {{"tokenizer.json", json_},
          {"tokenizer_config.json", fast_tokenizer_config(text_of(bos_id_), text_of(eos_id_), max_length)}};
}

}  // namespace atl::runtime
