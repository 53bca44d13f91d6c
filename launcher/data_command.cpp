// `atoll data prepare --out DIR [--tokenizer MODEL] [--val-fraction F] [--threads N] FILE...`: text
// files -> llm.c token shards, byte-level (vocab 256) or with a SentencePiece model.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "launcher/commands.h"
#include "runtime/data/data_prepare.h"
#include "runtime/metrics/metrics.h"

namespace atl::launcher {

namespace {
constexpr const char* kDataUsage =
    "atoll data prepare --out DIR [--tokenizer MODEL] [--val-fraction F] [--threads N] FILE...";

// A progress bar on a terminal (redrawn in place), nothing elsewhere (logs get the summary line).
std::function<void(int64_t, int64_t)> progress_bar() {
  if (!isatty(STDERR_FILENO)) return {};
  return [](int64_t done, int64_t total) {
    const int width = 30, filled = total > 0 ? static_cast<int>(width * done / total) : width;
    std::fprintf(stderr, "\rencoding [%s%s] %3d%% of %s", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(),
                 total > 0 ? static_cast<int>(100 * done / total) : 100,
                 runtime::format_bytes(static_cast<double>(total)).c_str());
    if (done >= total) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

}  // namespace

int data_command(const Args& args) {
  if (wants_help(args) || args.empty()) {
    std::cout
        << "usage: " << kDataUsage
        << "\n\nTokenizes the text files and writes DIR/train.bin and DIR/val.bin (llm.c shards): "
           "the last F of\nthe text's bytes (default 0.05) go to val.bin. MODEL: a SentencePiece model "
           "(atoll tokenizer\ntrain), copied to DIR/tokenizer.model for data.tokenizer; default: bytes "
           "(vocab 256). Shards\nhold uint16 tokens up to vocab 65536, uint32 above. N: encoding threads "
           "(default: the cores).\n";
    return args.empty() ? 2 : 0;
  }
  if (args[0] != "prepare")
    throw std::invalid_argument("unknown data command '" + args[0] + "'; usage: " + kDataUsage);
  const Options o =
      parse_options(args, 1, {"--out", "--tokenizer", "--val-fraction", "--threads"}, kDataUsage);
  runtime::PrepareOptions options;
  options.inputs = o.positional;
  options.out_dir = o.get("--out", "");
  options.tokenizer = o.get("--tokenizer", options.tokenizer);
  options.val_fraction = o.real("--val-fraction", options.val_fraction);
  options.threads = static_cast<int>(o.integer("--threads", 0));
  if (options.out_dir.empty())
    throw std::invalid_argument("missing --out DIR; usage: " + std::string(kDataUsage));
  options.progress = progress_bar();
  const runtime::PrepareResult r = runtime::prepare_shards(options);
  std::cout << "wrote " << r.train_path << " (" << r.train_tokens << " tokens, " << r.train_bytes
            << " bytes of text) and " << r.val_path << " (" << r.val_tokens << " tokens, " << r.val_bytes
            << " bytes), uint" << 8 * r.bytes_per_token << " tokens";
  if (!r.tokenizer_path.empty())
    std::cout << ", "
              << static_cast<double>(r.train_bytes + r.val_bytes) /
                     static_cast<double>(r.train_tokens + r.val_tokens)
              << " bytes per token; the tokenizer is in " << r.tokenizer_path;
  std::cout << "\n";
  return 0;
}

}  // namespace atl::launcher
