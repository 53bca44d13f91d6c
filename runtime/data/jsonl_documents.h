// JSONL inputs of `atoll data prepare` (plain, gzip or Zstandard): one document per line, the string
// field ReadOptions::text_field of the line's object. Blank lines are no records and are passed over.
#pragma once

#include <memory>
#include <string>

#include "runtime/data/byte_stream.h"
#include "runtime/data/document_source.h"

namespace atl::runtime {

// The documents of the JSONL bytes of `stream`; `path` names the file in messages.
std::unique_ptr<DocumentReader> open_jsonl_documents(const std::string& path,
                                                     std::unique_ptr<ByteStream> stream,
                                                     const ReadOptions& options);

}  // namespace atl::runtime
