#include "runtime/data/document_source.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string_view>

#include "runtime/data/byte_stream.h"
#include "runtime/data/jsonl_documents.h"
#include "runtime/data/parquet_documents.h"
#include "runtime/data/text_documents.h"

namespace atl::runtime {
namespace {

bool ends_with(std::string_view name, std::string_view suffix) {
  return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
}

std::string lowercase_name(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Whether the name says JSONL under `compression` (".gz", ".zst" or "").
bool named_jsonl(const std::string& name, std::string_view compression) {
  for (const char* kind : {".jsonl", ".ndjson", ".json"})
    if (ends_with(name, std::string(kind) + std::string(compression))) return true;
  return false;
}

// Compressed and binary formats Atoll does not read, by their first bytes.
struct Magic {
  std::string_view bytes;
  const char* kind;
};
constexpr Magic kForeign[] = {
    {"\xfd\x37\x7a\x58\x5a\x00", "xz"},
    {"BZh", "bzip2"},
    {"PK\x03\x04", "zip"},
    {"7z\xbc\xaf\x27\x1c", "7-Zip"},
    {"\x04\x22\x4d\x18", "LZ4"},
    {"\x89HDF", "HDF5"},
    {"\x93NUMPY", "NumPy"},
    {"ARROW1", "Arrow IPC"},
};

}  // namespace

const char* format_name(InputFormat format) {
  switch (format) {
    case InputFormat::kText:
      return "text";
    case InputFormat::kJsonl:
      return "JSONL";
    case InputFormat::kJsonlGzip:
      return "JSONL (gzip)";
    case InputFormat::kJsonlZstd:
      return "JSONL (zstd)";
    case InputFormat::kParquet:
      return "Parquet";
  }
  return "?";
}

bool holds_records(InputFormat format) {
  return format != InputFormat::kText;
}

InputFormat input_format(const std::string& path) {
  const std::string head = file_head(path, 8);
  const std::string name = lowercase_name(path);
  const auto starts = [&](std::string_view magic) {
    return std::string_view(head).substr(0, magic.size()) == magic;
  };
  const std::string reads =
      "; Atoll reads UTF-8 text, HTML, JSONL (.jsonl, .jsonl.gz, .jsonl.zst) and Parquet";
  if (starts("PAR1")) return InputFormat::kParquet;
  if (ends_with(name, ".parquet"))
    throw std::invalid_argument("data prepare: input " + path +
                                " is named .parquet but does not start with Parquet's PAR1; re-download or "
                                "rewrite it, or rename it if it is something else" +
                                reads);
  if (starts("\x1f\x8b")) {
    if (named_jsonl(name, ".gz")) return InputFormat::kJsonlGzip;
    throw std::invalid_argument("data prepare: input " + path +
                                " is gzip-compressed, which Atoll reads as JSONL only (named .jsonl.gz); "
                                "decompress it (gunzip), or name it .jsonl.gz if it is JSONL");
  }
  if (starts("\x28\xb5\x2f\xfd")) {
    if (named_jsonl(name, ".zst")) return InputFormat::kJsonlZstd;
    throw std::invalid_argument("data prepare: input " + path +
                                " is Zstandard-compressed, which Atoll reads as JSONL only (named "
                                ".jsonl.zst); decompress it (zstd -d), or name it .jsonl.zst if it is JSONL");
  }
  for (const Magic& magic : kForeign)
    if (starts(magic.bytes))
      throw std::invalid_argument("data prepare: input " + path + " is a " + magic.kind +
                                  " file, not a format Atoll reads" + reads + ": convert it or leave it out");
  if (ends_with(name, ".gz") || ends_with(name, ".zst"))
    throw std::invalid_argument("data prepare: input " + path +
                                " is named as compressed but its bytes are not gzip or Zstandard; "
                                "re-download it, or rename it if it is plain text");
  if (named_jsonl(name, "")) return InputFormat::kJsonl;
  return InputFormat::kText;
}

std::unique_ptr<DocumentReader> open_documents(const std::string& path, InputFormat format,
                                               const ReadOptions& options, bool whole_files) {
  switch (format) {
    case InputFormat::kText:
      return open_text_documents(path, whole_files, options.skip_bad_records);
    case InputFormat::kJsonl:
      return open_jsonl_documents(path, open_file_stream(path), options);
    case InputFormat::kJsonlGzip:
      return open_jsonl_documents(path, open_gzip_stream(path), options);
    case InputFormat::kJsonlZstd:
      return open_jsonl_documents(path, open_zstd_stream(path), options);
    case InputFormat::kParquet:
      return open_parquet_documents(path, options);
  }
  throw std::logic_error("open_documents: unknown format");
}

}  // namespace atl::runtime
