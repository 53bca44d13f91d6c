// Text and HTML inputs of `atoll data prepare`: one document per file, its bytes checked to be UTF-8.
#pragma once

#include <memory>
#include <string>

#include "runtime/data/document_source.h"

namespace atl::runtime {

// whole_file: the file is one Document, read whole; otherwise blocks of about kTextBlockBytes, all
// but the first marked `continues`. An empty file is std::invalid_argument when read in blocks (the
// joined stream would have a gap); read whole it is one empty document. Read whole, the file is a
// record: with skip_bad_records, one that is not UTF-8 is skipped (no document) and counted.
std::unique_ptr<DocumentReader> open_text_documents(const std::string& path, bool whole_file,
                                                    bool skip_bad_records);

// Throws std::invalid_argument naming `where` unless `text` is UTF-8 without NUL bytes: the
// refusal of binary input. `offset` is where `text` starts in the file, for the message.
void check_utf8_text(std::string_view text, const std::string& where, int64_t offset);

}  // namespace atl::runtime
