#include "runtime/tokenizer/hugging_face_tokenizer_files.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>

#include "runtime/tokenizer/byte_level_alphabet.h"

namespace atl::runtime {
namespace {

using nlohmann::ordered_json;

// One merge: the token of rank `merged` split into the tokens of ranks `left` and `right`.
struct Merge {
  uint32_t merged, left, right;
  bool operator<(const Merge& other) const {
    return std::tie(merged, left, right) < std::tie(other.merged, other.left, other.right);
  }
};

std::vector<Merge> merges_of(const BytePairEncoding& ranks) {
  std::vector<Merge> merges;
  for (uint32_t rank = 0; rank < ranks.size(); ++rank) {
    const std::string& token = ranks.token(rank);
    for (size_t cut = 1; cut < token.size(); ++cut) {
      const uint32_t left = ranks.rank(std::string_view(token).substr(0, cut));
      const uint32_t right = ranks.rank(std::string_view(token).substr(cut));
      if (left != BytePairEncoding::kNoRank && right != BytePairEncoding::kNoRank)
        merges.push_back({rank, left, right});
    }
  }
  std::sort(merges.begin(), merges.end());
  return merges;
}

// The ByteLevel step as transformers writes it: the Split before it does the cutting.
ordered_json byte_level(bool add_prefix_space, bool trim_offsets, bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", trim_offsets},
          {"use_regex", use_regex}};
}

}  // namespace

std::string sentencepiece_tokenizer_config(int max_length) {
  const ordered_json config = {{"tokenizer_class", "LlamaTokenizer"},
                               {"add_bos_token", false},
                               {"add_eos_token", false},
                               {"add_prefix_space", false},
                               {"legacy", false},
                               {"bos_token", "<s>"},
                               {"eos_token", "</s>"},
                               {"unk_token", "<unk>"},
                               {"model_max_length", max_length}};
  return config.dump(2) + "\n";
}

std::string fast_tokenizer_config(std::string_view bos, std::string_view eos, int max_length) {
  ordered_json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                         {"clean_up_tokenization_spaces", false}};
  if (!bos.empty()) config["bos_token"] = bos;
  if (!eos.empty()) config["eos_token"] = eos;
  config["model_max_length"] = max_length;
  return config.dump(2) + "\n";
}

std::string byte_level_bpe_tokenizer_json(const BytePairEncoding& ranks,
                                          const std::vector<std::string>& special_tokens,
                                          std::string_view split_pattern) {
  std::vector<std::string> texts(ranks.size());  // each token in the ByteLevel alphabet
  std::vector<std::pair<const std::string, ordered_json>> entries;
  entries.reserve(ranks.size());
  for (uint32_t rank = 0; rank < ranks.size(); ++rank) {
    texts[rank] = byte_level_text(ranks.token(rank));
    entries.emplace_back(texts[rank], rank);
  }
  // In rank order, built at once: inserting key by key searches the keys so far each time.
  const ordered_json vocab = ordered_json::object_t(entries.begin(), entries.end());
  ordered_json merges = ordered_json::array();
  for (const Merge& merge : merges_of(ranks)) merges.push_back({texts[merge.left], texts[merge.right]});
  ordered_json added = ordered_json::array();
  for (size_t i = 0; i < special_tokens.size(); ++i)
    added.push_back({{"id", ranks.size() + i},
                     {"content", special_tokens[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  const ordered_json split = {{"type", "Split"},
                              {"pattern", {{"Regex", split_pattern}}},
                              {"behavior", "Isolated"},
                              {"invert", false}};
  const ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {split, byte_level(false, true, false)}}}},
      {"post_processor", byte_level(true, false, true)},
      {"decoder", byte_level(true, true, true)},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", true},
        {"vocab", vocab},
        {"merges", merges}}}};
  return tokenizer.dump() + "\n";
}

}  // namespace atl::runtime
