#include "runtime/data/data_prepare.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_set>

#include "runtime/data/html_text.h"
#include "runtime/data/token_shard.h"
#include "runtime/host/usable_cpus.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/tokenizer_training.h"

namespace atl::runtime {
namespace {

namespace fs = std::filesystem;

// An input file and, for messages, where it was named ("" on the command line).
struct Input {
  std::string path;
  std::string origin;  // e.g. " (line 7 of list.txt)"
};

// A missing or non-regular input is an error rather than a silent gap in the data.
void check_input(const Input& input) {
  std::error_code error;
  const fs::file_status status = fs::status(input.path, error);
  if (!fs::exists(status))
    throw std::invalid_argument("data prepare: input " + input.path + input.origin +
                                " does not exist; check the path");
  if (!fs::is_regular_file(status))
    throw std::invalid_argument("data prepare: input " + input.path + input.origin +
                                " is not a regular file; pass text files");
}

std::string read_file(const Input& input) {
  std::ifstream in(input.path, std::ios::binary);
  if (!in)
    throw std::runtime_error("data prepare: cannot read input " + input.path + input.origin +
                             "; check its permissions");
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw std::runtime_error("data prepare: reading input " + input.path + " failed");
  return bytes;
}

// Appends the bytes of the text file to `bytes`; an empty input is an error too.
void append_file(const Input& input, std::string& bytes) {
  check_input(input);
  const size_t before = bytes.size();
  bytes += read_file(input);
  if (bytes.size() == before)
    throw std::invalid_argument("data prepare: input " + input.path + input.origin +
                                " is empty; check that it was written completely");
}

// The inputs: options.inputs, then the lines of options.files_from.
std::vector<Input> inputs_of(const PrepareOptions& options) {
  std::vector<Input> inputs;
  for (const std::string& path : options.inputs) inputs.push_back({path, ""});
  if (options.files_from.empty()) return inputs;
  const std::string& list = options.files_from;
  std::error_code error;
  const fs::file_status status = fs::status(list, error);
  if (!fs::exists(status))
    throw std::invalid_argument("data prepare: --files-from " + list +
                                " does not exist; pass a file listing one input path a line");
  if (!fs::is_regular_file(status))
    throw std::invalid_argument("data prepare: --files-from " + list +
                                " is not a regular file; pass a file listing one input path a line");
  std::ifstream in(list);
  if (!in)
    throw std::runtime_error("data prepare: cannot read --files-from " + list + "; check its permissions");
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    inputs.push_back({line, " (line " + std::to_string(number) + " of " + list + ")"});
  }
  return inputs;
}

// Runs work(i) for i in [0, count) on `threads` threads; rethrows the failure of the lowest i, so
// which error is reported does not depend on the threads.
void parallel_for(size_t count, unsigned threads, const std::function<void(size_t)>& work) {
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> failures(count);
  const auto run = [&] {
    for (size_t i; (i = next.fetch_add(1)) < count;) {
      try {
        work(i);
      } catch (...) {
        failures[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::min<size_t>(threads, count); ++t) pool.emplace_back(run);
  run();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
}

// Pieces of `text` of about `target` bytes, each ending after a newline where there is one.
std::vector<std::string_view> pieces_of(std::string_view text, size_t target) {
  std::vector<std::string_view> pieces;
  while (!text.empty()) {
    size_t end = std::min(text.size(), target);
    if (end < text.size()) {
      const size_t newline = text.find('\n', end);
      end = newline == std::string_view::npos ? text.size() : newline + 1;
    }
    pieces.push_back(text.substr(0, end));
    text.remove_prefix(end);
  }
  return pieces;
}

// The tokens of `text`, encoded piece by piece on `threads` threads and concatenated in order.
// `done` counts the bytes encoded so far (over both shards) for the progress callback.
std::vector<uint32_t> encode(const Tokenizer& tokenizer, std::string_view text, unsigned threads,
                             std::atomic<int64_t>& done, int64_t total,
                             const std::function<void(int64_t, int64_t)>& progress) {
  const std::vector<std::string_view> pieces = pieces_of(text, size_t{1} << 20);
  std::vector<std::vector<uint32_t>> encoded(pieces.size());
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto work = [&](bool reports) {
    for (size_t i; (i = next.fetch_add(1)) < pieces.size();) {
      try {
        encoded[i] = tokenizer.encode(std::string(pieces[i]));
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        failure = std::current_exception();
      }
      done += static_cast<int64_t>(pieces[i].size());
      if (reports && progress) progress(done, total);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::min<size_t>(threads, pieces.size()); ++t) pool.emplace_back(work, false);
  work(true);  // this thread encodes too, and is the one that reports progress
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  if (progress) progress(done, total);
  std::vector<uint32_t> tokens;
  for (const std::vector<uint32_t>& piece : encoded) tokens.insert(tokens.end(), piece.begin(), piece.end());
  return tokens;
}

uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

// The documents mode's text: each side's kept documents, blank lines between them.
struct DocumentSplit {
  std::string train, val;
  DocumentCounts counts;
};

DocumentSplit split_documents(const std::vector<Input>& inputs, const PrepareOptions& options,
                              unsigned threads) {
  for (const Input& input : inputs) check_input(input);  // all of them before reading any
  // Converted in parallel; everything after is in input order, on this thread.
  std::vector<std::string> texts(inputs.size());
  std::vector<char> html(inputs.size(), 0);
  parallel_for(inputs.size(), threads, [&](size_t i) {
    const std::string bytes = read_file(inputs[i]);
    html[i] = looks_like_html(inputs[i].path, bytes);
    texts[i] = html[i] ? html_to_text(bytes) : normalize_text(bytes);
  });

  DocumentSplit split;
  DocumentCounts& counts = split.counts;
  counts.inputs = static_cast<int64_t>(inputs.size());
  // A document goes to val when its hash modulo 2^20 falls below this.
  const uint64_t val_below = static_cast<uint64_t>(options.val_fraction * double(1 << 20));
  // With dedupe: every distinct document seen, and views of the long lines kept (into those
  // documents, which the set's nodes keep in place).
  std::unordered_set<std::string> documents;
  std::unordered_set<std::string_view> lines;
  for (size_t i = 0; i < inputs.size(); ++i) {
    counts.html += html[i];
    std::string text = std::move(texts[i]);
    if (text.empty()) {
      ++counts.empty;
      continue;
    }
    if (options.dedupe) {
      const auto [seen, added] = documents.insert(std::move(text));
      if (!added) {
        ++counts.duplicate;
        continue;
      }
      const std::string_view document = *seen;
      std::string kept;
      kept.reserve(document.size());
      for (size_t pos = 0; pos <= document.size();) {
        size_t end = document.find('\n', pos);
        if (end == std::string_view::npos) end = document.size();
        const std::string_view line = document.substr(pos, end - pos);
        pos = end + 1;
        if (line.size() >= kDedupeLineBytes && !lines.insert(line).second) {
          ++counts.duplicate_lines;
          counts.duplicate_line_bytes += static_cast<int64_t>(line.size());
          continue;
        }
        kept.append(line).push_back('\n');
      }
      text = normalize_text(kept);  // lines dropped between blank ones leave runs of them
      if (text.empty()) {
        ++counts.emptied;
        continue;
      }
    }
    const bool val = (fnv1a(text) & ((1u << 20) - 1)) < val_below;
    std::string& side = val ? split.val : split.train;
    ++(val ? counts.val : counts.train);
    if (!side.empty()) side += "\n\n";
    side += text;
  }
  return split;
}

// The files prepare_shards writes, and out_dir's folders it creates (on the first file): removed
// again unless kept, so a failure part-way (a tokenizer that does not train, too few tokens)
// leaves nothing behind.
class Outputs {
 public:
  explicit Outputs(std::string dir) : dir_(std::move(dir)) {}
  Outputs(const Outputs&) = delete;
  Outputs& operator=(const Outputs&) = delete;
  ~Outputs() {
    if (kept_) return;
    std::error_code ignored;
    for (auto it = files_.rbegin(); it != files_.rend(); ++it) fs::remove(*it, ignored);
    for (auto it = folders_.rbegin(); it != folders_.rend(); ++it) fs::remove(*it, ignored);
  }

  // The path of out_dir/name, which the caller is about to write.
  std::string add(const std::string& name) {
    if (!created_) {
      for (fs::path folder = fs::absolute(dir_); !folder.empty() && !fs::exists(folder);
           folder = folder.parent_path()) {
        folders_.insert(folders_.begin(), folder);
        if (folder == folder.parent_path()) break;
      }
      std::error_code error;
      fs::create_directories(dir_, error);
      if (error)
        throw std::runtime_error("data prepare: cannot create " + dir_ + " (" + error.message() +
                                 "); check the --out path");
      created_ = true;
    }
    const std::string path = (fs::path(dir_) / name).string();
    files_.push_back(path);
    return path;
  }
  // Writes `bytes` to out_dir/name; returns its path.
  std::string write(const std::string& name, std::string_view bytes) {
    const std::string path = add(name);
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("data prepare: cannot write " + path + "; check the --out path");
    return path;
  }
  void keep() { kept_ = true; }

 private:
  std::string dir_;
  bool created_ = false, kept_ = false;
  std::vector<std::string> files_;
  std::vector<fs::path> folders_;  // created, outermost first
};

// As printf's %g: 0.05, 1e-06.
std::string format_number(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

std::string format_fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string manifest_of(const PrepareResult& r, const PrepareOptions& options, const Tokenizer& tokenizer) {
  const DocumentCounts& c = r.documents;
  const auto both = [](int64_t train, int64_t val) {
    return std::to_string(train + val) + " (train " + std::to_string(train) + ", val " + std::to_string(val) +
           ")";
  };
  std::string text;
  text += "inputs: " + std::to_string(c.inputs) + " (html " + std::to_string(c.html) + ")\n";
  text += "documents kept: " + both(c.train, c.val) + "\n";
  text += "empty documents skipped: " + std::to_string(c.empty) + "\n";
  text += "dedupe: " + std::string(options.dedupe ? "on" : "off") + "\n";
  text += "duplicate documents dropped: " + std::to_string(c.duplicate) + "\n";
  text += "documents emptied by dropping duplicate lines: " + std::to_string(c.emptied) + "\n";
  text += "duplicate lines dropped (of at least " + std::to_string(kDedupeLineBytes) +
          " bytes): " + std::to_string(c.duplicate_lines) + " (" + std::to_string(c.duplicate_line_bytes) +
          " bytes)\n";
  text += "val fraction: " + format_fixed(options.val_fraction, 4) + " (by document)\n";
  text += "bytes of text: " + both(r.train_bytes, r.val_bytes) + "\n";
  text += "tokens: " + both(r.train_tokens, r.val_tokens) + "\n";
  text += "bytes per token: " +
          format_fixed(static_cast<double>(r.train_bytes + r.val_bytes) /
                           static_cast<double>(r.train_tokens + r.val_tokens),
                       4) +
          "\n";
  text += "tokenizer: " + tokenizer.description() +
          (options.tokenizer_vocab > 0           ? ", trained on train.txt"
           : options.tokenizer != kByteTokenizer ? ", from " + options.tokenizer
                                                 : std::string()) +
          "\n";
  text += "shards: uint" + std::to_string(8 * r.bytes_per_token) + " tokens\n";
  return text;
}

// SentencePiece records the thread count in the model: a fixed one keeps the model the same on
// every machine. BPE training is single-threaded; only the normalization of the sampled lines is
// spread over these.
constexpr int kTokenizerTrainingThreads = 8;

// The options' own problems, before any input is read: one line naming the option and the fix.
void check_options(const PrepareOptions& options, size_t inputs) {
  if (inputs == 0)
    throw std::invalid_argument(
        "data prepare: no input files; pass one or more text files or --files-from LIST");
  if (options.out_dir.empty())
    throw std::invalid_argument("data prepare: no output directory; pass --out DIR");
  if (!(options.val_fraction > 0.0 && options.val_fraction < 1.0))
    throw std::invalid_argument("data prepare: --val-fraction " + std::to_string(options.val_fraction) +
                                " must be between 0 and 1 (exclusive), e.g. 0.05");
  if (options.tokenizer_vocab != 0 && options.tokenizer != kByteTokenizer)
    throw std::invalid_argument(
        "data prepare: --tokenizer " + options.tokenizer + " and --tokenizer-vocab " +
        std::to_string(options.tokenizer_vocab) +
        " exclude each other; pass a model to use or a vocabulary to train, not both");
  if (options.dedupe && !options.documents)
    throw std::invalid_argument(
        "data prepare: --dedupe works on documents; add --documents (each input one document) or drop "
        "--dedupe");
  if (options.tokenizer_vocab != 0 &&
      (options.tokenizer_vocab < kMinTrainedVocab || options.tokenizer_vocab > kMaxTrainedVocab))
    throw std::invalid_argument("data prepare: --tokenizer-vocab " + std::to_string(options.tokenizer_vocab) +
                                " is outside [" + std::to_string(kMinTrainedVocab) + ", " +
                                std::to_string(kMaxTrainedVocab) + "]; pick e.g. 8192");
}

// Trains options.tokenizer_vocab pieces on `train_text` (in the file `train_text_path`) into `out`.
void train_tokenizer_for(const PrepareOptions& options, const std::string& train_text_path,
                         std::string_view train_text, const std::string& out) {
  TokenizerTrainingOptions training;
  training.inputs = {train_text_path};
  training.vocab = options.tokenizer_vocab;
  training.out = out;
  training.threads = kTokenizerTrainingThreads;
  try {
    train_tokenizer(training);
  } catch (const std::runtime_error& e) {
    // SentencePiece's refusal (e.g. more pieces than the text allows) is bad input; a file that
    // cannot be written is not.
    if (std::string_view(e.what()).find("SentencePiece failed") == std::string_view::npos) throw;
    throw std::invalid_argument("data prepare: training a tokenizer of " +
                                std::to_string(options.tokenizer_vocab) + " pieces on " +
                                std::to_string(train_text.size()) + " bytes of text failed (" + e.what() +
                                "); lower --tokenizer-vocab or add text");
  }
}

}  // namespace

PrepareResult prepare_shards(const PrepareOptions& options) {
  const std::vector<Input> inputs = inputs_of(options);
  check_options(options, inputs.size());
  const bool trains = options.tokenizer_vocab > 0;
  std::unique_ptr<Tokenizer> tokenizer = trains ? nullptr : load_tokenizer(options.tokenizer);
  const unsigned threads = static_cast<unsigned>(options.threads > 0 ? options.threads : usable_cpus());

  // The text of each side: views into `bytes` (the inputs concatenated) or into `split`.
  std::string bytes;
  DocumentSplit split;
  std::string_view train_text, val_text;
  if (options.documents) {
    split = split_documents(inputs, options, threads);
    const int64_t kept = split.counts.train + split.counts.val;
    if (split.val.empty() || split.train.empty())
      throw std::invalid_argument("data prepare: none of the " + std::to_string(kept) +
                                  " documents kept fell into " + (split.val.empty() ? "val" : "train") +
                                  " (--val-fraction " + format_number(options.val_fraction) +
                                  ", by document); " +
                                  (split.val.empty() ? "add documents or raise --val-fraction"
                                                     : "add documents or lower --val-fraction"));
    train_text = split.train;
    val_text = split.val;
  } else {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (i > 0) bytes.push_back('\n');
      append_file(inputs[i], bytes);
    }
    const size_t val_bytes = static_cast<size_t>(static_cast<double>(bytes.size()) * options.val_fraction);
    train_text = std::string_view(bytes).substr(0, bytes.size() - val_bytes);
    val_text = std::string_view(bytes).substr(bytes.size() - val_bytes);
  }
  const int64_t total = static_cast<int64_t>(train_text.size() + val_text.size());

  Outputs outputs(options.out_dir);
  PrepareResult result;
  result.documents = split.counts;
  if (options.documents || trains) {
    result.train_text_path = outputs.write("train.txt", train_text);
    result.val_text_path = outputs.write("val.txt", val_text);
  }
  if (trains) {
    const std::string out = outputs.add("tokenizer.model");
    train_tokenizer_for(options, result.train_text_path, train_text, out);
    tokenizer = load_tokenizer(out);
    result.tokenizer_path = out;
  }
  std::atomic<int64_t> done{0};
  const std::vector<uint32_t> train = encode(*tokenizer, train_text, threads, done, total, options.progress);
  const std::vector<uint32_t> val = encode(*tokenizer, val_text, threads, done, total, options.progress);
  // Two tokens are the least that make one (input, target) pair.
  if (val.size() < 2 || train.size() < 2)
    throw std::invalid_argument(
        "data prepare: the inputs hold " + std::to_string(total) +
        " bytes, too few to split into train and val; add text or change --val-fraction");

  result.train_tokens = static_cast<int64_t>(train.size());
  result.val_tokens = static_cast<int64_t>(val.size());
  result.train_bytes = static_cast<int64_t>(train_text.size());
  result.val_bytes = static_cast<int64_t>(val_text.size());
  result.vocab = tokenizer->vocab_size();
  // uint16 shards hold ids below 65536: the vocabulary, not the ids that happen to occur, decides.
  const bool wide = tokenizer->vocab_size() > 65536;
  result.bytes_per_token = wide ? 4 : 2;
  result.train_path = outputs.add("train.bin");
  write_token_shard(result.train_path, train, wide);
  result.val_path = outputs.add("val.bin");
  write_token_shard(result.val_path, val, wide);
  if (options.documents)
    result.manifest_path = outputs.write("MANIFEST.txt", manifest_of(result, options, *tokenizer));
  // Last, and not among the outputs removed on failure: it may be the --tokenizer file itself.
  if (!trains && options.tokenizer != kByteTokenizer) {
    result.tokenizer_path = (fs::path(options.out_dir) / "tokenizer.model").string();
    std::ofstream(result.tokenizer_path, std::ios::binary) << tokenizer->serialized();
  }
  outputs.keep();
  return result;
}

}  // namespace atl::runtime
