// `atoll data prepare --out DIR [--val-fraction F] FILE...`: text files -> llm.c token shards with
// the byte-level tokenizer (vocab 256).
#include <iostream>

#include "launcher/commands.h"
#include "runtime/data/data_prepare.h"

namespace atl::launcher {

namespace {
constexpr const char* kDataUsage = "atoll data prepare --out DIR [--val-fraction F] FILE...";
}

int data_command(const Args& args) {
  if (wants_help(args) || args.empty()) {
    std::cout << "usage: " << kDataUsage
              << "\n\nByte-tokenizes the text files (vocab 256) and writes DIR/train.bin "
              << "and DIR/val.bin (llm.c shards); the last F of the bytes (default 0.05) go to val.bin.\n";
    return args.empty() ? 2 : 0;
  }
  if (args[0] != "prepare")
    throw std::invalid_argument("unknown data command '" + args[0] + "'; usage: " + kDataUsage);
  runtime::PrepareOptions options;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw std::invalid_argument(a + " needs a value; usage: " + kDataUsage);
      return args[++i];
    };
    if (a == "--out")
      options.out_dir = value();
    else if (a == "--val-fraction")
      options.val_fraction = std::stod(value());
    else if (a.rfind("--", 0) == 0)
      throw std::invalid_argument("unknown option '" + a + "'; usage: " + kDataUsage);
    else
      options.inputs.push_back(a);
  }
  if (options.out_dir.empty())
    throw std::invalid_argument("missing --out DIR; usage: " + std::string(kDataUsage));
  const runtime::PrepareResult result = runtime::prepare_byte_shards(options);
  std::cout << "wrote " << result.train_path << " (" << result.train_tokens << " tokens) and "
            << result.val_path << " (" << result.val_tokens << " tokens)\n";
  return 0;
}

}  // namespace atl::launcher
