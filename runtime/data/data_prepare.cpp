#include "runtime/data/data_prepare.h"

#include <glob.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <unordered_set>

#include "runtime/data/document_source.h"
#include "runtime/data/encoding_pipeline.h"
#include "runtime/data/html_text.h"
#include "runtime/data/prepare_outputs.h"
#include "runtime/data/side_encoder.h"
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
  InputFormat format = InputFormat::kText;
  int64_t bytes = 0;
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
                                " is not a regular file; pass text, JSONL or Parquet files or directories");
}

// The files a named input stands for: a directory's files (recursively, in name order, hidden ones
// left out), a glob's matches (in name order), or the path itself.
void expand_input(const std::string& path, const std::string& origin, std::vector<Input>& inputs) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    std::vector<std::string> files;
    for (auto it = fs::recursive_directory_iterator(path, error); !error && it != fs::end(it);
         it.increment(error)) {
      if (it->path().filename().string().front() == '.') {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) files.push_back(it->path().string());
    }
    if (files.empty())
      throw std::invalid_argument("data prepare: directory " + path + origin +
                                  " holds no files; check the path");
    std::sort(files.begin(), files.end());
    for (const std::string& file : files) inputs.push_back({file, origin});
    return;
  }
  if (path.find_first_of("*?[") != std::string::npos && !fs::exists(path, error)) {
    glob_t found{};
    const int status = ::glob(path.c_str(), GLOB_ERR, nullptr, &found);
    std::vector<std::string> files(found.gl_pathv, found.gl_pathv + found.gl_pathc);
    ::globfree(&found);
    if (status != 0 || files.empty())
      throw std::invalid_argument("data prepare: " + path + origin +
                                  " matches no file; check the pattern (quote it so that the shell leaves it "
                                  "to Atoll)");
    for (const std::string& file : files) inputs.push_back({file, origin});
    return;
  }
  inputs.push_back({path, origin});
}

// The inputs: options.inputs, then the lines of options.files_from, each expanded.
std::vector<Input> inputs_of(const PrepareOptions& options) {
  std::vector<Input> inputs;
  for (const std::string& path : options.inputs) expand_input(path, "", inputs);
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
    expand_input(line, " (line " + std::to_string(number) + " of " + list + ")", inputs);
  }
  return inputs;
}

uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

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

// Input bytes read so far over input bytes in all, for options.progress.
class Progress {
 public:
  Progress(const PrepareOptions& options, const std::vector<Input>& inputs) : report_(options.progress) {
    for (const Input& input : inputs) total_ += input.bytes;
  }
  void update(int64_t in_current) const {
    if (report_) report_(finished_ + in_current, total_);
  }
  void file_done(int64_t bytes) { finished_ += bytes; }
  void restart() { finished_ = 0; }

 private:
  std::function<void(int64_t, int64_t)> report_;
  int64_t total_ = 0, finished_ = 0;
};

// One side of the split as a pass reads it: its text file (when written), its encoder (when
// encoding), and its bytes of text.
struct Side {
  std::ofstream* text = nullptr;
  SideEncoder* encoder = nullptr;
  bool framed = false;  // the encoder frames documents with a BOS or EOS token rather than joining them
  int64_t bytes = 0;
  bool started = false;

  // Appends bytes of the joined stream (no document framing).
  void append(std::string_view bytes_in, int source, int64_t documents) {
    if (text) text->write(bytes_in.data(), static_cast<std::streamsize>(bytes_in.size()));
    if (encoder) encoder->add_text(bytes_in, source, documents);
    bytes += static_cast<int64_t>(bytes_in.size());
  }
  // Appends a document: a blank line before it unless first; framed, encoded alone.
  void add_document(std::string document, int source) {
    const std::string_view separator = started ? "\n\n" : "";
    started = true;
    if (!framed) {
      append(separator, source, 0);
      append(document, source, 1);
      return;
    }
    if (text) {
      text->write(separator.data(), static_cast<std::streamsize>(separator.size()));
      text->write(document.data(), static_cast<std::streamsize>(document.size()));
    }
    bytes += static_cast<int64_t>(separator.size() + document.size());
    if (encoder) encoder->add_document(std::move(document), source);
  }
};

// With dedupe: every distinct document seen, and views of the long lines kept (into those
// documents, which the set's nodes keep in place).
struct Deduplicator {
  std::unordered_set<std::string> documents;
  std::unordered_set<std::string_view> lines;

