// `atoll tokenizer train --vocab N [--out MODEL] [--threads T] FILE...`: a SentencePiece subword
// model for `atoll data prepare --tokenizer` (runtime/tokenizer/tokenizer_training.h).
#include <iostream>

#include "launcher/commands.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/tokenizer_training.h"

namespace atl::launcher {
namespace {
constexpr const char* kTokenizerUsage =
    "atoll tokenizer train --vocab N [--out MODEL] [--threads T] FILE... | atoll tokenizer encode MODEL TEXT";
}

int tokenizer_command(const Args& args) {
  if (wants_help(args) || args.empty()) {
    std::cout
        << "usage: " << kTokenizerUsage
        << "\n\nTrains a SentencePiece BPE model with N pieces (Llama-style: byte fallback, "
           "<unk> 0, <s> 1, </s> 2)\non the text files and writes MODEL (default tokenizer.model); "
           "transformers' LlamaTokenizer reads it.\nencode: the ids of TEXT under MODEL (a .model file or "
           "bytes), space-separated.\n";
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "encode" && args.size() == 3) {
    const std::vector<uint32_t> ids = runtime::load_tokenizer(args[1])->encode(args[2]);
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
    std::cout << "\n";
    return 0;
  }
  if (args[0] != "train")
    throw std::invalid_argument("unknown tokenizer command '" + args[0] + "'; usage: " + kTokenizerUsage);
  const Options o = parse_options(args, 1, {"--vocab", "--out", "--threads"}, kTokenizerUsage);
  if (!o.has("--vocab"))
    throw std::invalid_argument(std::string("missing --vocab N; usage: ") + kTokenizerUsage);
  runtime::TokenizerTrainingOptions options;
  options.inputs = o.positional;
  options.vocab = static_cast<int>(o.integer("--vocab", options.vocab));
  options.out = o.get("--out", options.out);
  options.threads = static_cast<int>(o.integer("--threads", 0));
  runtime::train_tokenizer(options);
  std::cout << "wrote " << options.out << ": " << runtime::load_tokenizer(options.out)->description() << "\n";
  return 0;
}

}  // namespace atl::launcher
