// Parquet inputs of `atoll data prepare` (Apache Arrow's C++ reader, from the pyarrow wheel): one
// document per row, the string column ReadOptions::text_field, read one row group at a time so that
// memory holds a row group's column, never the file.
#pragma once

#include <memory>
#include <string>

#include "runtime/data/document_source.h"

namespace atl::runtime {

// A file that Arrow cannot read as Parquet, or without a string column named text_field, is
// std::invalid_argument naming it; a null value is a bad record (row group and row named).
std::unique_ptr<DocumentReader> open_parquet_documents(const std::string& path, const ReadOptions& options);

}  // namespace atl::runtime
