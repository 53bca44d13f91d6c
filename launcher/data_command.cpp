// `atoll data prepare --out DIR [--tokenizer MODEL | --tokenizer-vocab N] [--documents [--dedupe]]
// [--val-fraction F] [--threads N] [--files-from LIST] FILE...`: text files (or documents, HTML
// included) -> llm.c token shards, byte-level (vocab 256) or with a SentencePiece model.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <set>

#include "launcher/commands.h"
#include "runtime/data/data_prepare.h"
#include "runtime/metrics/metrics.h"

namespace atl::launcher {

namespace {
constexpr const char* kDataUsage =
    "atoll data prepare --out DIR [--tokenizer MODEL | --tokenizer-vocab N] [--documents [--dedupe]] "
    "[--val-fraction F] [--threads N] [--files-from LIST] FILE...";

// The options that take no value; parse_options knows `--name value` ones only.
constexpr const char* kDataSwitches[] = {"--documents", "--dedupe"};

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
           "(default: the CPUs this process may use).\n\n"
           "--documents        every file is one document: HTML (.html, .htm, or starting <!DOCTYPE html\n"
           "                   or <html) becomes plain text without navigation, scripts and the like;\n"
           "                   other files are UTF-8 text; empty documents are skipped. A document goes\n"
           "                   to val.bin when the FNV-1a hash of its text falls in the first F of the\n"
           "                   range: none is split. DIR also gets train.txt and val.txt (the text that\n"
           "                   was tokenized) and MANIFEST.txt (what was kept and dropped, bytes, tokens).\n"
           "--dedupe           with --documents: drops a document identical to an earlier one, and each\n"
           "                   line of at least "
        << runtime::kDedupeLineBytes
        << " bytes seen before (licence footers, signatures).\n"
           "--tokenizer-vocab  trains a SentencePiece model of N pieces ("
        << runtime::kMinTrainedVocab << " to " << runtime::kMaxTrainedVocab
        << ") on the training\n"
           "                   text, writes DIR/tokenizer.model and encodes with it; not with --tokenizer.\n"
           "--files-from LIST  more input files, one path a line (blank lines ignored).\n";
    return args.empty() ? 2 : 0;
  }
  if (args[0] != "prepare")
    throw std::invalid_argument("unknown data command '" + args[0] + "'; usage: " + kDataUsage);
  const std::set<std::string> valued = {"--out",          "--tokenizer", "--tokenizer-vocab",
                                        "--val-fraction", "--threads",   "--files-from"};
  // The switches taken out first; a valued option's value is never mistaken for one.
  Args rest = {args[0]};
  std::set<std::string> switches;
  for (size_t i = 1; i < args.size(); ++i) {
    if (std::find(std::begin(kDataSwitches), std::end(kDataSwitches), args[i]) != std::end(kDataSwitches)) {
      switches.insert(args[i]);
      continue;
    }
    rest.push_back(args[i]);
    if (valued.count(args[i]) && i + 1 < args.size()) rest.push_back(args[++i]);
  }
  const Options o = parse_options(rest, 1, valued, kDataUsage);
  runtime::PrepareOptions options;
  options.inputs = o.positional;
  options.out_dir = o.get("--out", "");
  options.tokenizer = o.get("--tokenizer", options.tokenizer);
  options.val_fraction = o.real("--val-fraction", options.val_fraction);
  options.threads = static_cast<int>(o.integer("--threads", 0));
  options.files_from = o.get("--files-from", "");
  options.documents = switches.count("--documents") > 0;
  options.dedupe = switches.count("--dedupe") > 0;
  if (options.out_dir.empty())
    throw std::invalid_argument("missing --out DIR; usage: " + std::string(kDataUsage));
  if (o.has("--tokenizer") && o.has("--tokenizer-vocab"))
    throw std::invalid_argument(
        "data prepare: --tokenizer " + o.get("--tokenizer", "") + " and --tokenizer-vocab " +
        o.get("--tokenizer-vocab", "") +
        " exclude each other; pass a model to use or a vocabulary to train, not both");
  if (o.has("--tokenizer-vocab")) {
    int64_t vocab = 0;
    try {
      vocab = o.integer("--tokenizer-vocab", 0);
    } catch (const std::invalid_argument&) {
      throw std::invalid_argument("data prepare: --tokenizer-vocab " + o.get("--tokenizer-vocab", "") +
                                  " is not a whole number; pick e.g. 8192");
    }
    if (vocab < runtime::kMinTrainedVocab || vocab > runtime::kMaxTrainedVocab)
      throw std::invalid_argument("data prepare: --tokenizer-vocab " + std::to_string(vocab) +
                                  " is outside [" + std::to_string(runtime::kMinTrainedVocab) + ", " +
                                  std::to_string(runtime::kMaxTrainedVocab) + "]; pick e.g. 8192");
    options.tokenizer_vocab = static_cast<int>(vocab);
  }
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
  if (options.documents) {
    const runtime::DocumentCounts& d = r.documents;
    std::cout << "; documents: " << d.train + d.val << " kept (train " << d.train << ", val " << d.val
              << ") of " << d.inputs << ", " << d.empty << " empty";
    if (options.dedupe)
      std::cout << ", " << d.duplicate << " duplicate, " << d.emptied << " left empty by dedupe; "
                << d.duplicate_lines << " duplicate lines dropped (" << d.duplicate_line_bytes << " bytes)";
    std::cout << "; figures in " << r.manifest_path;
  }
  std::cout << "\n";
  return 0;
}

}  // namespace atl::launcher
