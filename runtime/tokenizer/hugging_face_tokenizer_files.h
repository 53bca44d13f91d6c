// What transformers reads to rebuild a tokenizer: tokenizer_config.json for a SentencePiece model
// (LlamaTokenizer) or a tokenizer.json (PreTrainedTokenizerFast), and a tokenizer.json written from
// byte-level BPE ranks, as transformers' TikTokenConverter writes it from a tiktoken file.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/byte_pair_encoding.h"

namespace atl::runtime {

// LlamaTokenizer over an `atoll tokenizer train` model: no bos/eos added and no space in front
// (the model adds none), so ids equal SentencePiece's.
std::string sentencepiece_tokenizer_config(int max_length);

// PreTrainedTokenizerFast over a tokenizer.json, with its bos and eos tokens' text ("" for none).
std::string fast_tokenizer_config(std::string_view bos, std::string_view eos, int max_length);

// A tokenizer.json of `ranks` (a token's id is its rank) behind `split_pattern` and the ByteLevel
// alphabet, `special_tokens` as added tokens after the ranks. Its merges are every split of a token
// into two tokens, ordered by the token's rank, then by the two halves' ranks; with ignore_merges,
// a piece that is a token is that token. So the tokenizers package gives tiktoken's ids: at each
// step BPE merges the pair whose merge comes first, which is the pair whose concatenation has the
// lowest rank.
std::string byte_level_bpe_tokenizer_json(const BytePairEncoding& ranks,
                                          const std::vector<std::string>& special_tokens,
                                          std::string_view split_pattern);

}  // namespace atl::runtime
