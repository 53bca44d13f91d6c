// `atoll data prepare`: inputs -> train/val token shards, with the byte-level tokenizer (vocab 256:
// token = byte value), a SentencePiece model (atoll tokenizer train, or trained here on the training
// side's text), Llama 3's tiktoken BPE or a tokenizer.json, encoded in parallel. Inputs are text,
// HTML, JSONL (.jsonl, .jsonl.gz, .jsonl.zst) or Parquet files, directories of them or globs, each
// format read by its own reader behind one stream of documents (document_source.h), streamed so
// that memory stays bounded whatever their size. With `documents`, every text file and every JSONL
// or Parquet record is one document (HTML converted to text, runtime/data/html_text.h), optionally
// deduplicated, and the split into train and val is by document, so a corpus of many pages never
// has one page on both sides. Each side becomes shards of at most shard_tokens tokens
// (split_shards.h), listed with their tokens, documents and source files in MANIFEST.txt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/data/split_shards.h"

namespace atl::runtime {

constexpr int64_t kDefaultShardTokens = 1'000'000'000;
constexpr int64_t kMaxShardTokens = 2'147'483'647;  // llm.c's header counts tokens in an int32
// Encoding threads: each holds up to ~4 MB of text in flight, so 256 hold about 1 GB.
constexpr int kMaxPrepareThreads = 256;

struct PrepareOptions {
  // Files, directories (every file under them, in name order, hidden ones left out) or globs.
  std::vector<std::string> inputs;
  std::string out_dir;
  double val_fraction = 0.05;
  std::string tokenizer = "bytes";  // or a SentencePiece .model file
  int threads = 0;  // encoding threads, beside the reading one, at most kMaxPrepareThreads; 0: usable_cpus()
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
  // The JSONL field / Parquet column holding a record's text, and whether a bad record (see
  // ReadOptions) is skipped and counted rather than an error.
  std::string text_field = "text";
  bool skip_bad_records = false;
  // The most tokens one shard holds; a side with more is split into numbered shards.
  int64_t shard_tokens = kDefaultShardTokens;
  // Called as inputs are read and encoded: input bytes done (compressed bytes for compressed
  // inputs), input bytes in all (a progress line); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

constexpr size_t kDedupeLineBytes = 48;
constexpr int kMinTrainedVocab = 260;  // 256 bytes + <unk>, <s>, </s> + a merge
constexpr int kMaxTrainedVocab = 1'048'576;

// What documents mode kept and dropped (all zero without it).
struct DocumentCounts {
  int64_t inputs = 0;                // files
  int64_t records = 0;               // documents read: text files and JSONL / Parquet records
  int64_t skipped = 0;               // bad records skipped (skip_bad_records)
  int64_t html = 0;                  // inputs converted from HTML
  int64_t train = 0, val = 0;        // documents kept on each side
  int64_t empty = 0;                 // no text after conversion
  int64_t duplicate = 0;             // identical to an earlier document (dedupe)
  int64_t emptied = 0;               // nothing left once duplicate lines were dropped (dedupe)
  int64_t duplicate_lines = 0;       // dropped (dedupe)
  int64_t duplicate_line_bytes = 0;  // their bytes, newlines not counted
};

struct PrepareResult {
  // The first shard of each side: DIR/train.bin and DIR/val.bin when each fits one shard.
  std::string train_path, val_path;
  std::vector<ShardSummary> train_shards, val_shards;
  std::string
      tokenizer_path;  // out_dir/tokenizer.model: a copy of the model, or the one trained; "" for bytes
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t train_bytes = 0, val_bytes = 0;  // of text
  int bytes_per_token = 2;                 // in the shards: 2 (uint16) up to vocab 65536, else 4
  int vocab = 256;                         // of the tokenizer the shards were encoded with
  // out_dir/train.txt and val.txt, the text that was tokenized (documents or tokenizer_vocab), and
  // out_dir/MANIFEST.txt (always); empty when not written.
  std::string train_text_path, val_text_path, manifest_path;
  DocumentCounts documents;
};

// Concatenates the inputs (text files only) in order ("\n" between files) and splits the text: the
// last val_fraction of its bytes go to out_dir/val.bin, the rest to out_dir/train.bin (out_dir is
// created if missing), each encoded with the tokenizer -- a subword model in pieces of about 1 MB cut
// after a newline, on `threads` threads while the calling thread reads on (the model adds no
// leading space, so the cuts change nothing). The same text lands in val.bin whatever the tokenizer, so bits
// per byte compare.
//
// With `documents`, each text file and each JSONL or Parquet record is a document instead, and one
// goes to val when the 64-bit FNV-1a hash of its final text (converted, normalized, deduplicated),
// modulo 2^20, is below val_fraction * 2^20: deterministic, independent of the order of the
// inputs, and no document on both sides. Each side is its kept documents in input order, framed as
// the tokenizer's family expects (side_encoder.h): a blank line between two for bytes and
// SentencePiece, Llama 3's <|begin_of_text|> before each for its BPE. The text goes to
// out_dir/train.txt and val.txt. The outputs depend on the inputs alone (not on `threads`), byte for
// byte -- tokenizer_vocab's model too, though SentencePiece records in it the path of the train.txt
// it was trained on. Memory holds a few pieces per thread, a record, and with dedupe every distinct
// document and long line.
//
// One-line errors, nothing written: std::runtime_error for an input that cannot be read;
// std::invalid_argument for an input, directory or glob that names no file, an empty input
// (documents mode skips it instead), a file that is not UTF-8 text nor a format read here, a bad
// record (malformed JSON, no string text_field; skipped and counted with skip_bad_records), a
// Parquet file without that column, a corrupt compressed file, JSONL or Parquet without documents,
// no inputs, no out_dir, a fraction outside (0, 1), shard_tokens outside [1, kMaxShardTokens],
// threads outside [0, kMaxPrepareThreads], a
// tokenizer that does not load, tokenizer and tokenizer_vocab together, dedupe without documents,
// tokenizer_vocab outside [kMinTrainedVocab, kMaxTrainedVocab], or too little text for two tokens
// on each side. A tokenizer that fails to train (SentencePiece's message, std::runtime_error) leaves
// nothing behind either.
PrepareResult prepare_shards(const PrepareOptions& options);

}  // namespace atl::runtime
