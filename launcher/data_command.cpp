// `atoll data prepare --out DIR [--tokenizer MODEL | --tokenizer-vocab N] [--documents [--dedupe]]
// [--text-field NAME] [--skip-bad-records] [--shard-tokens N] [--val-fraction F] [--threads N]
// [--files-from LIST] INPUT...`: text, HTML, JSONL (.gz, .zst) and Parquet files, directories and
// globs -> llm.c token shards, byte-level (vocab 256) or with a subword tokenizer.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <set>

#include "launcher/commands.h"
#include "runtime/data/data_prepare.h"
#include "runtime/metrics/metrics.h"

namespace atl::launcher {

namespace {
constexpr const char* kDataUsage =
    "atoll data prepare --out DIR [--tokenizer MODEL | --tokenizer-vocab N] [--documents [--dedupe]] "
    "[--text-field NAME] [--skip-bad-records] [--shard-tokens N] [--val-fraction F] [--threads N] "
    "[--files-from LIST] INPUT...";

// The options that take no value; parse_options knows `--name value` ones only.
constexpr const char* kDataSwitches[] = {"--documents", "--dedupe", "--skip-bad-records"};

// A progress line on a terminal (redrawn in place, at most a few times a second): input read, its
// rate and the time left; nothing elsewhere (logs get the summary line).
std::function<void(int64_t, int64_t)> progress_line() {
  if (!isatty(STDERR_FILENO)) return {};
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto last = std::make_shared<Clock::time_point>(start);
  return [start, last](int64_t done, int64_t total) {
    const Clock::time_point now = Clock::now();
    const bool end = done >= total;
    if (!end && now - *last < std::chrono::milliseconds(250)) return;
    *last = now;
    const double seconds = std::chrono::duration<double>(now - start).count();
    const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
    const double left = rate > 0 ? static_cast<double>(total - done) / rate : 0;
    std::fprintf(stderr, "\rreading %s of %s (%3d%%), %.1f MB/s, ETA %d:%02d   ",
                 runtime::format_bytes(static_cast<double>(done)).c_str(),
                 runtime::format_bytes(static_cast<double>(total)).c_str(),
                 total > 0 ? static_cast<int>(100 * done / total) : 100, rate / 1e6,
                 static_cast<int>(left) / 60, static_cast<int>(left) % 60);
    if (end) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

// "DIR/train.bin" or "3 shards DIR/train-00000.bin ..".
std::string shards_text(const std::vector<runtime::ShardSummary>& shards) {
  if (shards.size() == 1) return shards.front().path;
  return std::to_string(shards.size()) + " shards " + shards.front().path + " .. " + shards.back().path;
}

}  // namespace

int data_command(const Args& args) {
  if (wants_help(args) || args.empty()) {
    std::cout
        << "usage: " << kDataUsage
        << "\n\nTokenizes the inputs and writes DIR/train.bin and DIR/val.bin (llm.c shards): "
           "the last F of\nthe text's bytes (default 0.05) go to val.bin. MODEL: a SentencePiece model "
           "(atoll tokenizer\ntrain), Llama 3's tokenizer.model or a tokenizer.json, copied to "
           "DIR/tokenizer.model for\ndata.tokenizer; default: bytes (vocab 256). Shards hold uint16 "
           "tokens up to vocab 65536,\nuint32 above. N: encoding threads beside the reading one, up to "
           "256 (default: the CPUs\nthis process may use). INPUT: a file, a directory (its files, hidden "
           "ones left out) or a\nglob; text, HTML, JSONL (.jsonl, .jsonl.gz, .jsonl.zst) or Parquet. "
           "DIR/MANIFEST.txt lists the\nshards, their tokens, documents and inputs.\n\n"
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
           "--files-from LIST  more input files, one path a line (blank lines ignored).\n"
           "--text-field NAME  the JSONL field / Parquet column holding the text (default text).\n"
           "--skip-bad-records skip and count records that are not JSON, lack the text field or\n"
           "                   are not UTF-8 (with --documents: text files too), rather than stopping;\n"
           "                   damaged files still stop the run.\n"
           "--shard-tokens N   the most tokens in one shard (default "
        << runtime::kDefaultShardTokens
        << "); a side with more is written as\n"
           "                   train-00000.bin, train-00001.bin, ... (val-00000.bin, ...).\n"
           "JSONL and Parquet need --documents: each record is a document. With Llama 3's tokenizer\n"
           "(or a tokenizer.json with a BOS token) each document starts with that token.\n";
    return args.empty() ? 2 : 0;
  }
  if (args[0] != "prepare")
    throw std::invalid_argument("unknown data command '" + args[0] + "'; usage: " + kDataUsage);
  const std::set<std::string> valued = {"--out",     "--tokenizer",  "--tokenizer-vocab", "--val-fraction",
                                        "--threads", "--files-from", "--text-field",      "--shard-tokens"};
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
  options.skip_bad_records = switches.count("--skip-bad-records") > 0;
  options.text_field = o.get("--text-field", options.text_field);
  if (o.has("--shard-tokens")) {
    try {
      options.shard_tokens = o.integer("--shard-tokens", 0);
    } catch (const std::invalid_argument&) {
      throw std::invalid_argument("data prepare: --shard-tokens " + o.get("--shard-tokens", "") +
                                  " is not a whole number; pick e.g. 1000000000");
    }
  }
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
  options.progress = progress_line();
  const runtime::PrepareResult r = runtime::prepare_shards(options);
  std::cout << "wrote " << shards_text(r.train_shards) << " (" << r.train_tokens << " tokens, "
            << r.train_bytes << " bytes of text) and " << shards_text(r.val_shards) << " (" << r.val_tokens
            << " tokens, " << r.val_bytes << " bytes), uint" << 8 * r.bytes_per_token << " tokens";
  if (!r.tokenizer_path.empty())
    std::cout << ", "
              << static_cast<double>(r.train_bytes + r.val_bytes) /
                     static_cast<double>(r.train_tokens + r.val_tokens)
              << " bytes per token; the tokenizer is in " << r.tokenizer_path;
  if (options.documents) {
    const runtime::DocumentCounts& d = r.documents;
    std::cout << "; documents: " << d.train + d.val << " kept (train " << d.train << ", val " << d.val
              << ") of " << d.records << ", " << d.empty << " empty";
    if (options.dedupe)
      std::cout << ", " << d.duplicate << " duplicate, " << d.emptied << " left empty by dedupe; "
                << d.duplicate_lines << " duplicate lines dropped (" << d.duplicate_line_bytes << " bytes)";
    if (d.skipped > 0) std::cout << "; " << d.skipped << " bad records skipped";
  }
  std::cout << "; figures in " << r.manifest_path;
  std::cout << "\n";
  return 0;
}

}  // namespace atl::launcher