  // The document without lines seen before, "" when it is a duplicate or nothing is left.
  std::string filter(std::string text, DocumentCounts& counts) {
    const auto [seen, added] = documents.insert(std::move(text));
    if (!added) {
      ++counts.duplicate;
      return "";
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
    std::string result = normalize_text(kept);  // lines dropped between blank ones leave runs of them
    if (result.empty()) ++counts.emptied;
    return result;
  }
};

ReadOptions read_options_of(const PrepareOptions& options) {
  ReadOptions read;
  read.text_field = options.text_field;
  read.skip_bad_records = options.skip_bad_records;
  return read;
}

// Documents mode: every document of every input, converted, deduplicated, and sent to its side.
DocumentCounts read_documents(const std::vector<Input>& inputs, const PrepareOptions& options, Side sides[2],
                              Progress& progress) {
  DocumentCounts counts;
  counts.inputs = static_cast<int64_t>(inputs.size());
  // A document goes to val when its hash modulo 2^20 falls below this.
  const uint64_t val_below = static_cast<uint64_t>(options.val_fraction * double(1 << 20));
  Deduplicator dedupe;
  const ReadOptions read = read_options_of(options);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::unique_ptr<DocumentReader> reader =
        open_documents(inputs[i].path, inputs[i].format, read, true);
    Document document;
    while (reader->next(document)) {
      ++counts.records;
      counts.html += document.html;
      std::string text = document.html ? html_to_text(document.text) : normalize_text(document.text);
      progress.update(reader->consumed());
      if (text.empty()) {
        ++counts.empty;
        continue;
      }
      if (options.dedupe) {
        text = dedupe.filter(std::move(text), counts);
        if (text.empty()) continue;
      }
      const bool val = (fnv1a(text) & ((1u << 20) - 1)) < val_below;
      ++(val ? counts.val : counts.train);
      sides[val].add_document(std::move(text), static_cast<int>(i));
    }
    counts.skipped += reader->skipped();
    progress.file_done(inputs[i].bytes);
  }
  return counts;
}

// The joined mode: the text files' bytes in order, "\n" between two, the last val_fraction of
// them to val.
DocumentCounts read_text(const std::vector<Input>& inputs, const PrepareOptions& options, Side sides[2],
                         Progress& progress) {
  int64_t total = static_cast<int64_t>(inputs.size()) - 1;
  for (const Input& input : inputs) total += input.bytes;
  const auto val_bytes = static_cast<int64_t>(static_cast<double>(total) * options.val_fraction);
  const int64_t val_start = total - val_bytes;
  int64_t position = 0;
  // Sends `text` to its side, cutting it where val starts.
  const auto route = [&](std::string_view text, int source, int64_t documents) {
    const int64_t train_part =
        std::clamp<int64_t>(val_start - position, 0, static_cast<int64_t>(text.size()));
    if (train_part > 0) sides[0].append(text.substr(0, static_cast<size_t>(train_part)), source, documents);
    if (train_part < static_cast<int64_t>(text.size()))
      sides[1].append(text.substr(static_cast<size_t>(train_part)), source, train_part > 0 ? 0 : documents);
    position += static_cast<int64_t>(text.size());
  };
  const ReadOptions read = read_options_of(options);
  DocumentCounts counts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) route("\n", static_cast<int>(i), 0);
    const std::unique_ptr<DocumentReader> reader =
        open_documents(inputs[i].path, inputs[i].format, read, false);
    Document block;
    while (reader->next(block)) {
      route(block.text, static_cast<int>(i), block.continues ? 0 : 1);
      progress.update(reader->consumed());
    }
    progress.file_done(inputs[i].bytes);
  }
  counts.inputs = counts.records = static_cast<int64_t>(inputs.size());
  return counts;
}

std::string sources_of(const ShardSummary& shard, const std::vector<Input>& inputs) {
  std::vector<std::string> names;
  for (const int source : shard.sources) names.push_back(inputs[static_cast<size_t>(source)].path);
  std::sort(names.begin(), names.end());
  std::string text;
  for (const std::string& name : names) text += " " + name;
  return text;
}

