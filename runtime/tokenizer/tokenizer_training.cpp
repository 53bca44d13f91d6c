#include "runtime/tokenizer/tokenizer_training.h"

#include <sentencepiece_trainer.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <unordered_map>

#include "runtime/host/usable_cpus.h"
#include "text/joined.h"

namespace atl::runtime {
namespace fs = std::filesystem;

void train_tokenizer(const TokenizerTrainingOptions& options) {
  if (options.inputs.empty())
    throw std::invalid_argument("tokenizer train: no input files; pass one or more text files");
  // 256 byte pieces + <unk>, <s>, </s> + at least one merge.
  if (options.vocab < 260 || options.vocab > 1'048'576)
    throw std::invalid_argument("tokenizer train: --vocab " + std::to_string(options.vocab) +
                                " is outside [260, 1048576]; pick e.g. 8192");
  for (const std::string& input : options.inputs)
    if (!fs::is_regular_file(input))
      throw std::invalid_argument("tokenizer train: input " + input +
                                  " is not a readable file; check the path");
  const std::string inputs = text::joined(options.inputs, ",");
  const unsigned threads = static_cast<unsigned>(options.threads > 0 ? options.threads : usable_cpus());
  const std::unordered_map<std::string, std::string> args = {
      {"input", inputs},
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(options.vocab)},
      {"byte_fallback", "true"},
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "true"},
      {"character_coverage", "0.99995"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"max_sentence_length", "16384"},
      {"input_sentence_size", std::to_string(options.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(threads)},
      {"minloglevel", "2"},  // SentencePiece's own progress logging off: warnings and errors only
  };
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, nullptr, &model);
  if (!status.ok()) throw std::runtime_error("tokenizer train: SentencePiece failed: " + status.ToString());
  const fs::path out(options.out);
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  const fs::path temporary = out.string() + ".partial";
  {
    std::ofstream file(temporary, std::ios::binary);
    file.write(model.data(), static_cast<std::streamsize>(model.size()));
    if (!file) throw std::runtime_error("tokenizer train: cannot write " + temporary.string());
  }
  fs::rename(temporary, out);  // never a half-written model under the name
}

}  // namespace atl::runtime
