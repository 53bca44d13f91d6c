// `atoll data prepare`: text files -> train/val token shards with the byte-level tokenizer
// (vocab 256: token = byte value).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace atl::runtime {

struct PrepareOptions {
  std::vector<std::string> inputs;
  std::string out_dir;
  double val_fraction = 0.05;
};

struct PrepareResult {
  std::string train_path, val_path;
  int64_t train_tokens = 0, val_tokens = 0;
};

// Concatenates the inputs in order ("\n" between files) and splits the bytes: the last
// val_fraction go to out_dir/val.bin, the rest to out_dir/train.bin (out_dir is created if
// missing). One-line errors: std::runtime_error for an input that is missing, not a regular file or
// empty; std::invalid_argument for no inputs, no out_dir, a fraction outside (0, 1), or too little
// text for two tokens on each side.
PrepareResult prepare_byte_shards(const PrepareOptions& options);

}  // namespace atl::runtime