std::string manifest_of(const PrepareResult& r, const PrepareOptions& options, const Tokenizer& tokenizer,
                        const std::vector<Input>& inputs) {
  const DocumentCounts& c = r.documents;
  const auto both = [](int64_t train, int64_t val) {
    return std::to_string(train + val) + " (train " + std::to_string(train) + ", val " + std::to_string(val) +
           ")";
  };
  std::string text;
  text += "inputs: " + std::to_string(c.inputs) + " (html " + std::to_string(c.html) + ")\n";
  if (options.documents) {
    text += "documents kept: " + both(c.train, c.val) + "\n";
    text += "empty documents skipped: " + std::to_string(c.empty) + "\n";
    text += "dedupe: " + std::string(options.dedupe ? "on" : "off") + "\n";
    text += "duplicate documents dropped: " + std::to_string(c.duplicate) + "\n";
    text += "documents emptied by dropping duplicate lines: " + std::to_string(c.emptied) + "\n";
    text += "duplicate lines dropped (of at least " + std::to_string(kDedupeLineBytes) +
            " bytes): " + std::to_string(c.duplicate_lines) + " (" + std::to_string(c.duplicate_line_bytes) +
            " bytes)\n";
  }
  text += "val fraction: " + format_fixed(options.val_fraction, 4) +
          (options.documents ? " (by document)\n" : " (by bytes)\n");
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
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(
                    fnv1a(tokenizer.serialized().empty() ? kByteTokenizer : tokenizer.serialized())));
  text += "tokenizer hash: fnv1a-64 " + std::string(hash) + "\n";
  text += "documents framed: " +
          std::string(!options.documents             ? "joined as text"
                      : document_bos(tokenizer) >= 0 ? "BOS token before each"
                      : document_eos(tokenizer) >= 0 ? "EOS token after each"
                                                     : "joined as text") +
          "\n";
  text += "records read: " + std::to_string(c.records) +
          ", bad records skipped: " + std::to_string(c.skipped) + "\n";
  text += "shard tokens at most: " + std::to_string(options.shard_tokens) + "\n";
  for (const auto* shards : {&r.train_shards, &r.val_shards})
    for (const ShardSummary& shard : *shards)
      text += "shard " + fs::path(shard.path).filename().string() + ": " + std::to_string(shard.tokens) +
              " tokens, " + std::to_string(shard.documents) + " documents, from" + sources_of(shard, inputs) +
              "\n";
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
  if (options.shard_tokens < 1 || options.shard_tokens > kMaxShardTokens)
    throw std::invalid_argument("data prepare: --shard-tokens " + std::to_string(options.shard_tokens) +
                                " is outside [1, " + std::to_string(kMaxShardTokens) +
                                "] (llm.c shards count tokens in an int32); pick e.g. 1000000000");
  if (options.threads < 0 || options.threads > kMaxPrepareThreads)
    throw std::invalid_argument("data prepare: --threads " + std::to_string(options.threads) +
                                " is outside [0, " + std::to_string(kMaxPrepareThreads) +
                                "]; pass 0 (the CPUs this process may use) or a number of encoding threads");
  if (options.tokenizer_vocab != 0 &&
      (options.tokenizer_vocab < kMinTrainedVocab || options.tokenizer_vocab > kMaxTrainedVocab))
    throw std::invalid_argument("data prepare: --tokenizer-vocab " + std::to_string(options.tokenizer_vocab) +
                                " is outside [" + std::to_string(kMinTrainedVocab) + ", " +
                                std::to_string(kMaxTrainedVocab) + "]; pick e.g. 8192");
}

// Trains options.tokenizer_vocab pieces on the `train_bytes` of text in `train_text_path` into `out`.
void train_tokenizer_for(const PrepareOptions& options, const std::string& train_text_path,
                         int64_t train_bytes, const std::string& out) {
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
                                std::to_string(train_bytes) + " bytes of text failed (" + e.what() +
                                "); lower --tokenizer-vocab or add text");
  }
}

// Opens out_dir/name for writing as an output.
std::unique_ptr<std::ofstream> open_output(PrepareOutputs& outputs, const std::string& name,
                                           std::string& path) {
  path = outputs.add(name);
  auto out = std::make_unique<std::ofstream>(path, std::ios::binary);
  if (!*out) throw std::runtime_error("data prepare: cannot write " + path + "; check the --out path");
  return out;
}

// Reads every input once, sending each side's text to `sides`.
DocumentCounts read_pass(const std::vector<Input>& inputs, const PrepareOptions& options, Side sides[2],
                         Progress& progress) {
  progress.restart();
  return options.documents ? read_documents(inputs, options, sides, progress)
                           : read_text(inputs, options, sides, progress);
}

// The inputs expanded, each checked and its format known, before anything is written.
std::vector<Input> checked_inputs(const PrepareOptions& options) {
  std::vector<Input> inputs = inputs_of(options);
  check_options(options, inputs.size());
  for (Input& input : inputs) {
    check_input(input);
    input.format = input_format(input.path);
    input.bytes = static_cast<int64_t>(fs::file_size(input.path));
    if (holds_records(input.format) && !options.documents)
      throw std::invalid_argument("data prepare: input " + input.path + input.origin + " is " +
                                  format_name(input.format) +
                                  ", whose records are documents; add --documents");
  }
  return inputs;
}

}  // namespace

