#include "runtime/data/parquet_documents.h"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/schema.h>

#include <filesystem>
#include <stdexcept>

#include "runtime/data/text_documents.h"

namespace atl::runtime {
namespace {

class ParquetDocuments : public DocumentReader {
 public:
  ParquetDocuments(const std::string& path, const ReadOptions& options) : path_(path), options_(options) {
    auto file = arrow::io::ReadableFile::Open(path);
    if (!file.ok())
      throw std::runtime_error("data prepare: cannot read input " + path + " (" + file.status().message() +
                               "); check its permissions");
    auto reader = parquet::arrow::OpenFile(*file, arrow::default_memory_pool());
    if (!reader.ok()) unreadable(reader.status());
    reader_ = std::move(*reader);
    std::shared_ptr<arrow::Schema> schema;
    if (const arrow::Status status = reader_->GetSchema(&schema); !status.ok()) unreadable(status);
    const std::shared_ptr<arrow::Field> field = schema->GetFieldByName(options.text_field);
    if (!field) {
      std::string columns;
      for (const auto& f : schema->fields()) columns += (columns.empty() ? "" : ", ") + f->name();
      throw std::invalid_argument("data prepare: input " + path + " (Parquet) has no column \"" +
                                  options.text_field + "\" (its columns: " + columns +
                                  "); pass --text-field NAME to read another column");
    }
    const arrow::Type::type type = field->type()->id();
    if (type != arrow::Type::STRING && type != arrow::Type::LARGE_STRING)
      throw std::invalid_argument("data prepare: input " + path + " (Parquet) has a column \"" +
                                  options.text_field + "\" of type " + field->type()->ToString() +
                                  ", not string; pass --text-field NAME for the text column");
    column_ = reader_->parquet_reader()->metadata()->schema()->ColumnIndex(options.text_field);
    if (column_ < 0)
      throw std::invalid_argument("data prepare: input " + path + " (Parquet): the column \"" +
                                  options.text_field +
                                  "\" is nested; pass --text-field NAME of a top-level "
                                  "string column");
    file_bytes_ = static_cast<int64_t>(std::filesystem::file_size(path));
  }

  bool next(Document& document) override {
    for (;;) {
      while (!chunk_ || row_ >= chunk_->length()) {
        if (!next_chunk()) return false;
      }
      const int64_t row = row_++;
      const std::string where =
          "row " + std::to_string(group_row_++) + " of row group " + std::to_string(group_ - 1);
      if (chunk_->IsNull(row)) {
        bad(where + " has a null \"" + options_.text_field + "\"; drop such rows,");
        continue;
      }
      document.text = chunk_->type_id() == arrow::Type::STRING
                          ? std::string(static_cast<const arrow::StringArray&>(*chunk_).GetView(row))
                          : std::string(static_cast<const arrow::LargeStringArray&>(*chunk_).GetView(row));
      document.continues = false;
      document.html = false;
      // Parquet's string type promises UTF-8 but its writers do not all check.
      try {
        check_utf8_text(document.text, "input " + path_ + " " + where, 0);
      } catch (const std::invalid_argument&) {
        if (!options_.skip_bad_records) throw;
        ++skipped_;
        continue;
      }
      return true;
    }
  }
  int64_t skipped() const override { return skipped_; }
  // Whole row groups: the file's bytes in proportion to the row groups read.
  int64_t consumed() const override {
    const int groups = reader_->num_row_groups();
    return groups == 0 ? file_bytes_ : file_bytes_ * group_ / groups;
  }

 private:
  // Moves to the next array of the column, reading the next row group when this one is done.
  bool next_chunk() {
    for (;;) {
      if (table_ && ++chunk_index_ < table_->column(0)->num_chunks()) {
        chunk_ = table_->column(0)->chunk(chunk_index_);
        row_ = 0;
        return true;
      }
      chunk_.reset();
      table_.reset();  // the row group read before is released before the next is read
      if (group_ >= reader_->num_row_groups()) return false;
      auto table = reader_->ReadRowGroup(group_, {column_});
      if (!table.ok())
        throw std::invalid_argument("data prepare: input " + path_ + " row group " + std::to_string(group_) +
                                    " cannot be read (" + table.status().message() +
                                    "); re-download or rewrite the file");
      ++group_;
      group_row_ = 0;
      table_ = *table;
      chunk_index_ = -1;
    }
  }
  void bad(const std::string& problem) {
    if (!options_.skip_bad_records)
      throw std::invalid_argument("data prepare: input " + path_ + " " + problem +
                                  " or pass --skip-bad-records to skip such records");
    ++skipped_;
  }
  [[noreturn]] void unreadable(const arrow::Status& status) const {
    throw std::invalid_argument("data prepare: input " + path_ + " is not a readable Parquet file (" +
                                status.message() + "); re-download or rewrite it");
  }

  std::string path_;
  ReadOptions options_;
  std::unique_ptr<parquet::arrow::FileReader> reader_;
  int column_ = -1;
  int64_t file_bytes_ = 0;
  int group_ = 0;  // row groups read
  std::shared_ptr<arrow::Table> table_;
  int chunk_index_ = -1;
  std::shared_ptr<arrow::Array> chunk_;
  int64_t row_ = 0, group_row_ = 0, skipped_ = 0;
};

}  // namespace

std::unique_ptr<DocumentReader> open_parquet_documents(const std::string& path, const ReadOptions& options) {
  return std::make_unique<ParquetDocuments>(path, options);
}

}  // namespace atl::runtime
