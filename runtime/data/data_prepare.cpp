#include "runtime/data/data_prepare.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>

#include "runtime/data/token_shard.h"
#include "runtime/tokenizer/tokenizer.h"

namespace atl::runtime {
namespace {

namespace fs = std::filesystem;

// Appends the bytes of the text file `path` to `bytes`; a missing, non-regular or empty input is
// an error rather than a silent gap in the data.
void append_file(const std::string& path, std::string& bytes) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status))
    throw std::invalid_argument("data prepare: input " + path + " does not exist; check the path");
  if (!fs::is_regular_file(status))
    throw std::invalid_argument("data prepare: input " + path + " is not a regular file; pass text files");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("data prepare: cannot read input " + path + "; check its permissions");
  const size_t before = bytes.size();
  bytes.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("data prepare: reading input " + path + " failed");
  if (bytes.size() == before)
    throw std::invalid_argument("data prepare: input " + path +
                                " is empty; check that it was written completely");
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

}  // namespace

PrepareResult prepare_shards(const PrepareOptions& options) {
  if (options.inputs.empty())
    throw std::invalid_argument("data prepare: no input files; pass one or more text files");
  if (options.out_dir.empty())
    throw std::invalid_argument("data prepare: no output directory; pass --out DIR");
  if (!(options.val_fraction > 0.0 && options.val_fraction < 1.0))
    throw std::invalid_argument("data prepare: --val-fraction " + std::to_string(options.val_fraction) +
                                " must be between 0 and 1 (exclusive), e.g. 0.05");
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(options.tokenizer);
  std::string bytes;
  for (size_t i = 0; i < options.inputs.size(); ++i) {
    if (i > 0) bytes.push_back('\n');
    append_file(options.inputs[i], bytes);
  }
  const int64_t total = static_cast<int64_t>(bytes.size());
  const int64_t val_bytes = static_cast<int64_t>(static_cast<double>(total) * options.val_fraction);
  const std::string_view text(bytes);
  const unsigned threads = options.threads > 0 ? static_cast<unsigned>(options.threads)
                                               : std::max(1u, std::thread::hardware_concurrency());
  std::atomic<int64_t> done{0};
  const std::vector<uint32_t> train =
      encode(*tokenizer, text.substr(0, total - val_bytes), threads, done, total, options.progress);
  const std::vector<uint32_t> val =
      encode(*tokenizer, text.substr(total - val_bytes), threads, done, total, options.progress);
  // Two tokens are the least that make one (input, target) pair.
  if (val.size() < 2 || train.size() < 2)
    throw std::invalid_argument(
        "data prepare: the inputs hold " + std::to_string(total) +
        " bytes, too few to split into train and val; add text or change --val-fraction");

  std::error_code error;
  fs::create_directories(options.out_dir, error);
  if (error)
    throw std::runtime_error("data prepare: cannot create " + options.out_dir + " (" + error.message() +
                             "); check the --out path");
  PrepareResult result;
  result.train_path = (fs::path(options.out_dir) / "train.bin").string();
  result.val_path = (fs::path(options.out_dir) / "val.bin").string();
  result.train_tokens = static_cast<int64_t>(train.size());
  result.val_tokens = static_cast<int64_t>(val.size());
  result.train_bytes = total - val_bytes;
  result.val_bytes = val_bytes;
  // uint16 shards hold ids below 65536: the vocabulary, not the ids that happen to occur, decides.
  const bool wide = tokenizer->vocab_size() > 65536;
  result.bytes_per_token = wide ? 4 : 2;
  write_token_shard(result.train_path, train, wide);
  write_token_shard(result.val_path, val, wide);
  if (options.tokenizer != kByteTokenizer) {
    result.tokenizer_path = (fs::path(options.out_dir) / "tokenizer.model").string();
    std::ofstream(result.tokenizer_path, std::ios::binary) << tokenizer->serialized();
  }
  return result;
}

}  // namespace atl::runtime