PrepareResult prepare_shards(const PrepareOptions& options) {
  const std::vector<Input> inputs = checked_inputs(options);
  const bool trains = options.tokenizer_vocab > 0;
  std::unique_ptr<Tokenizer> tokenizer = trains ? nullptr : load_tokenizer(options.tokenizer);
  const unsigned threads = static_cast<unsigned>(options.threads > 0 ? options.threads : usable_cpus());
  Progress progress(options, inputs);

  PrepareOutputs outputs(options.out_dir);
  PrepareResult result;
  Side sides[2];
  // The text that is tokenized, as files (documents, or a tokenizer to train on it).
  std::unique_ptr<std::ofstream> texts[2];
  if (options.documents || trains) {
    texts[0] = open_output(outputs, "train.txt", result.train_text_path);
    texts[1] = open_output(outputs, "val.txt", result.val_text_path);
    for (int side = 0; side < 2; ++side) sides[side].text = texts[side].get();
  }
  const auto check_sides = [&](const DocumentCounts& counts) {
    if (!options.documents || (counts.train > 0 && counts.val > 0)) return;
    const bool no_val = counts.val == 0;
    throw std::invalid_argument(
        "data prepare: none of the " + std::to_string(counts.train + counts.val) +
        " documents kept fell into " + (no_val ? "val" : "train") + " (--val-fraction " +
        format_number(options.val_fraction) + ", by document); " +
        (no_val ? "add documents or raise --val-fraction" : "add documents or lower --val-fraction"));
  };
  if (trains) {
    // The model is trained on train.txt before a second pass encodes with it.
    check_sides(read_pass(inputs, options, sides, progress));
    const int64_t train_bytes = sides[0].bytes;
    for (int side = 0; side < 2; ++side) {
      texts[side]->close();
      if (!*texts[side])
        throw std::runtime_error("data prepare: cannot write the text files in " + options.out_dir);
      sides[side] = Side{};
    }
    const std::string out = outputs.add("tokenizer.model");
    train_tokenizer_for(options, result.train_text_path, train_bytes, out);
    tokenizer = load_tokenizer(out);
    result.tokenizer_path = out;
  }

  // uint16 shards hold ids below 65536: the vocabulary, not the ids that happen to occur, decides.
  const bool wide = tokenizer->vocab_size() > 65536;
  const auto output = [&](const std::string& name) { return outputs.add(name); };
  SplitShards train_shards(output, "train", options.shard_tokens, wide);
  SplitShards val_shards(output, "val", options.shard_tokens, wide);
  // Both sides share the workers; a few pieces per worker keep each busy while the text in memory
  // stays at a few MB a thread.
  EncodingPipeline pipeline(*tokenizer, threads, 4 * threads * kPieceBytes);
  SideEncoder train_encoder(*tokenizer, pipeline, train_shards),
      val_encoder(*tokenizer, pipeline, val_shards);
  sides[0].encoder = &train_encoder;
  sides[1].encoder = &val_encoder;
  for (Side& side : sides)
    side.framed = options.documents && (document_bos(*tokenizer) >= 0 || document_eos(*tokenizer) >= 0);
  result.documents = read_pass(inputs, options, sides, progress);
  check_sides(result.documents);
  train_encoder.finish();
  val_encoder.finish();
  pipeline.finish();
  for (int side = 0; side < 2 && !trains && texts[side]; ++side) {
    texts[side]->close();
    if (!*texts[side])
      throw std::runtime_error("data prepare: cannot write the text files in " + options.out_dir);
  }
  // Two tokens are the least that make one (input, target) pair.
  if (train_shards.tokens() < 2 || val_shards.tokens() < 2)
    throw std::invalid_argument(
        "data prepare: the inputs hold " + std::to_string(sides[0].bytes + sides[1].bytes) +
        " bytes, too few to split into train and val; add text or change --val-fraction");
  result.train_shards = train_shards.finish();
  result.val_shards = val_shards.finish();
  result.train_path = result.train_shards.front().path;
  result.val_path = result.val_shards.front().path;
  result.train_tokens = train_shards.tokens();
  result.val_tokens = val_shards.tokens();
  result.train_bytes = sides[0].bytes;
  result.val_bytes = sides[1].bytes;
  result.vocab = tokenizer->vocab_size();
  result.bytes_per_token = wide ? 4 : 2;
  result.manifest_path = outputs.write("MANIFEST.txt", manifest_of(result, options, *tokenizer, inputs));
  // Last, and not among the outputs removed on failure: it may be the --tokenizer file itself.
  if (!trains && options.tokenizer != kByteTokenizer) {
    result.tokenizer_path = (fs::path(options.out_dir) / "tokenizer.model").string();
    std::ofstream(result.tokenizer_path, std::ios::binary) << tokenizer->serialized();
  }
  outputs.keep();
  return result;
}

}  // namespace atl::runtime
