// `atoll tokenizer train`: a SentencePiece subword model trained on text files, Llama-style (BPE,
// byte fallback so every byte sequence encodes, identity normalisation, whitespace kept as written,
// digits split; <unk> 0, <s> 1, </s> 2) but with no space added in front of the text:
// SentencePiece adds it always, transformers' LlamaTokenizer not before a leading space, so with it
// the two disagreed on 185 of 1,000 random corpus excerpts (every one starting with a space), and
// without it on none of 2,000. Encoding also becomes independent of where a text is cut into pieces.
#pragma once

#include <string>
#include <vector>

namespace atl::runtime {

struct TokenizerTrainingOptions {
  std::vector<std::string> inputs;  // text files
  int vocab = 8192;
  std::string out = "tokenizer.model";
  int threads = 0;  // 0: usable_cpus(), the CPUs this process may run on
  // Sentences (lines) sampled for training; SentencePiece's memory grows with them.
  int max_sentences = 2'000'000;
};

// Trains and writes options.out (and nothing else). std::invalid_argument with one line for no
// inputs, a missing input or a vocabulary outside [260, 65536 * 16]; std::runtime_error with
// SentencePiece's message when training fails (e.g. a vocabulary larger than the text allows).
void train_tokenizer(const TokenizerTrainingOptions& options);

}  // namespace atl::runtime
