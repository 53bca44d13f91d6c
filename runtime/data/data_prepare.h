// `atoll data prepare`: text files -> train/val token shards, with the byte-level tokenizer (vocab
// 256: token = byte value) or a SentencePiece model (atoll tokenizer train), encoded in parallel.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace atl::runtime {

struct PrepareOptions {
  std::vector<std::string> inputs;
  std::string out_dir;
  double val_fraction = 0.05;
  std::string tokenizer = "bytes";  // or a SentencePiece .model file
  int threads = 0;                  // encoding threads; 0: the cores
  // Called as text is encoded: bytes done, bytes in all (a progress bar); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

struct PrepareResult {
  std::string train_path, val_path;
  std::string tokenizer_path;  // out_dir/tokenizer.model, a copy of the model; empty for bytes
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t train_bytes = 0, val_bytes = 0;  // of text
  int bytes_per_token = 2;                 // in the shards: 2 (uint16) up to vocab 65536, else 4
};

// Concatenates the inputs in order ("\n" between files) and splits the text: the last
// val_fraction of its bytes go to out_dir/val.bin, the rest to out_dir/train.bin (out_dir is created
// if missing), each encoded with the tokenizer -- a subword model in pieces of about 1 MB cut after
// a newline, on `threads` threads (the model adds no leading space, so the cuts change nothing).
// The same text lands in val.bin whatever the tokenizer, so bits per byte compare across them.
// One-line errors: std::runtime_error for an input that is missing, not a regular file or empty;
// std::invalid_argument for no inputs, no out_dir, a fraction outside (0, 1), a tokenizer that does
// not load, or too little text for two tokens on each side.
PrepareResult prepare_shards(const PrepareOptions& options);

}  // namespace atl::runtime
