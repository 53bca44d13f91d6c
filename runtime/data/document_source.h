// One stream of documents from the inputs of `atoll data prepare`, whatever their format: each
// format has its own reader (text_documents.h, jsonl_documents.h, parquet_documents.h) behind
// DocumentReader, and open_documents picks the reader from the file's first bytes and its name.
//
//   text or HTML        one document per file (read in blocks of kTextBlockBytes for the joined stream)
//   .jsonl / .ndjson    one document per line: the string field `text_field`
//   .jsonl.gz / .zst    the same, decompressed on the way (gzip, Zstandard)
//   Parquet             one document per row: the string column `text_field`, a row group at a time
//
// Anything else that is not UTF-8 text -- another compressed or binary format, bytes that are not
// UTF-8 -- is refused with one line, never tokenized as text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace atl::runtime {

struct ReadOptions {
  std::string text_field = "text";  // JSONL field, Parquet column
  // A bad record (a line that is not JSON, has no string `text_field`, is not UTF-8; a null value;
  // in documents mode a text file that is not UTF-8) is skipped and counted instead of stopping the
  // run. Damage to a whole file (corrupt compression, a missing column) is never skipped.
  bool skip_bad_records = false;
};

struct Document {
  std::string text;
  // For text files read in blocks: this block continues the document before (same file).
  bool continues = false;
  bool html = false;  // a text file named or starting like HTML, to convert (html_text.h)
};

class DocumentReader {
 public:
  virtual ~DocumentReader() = default;
  // The next document (or block), false at the end. Bad input: std::invalid_argument, one line
  // naming the file, the line or row group, the problem and the fix.
  virtual bool next(Document& document) = 0;
  // Bad records skipped so far (ReadOptions::skip_bad_records).
  virtual int64_t skipped() const { return 0; }
  // Bytes of the file consumed so far (compressed bytes for compressed inputs): progress.
  virtual int64_t consumed() const = 0;
};

enum class InputFormat { kText, kJsonl, kJsonlGzip, kJsonlZstd, kParquet };
const char* format_name(InputFormat format);

// The format of the file at `path`, from its first bytes and its name; std::invalid_argument naming
// the file and the fix for a compressed or binary file of a kind Atoll does not read.
InputFormat input_format(const std::string& path);

// Whether the format holds records (JSONL, Parquet): each record is one document.
bool holds_records(InputFormat format);

// A reader of the file's documents. `whole_files`: a text file is one document, read whole (for
// conversion); otherwise it comes in blocks marked `continues`.
std::unique_ptr<DocumentReader> open_documents(const std::string& path, InputFormat format,
                                               const ReadOptions& options, bool whole_files);

// Text blocks of a file read in parts: about this many bytes each, cut after a newline or at least
// on a UTF-8 character boundary.
constexpr size_t kTextBlockBytes = size_t{16} << 20;

}  // namespace atl::runtime
