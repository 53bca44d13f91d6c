#include "runtime/data_prepare.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "runtime/token_shard.h"

namespace atl::runtime {

PrepareResult prepare_byte_shards(const PrepareOptions& options) {
  if (options.inputs.empty())
    throw std::invalid_argument("data prepare: no input files; pass one or more text files");
  if (!(options.val_fraction > 0.0 && options.val_fraction < 1.0))
    throw std::invalid_argument("data prepare: --val-fraction " + std::to_string(options.val_fraction) +
                                " must be between 0 and 1 (exclusive), e.g. 0.05");
  std::vector<uint32_t> bytes;
  for (size_t i = 0; i < options.inputs.size(); ++i) {
    const std::string& path = options.inputs[i];
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("data prepare: cannot read " + path + "; check the path");
    if (i > 0) bytes.push_back('\n');
    for (auto it = std::istreambuf_iterator<char>(in); it != std::istreambuf_iterator<char>(); ++it)
      bytes.push_back(static_cast<unsigned char>(*it));
  }
  const int64_t total = static_cast<int64_t>(bytes.size());
  const int64_t val_tokens = static_cast<int64_t>(static_cast<double>(total) * options.val_fraction);
  if (val_tokens < 2 || total - val_tokens < 2)
    throw std::invalid_argument(
        "data prepare: the inputs hold " + std::to_string(total) +
        " bytes, too few to split into train and val; add text or change --val-fraction");
  std::filesystem::create_directories(options.out_dir);
  PrepareResult result;
  result.train_path = (std::filesystem::path(options.out_dir) / "train.bin").string();
  result.val_path = (std::filesystem::path(options.out_dir) / "val.bin").string();
  result.train_tokens = total - val_tokens;
  result.val_tokens = val_tokens;
  write_token_shard(result.val_path, std::vector<uint32_t>(bytes.end() - val_tokens, bytes.end()));
  bytes.resize(static_cast<size_t>(result.train_tokens));
  write_token_shard(result.train_path, bytes);
  return result;
}

}  // namespace atl::runtime
