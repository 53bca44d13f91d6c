#include "runtime/data/jsonl_documents.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace atl::runtime {
namespace {

class JsonlDocuments : public DocumentReader {
 public:
  JsonlDocuments(const std::string& path, std::unique_ptr<ByteStream> stream, const ReadOptions& options)
      : path_(path), stream_(std::move(stream)), options_(options) {}

  bool next(Document& document) override {
    std::string line;
    while (next_line(line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      std::string problem = text_of(line, document.text);
      if (problem.empty()) {
        document.continues = false;
        document.html = false;
        return true;
      }
      if (!options_.skip_bad_records)
        throw std::invalid_argument("data prepare: input " + path_ + " line " + std::to_string(line_) + " " +
                                    problem + " or pass --skip-bad-records to skip such records");
      ++skipped_;
    }
    return false;
  }
  int64_t skipped() const override { return skipped_; }
  int64_t consumed() const override { return stream_->consumed(); }

 private:
  // The next line without its newline; false at the end of the stream.
  bool next_line(std::string& line) {
    for (;;) {
      const size_t newline = buffer_.find('\n', scanned_);
      if (newline != std::string::npos) {
        line.assign(buffer_, 0, newline);
        buffer_.erase(0, newline + 1);
        scanned_ = 0;
        ++line_;
        return true;
      }
      scanned_ = buffer_.size();
      constexpr size_t kRead = size_t{1} << 20;
      buffer_.resize(scanned_ + kRead);
      const size_t got = stream_->read(buffer_.data() + scanned_, kRead);
      buffer_.resize(scanned_ + got);
      if (got == 0) {
        if (buffer_.empty()) return false;
        line = std::move(buffer_);  // a last line without a newline
        buffer_.clear();
        scanned_ = 0;
        ++line_;
        return true;
      }
    }
  }

  // Sets `text` to the record's field and returns "", or returns what is wrong and how to fix it.
  std::string text_of(const std::string& line, std::string& text) const {
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      std::string why = e.what();
      const size_t start = why.find("] ");  // past nlohmann's "[json.exception.parse_error.101] "
      if (start != std::string::npos) why.erase(0, start + 2);
      return "is not JSON (" + why + "); fix the line,";
    }
    const std::string field = "\"" + options_.text_field + "\"";
    if (!record.is_object())
      return "is a JSON " + std::string(record.type_name()) + ", not an object; fix the line,";
    const auto found = record.find(options_.text_field);
    if (found == record.end()) {
      std::string fields;
      for (const auto& item : record.items()) fields += (fields.empty() ? "" : ", ") + item.key();
      return "has no field " + field + " (its fields: " + (fields.empty() ? "none" : fields) +
             "); pass --text-field NAME to read another field,";
    }
    if (!found->is_string())
      return "has a field " + field + " that is " + std::string(found->type_name()) +
             ", not a string; pass --text-field NAME for the text field,";
    text = found->get<std::string>();
    return "";
  }

  std::string path_;
  std::unique_ptr<ByteStream> stream_;
  ReadOptions options_;
  std::string buffer_;
  size_t scanned_ = 0;  // bytes of buffer_ known to hold no newline
  int64_t line_ = 0, skipped_ = 0;
};

}  // namespace

std::unique_ptr<DocumentReader> open_jsonl_documents(const std::string& path,
                                                     std::unique_ptr<ByteStream> stream,
                                                     const ReadOptions& options) {
  return std::make_unique<JsonlDocuments>(path, std::move(stream), options);
}

}  // namespace atl::runtime
