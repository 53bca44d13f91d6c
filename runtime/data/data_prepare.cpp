#include "runtime/data/data_prepare.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <system_error>

#include "runtime/data/token_shard.h"

namespace atl::runtime {
namespace {

namespace fs = std::filesystem;

// Appends the bytes of the text file `path` to `bytes`; a missing, non-regular or empty input is
// an error rather than a silent gap in the data.
void append_file(const std::string& path, std::string& bytes) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status))
    throw std::runtime_error("data prepare: input " + path + " does not exist; check the path");
  if (!fs::is_regular_file(status))
    throw std::runtime_error("data prepare: input " + path + " is not a regular file; pass text files");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("data prepare: cannot read input " + path + "; check its permissions");
  const size_t before = bytes.size();
  bytes.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("data prepare: reading input " + path + " failed");
  if (bytes.size() == before)
    throw std::runtime_error("data prepare: input " + path +
                             " is empty; check that it was written completely");
}

// Byte-level tokenizer: token = byte value (vocab 256).
std::vector<uint32_t> byte_tokens(std::string::const_iterator begin, std::string::const_iterator end) {
  std::vector<uint32_t> tokens;
  tokens.reserve(static_cast<size_t>(end - begin));
  for (auto it = begin; it != end; ++it) tokens.push_back(static_cast<unsigned char>(*it));
  return tokens;
}

}  // namespace

PrepareResult prepare_byte_shards(const PrepareOptions& options) {
  if (options.inputs.empty())
    throw std::invalid_argument("data prepare: no input files; pass one or more text files");
  if (options.out_dir.empty())
    throw std::invalid_argument("data prepare: no output directory; pass --out DIR");
  if (!(options.val_fraction > 0.0 && options.val_fraction < 1.0))
    throw std::invalid_argument("data prepare: --val-fraction " + std::to_string(options.val_fraction) +
                                " must be between 0 and 1 (exclusive), e.g. 0.05");
  std::string bytes;
  for (size_t i = 0; i < options.inputs.size(); ++i) {
    if (i > 0) bytes.push_back('\n');
    append_file(options.inputs[i], bytes);
  }
  const int64_t total = static_cast<int64_t>(bytes.size());
  const int64_t val_tokens = static_cast<int64_t>(static_cast<double>(total) * options.val_fraction);
  // Two tokens are the least that make one (input, target) pair.
  if (val_tokens < 2 || total - val_tokens < 2)
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
  result.train_tokens = total - val_tokens;
  result.val_tokens = val_tokens;
  const auto split = bytes.cbegin() + result.train_tokens;
  write_token_shard(result.train_path, byte_tokens(bytes.cbegin(), split));
  write_token_shard(result.val_path, byte_tokens(split, bytes.cend()));
  return result;
}

}  // namespace atl::runtime
