// `atoll data prepare`: text files -> train/val token shards, with the byte-level tokenizer (vocab
// 256: token = byte value) or a SentencePiece model (atoll tokenizer train, or trained here on the
// training side's text), encoded in parallel. With `documents`, every input is one document (HTML
// converted to text, runtime/data/html_text.h), optionally deduplicated, and the split into train
// and val is by document, so a corpus of many pages never has one page on both sides.
#pragma once

#include <cstddef>
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
  int threads = 0;                  // encoding (and converting) threads; 0: usable_cpus()
  // A file listing more inputs, one path a line (blank lines ignored; relative paths are relative to
  // the current directory), read after `inputs`; empty: none.
  std::string files_from;
  // Every input is one document: HTML (looks_like_html) through html_to_text, other files as UTF-8
  // text under normalize_text; documents empty after that are skipped (counted), not an error.
  bool documents = false;
  // With documents: drop a document identical to an earlier one, and every line of at least
  // kDedupeLineBytes bytes that appeared before (in an earlier kept document or in the same one).
  bool dedupe = false;
  // > 0: train a SentencePiece model of this many pieces (tokenizer_training.h) on the training
  // side's text, write it to out_dir/tokenizer.model and encode with it; `tokenizer` must stay bytes.
  int tokenizer_vocab = 0;
  // Called as text is encoded: bytes done, bytes in all (a progress bar); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

constexpr size_t kDedupeLineBytes = 48;
constexpr int kMinTrainedVocab = 260;  // 256 bytes + <unk>, <s>, </s> + a merge
constexpr int kMaxTrainedVocab = 1'048'576;

// What documents mode kept and dropped (all zero without it).
struct DocumentCounts {
  int64_t inputs = 0;
  int64_t html = 0;                  // inputs converted from HTML
  int64_t train = 0, val = 0;        // documents kept on each side
  int64_t empty = 0;                 // no text after conversion
  int64_t duplicate = 0;             // identical to an earlier document (dedupe)
  int64_t emptied = 0;               // nothing left once duplicate lines were dropped (dedupe)
  int64_t duplicate_lines = 0;       // dropped (dedupe)
  int64_t duplicate_line_bytes = 0;  // their bytes, newlines not counted
};

struct PrepareResult {
  std::string train_path, val_path;
  std::string
      tokenizer_path;  // out_dir/tokenizer.model: a copy of the model, or the one trained; "" for bytes
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t train_bytes = 0, val_bytes = 0;  // of text
  int bytes_per_token = 2;                 // in the shards: 2 (uint16) up to vocab 65536, else 4
  int vocab = 256;                         // of the tokenizer the shards were encoded with
  // out_dir/train.txt and val.txt, the text that was tokenized (documents or tokenizer_vocab), and
  // out_dir/MANIFEST.txt (documents); empty when not written.
  std::string train_text_path, val_text_path, manifest_path;
  DocumentCounts documents;
};

// Concatenates the inputs in order ("\n" between files) and splits the text: the last
// val_fraction of its bytes go to out_dir/val.bin, the rest to out_dir/train.bin (out_dir is created
// if missing), each encoded with the tokenizer -- a subword model in pieces of about 1 MB cut after
// a newline, on `threads` threads (the model adds no leading space, so the cuts change nothing).
// The same text lands in val.bin whatever the tokenizer, so bits per byte compare across them.
//
// With `documents`, each input is a document instead, and one goes to val.bin when the 64-bit
// FNV-1a hash of its final text (converted, normalized, deduplicated), modulo 2^20, is below
// val_fraction * 2^20: deterministic, independent of the order of the inputs, and no document on
// both sides. Each side is its kept documents in input order with a blank line between two. The
// text goes to out_dir/train.txt and val.txt, the figures to out_dir/MANIFEST.txt (one a line). The
// outputs depend on the inputs alone (not on `threads`), byte for byte -- tokenizer_vocab's model
// too, though SentencePiece records in it the path of the train.txt it was trained on.
//
// One-line errors, nothing written: std::runtime_error for an input that cannot be read;
// std::invalid_argument for an input or list that is missing or not a regular file, an empty
// input (documents mode skips it instead), no inputs, no out_dir, a fraction outside (0, 1), a
// tokenizer that does not load, tokenizer and tokenizer_vocab together, dedupe without documents,
// tokenizer_vocab outside [kMinTrainedVocab, kMaxTrainedVocab], or too little text for two tokens
// on each side. A tokenizer that fails to train (SentencePiece's message, std::runtime_error) leaves
// nothing behind either.
PrepareResult prepare_shards(const PrepareOptions& options);

}  // namespace atl::runtime
