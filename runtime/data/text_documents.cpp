#include "runtime/data/text_documents.h"

#include <cstdio>
#include <stdexcept>

#include "runtime/data/byte_stream.h"
#include "runtime/data/html_text.h"
#include "runtime/data/utf8.h"

namespace atl::runtime {
namespace {

class TextDocuments : public DocumentReader {
 public:
  TextDocuments(const std::string& path, bool whole_file, bool skip_bad_records)
      : path_(path), stream_(open_file_stream(path)), whole_file_(whole_file), skip_bad_(skip_bad_records) {}

  bool next(Document& document) override {
    if (done_) return false;
    document.continues = blocks_ > 0;
    if (whole_file_) {
      document.text.clear();
      fill(document.text, SIZE_MAX);
      done_ = true;
    } else {
      // The carry-over of the last block, then more bytes, cut after the last newline.
      document.text = std::move(carry_);
      carry_.clear();
      fill(document.text, kTextBlockBytes);
      if (document.text.empty()) {
        if (blocks_ == 0)
          throw std::invalid_argument("data prepare: input " + path_ +
                                      " is empty; check that it was written completely");
        return false;
      }
      if (!ended_) {
        const size_t newline = document.text.rfind('\n');
        const size_t cut = newline != std::string::npos ? newline + 1 : utf8_boundary(document.text);
        carry_.assign(document.text, cut);
        document.text.resize(cut);
      }
    }
    try {
      check_utf8_text(document.text, "input " + path_, offset_);
    } catch (const std::invalid_argument&) {
      if (!(whole_file_ && skip_bad_)) throw;
      skipped_ = 1;
      return false;
    }
    offset_ += static_cast<int64_t>(document.text.size());
    document.html = looks_like_html(path_, document.text) && blocks_ == 0;
    ++blocks_;
    if (ended_ && carry_.empty()) done_ = true;
    return true;
  }
  int64_t consumed() const override { return stream_->consumed(); }
  int64_t skipped() const override { return skipped_; }

 private:
  // Appends bytes until `text` holds `limit` or the file ends.
  void fill(std::string& text, size_t limit) {
    constexpr size_t kRead = size_t{1} << 20;
    while (text.size() < limit && !ended_) {
      const size_t before = text.size();
      text.resize(before + kRead);
      const size_t got = stream_->read(text.data() + before, kRead);
      text.resize(before + got);
      if (got == 0) ended_ = true;
    }
  }

  std::string path_;
  std::unique_ptr<ByteStream> stream_;
  bool whole_file_, skip_bad_, ended_ = false, done_ = false;
  std::string carry_;
  int64_t blocks_ = 0, offset_ = 0, skipped_ = 0;
};

}  // namespace

void check_utf8_text(std::string_view text, const std::string& where, int64_t offset) {
  const size_t bad = invalid_utf8_at(text);
  if (bad == text.size()) return;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[bad]));
  throw std::invalid_argument("data prepare: " + where + " is not UTF-8 text (byte " + byte + " at offset " +
                              std::to_string(offset + static_cast<int64_t>(bad)) +
                              "); Atoll reads UTF-8 text, HTML, JSONL (.jsonl, .jsonl.gz, .jsonl.zst) and "
                              "Parquet: convert it (e.g. iconv -t UTF-8) or leave it out");
}

std::unique_ptr<DocumentReader> open_text_documents(const std::string& path, bool whole_file,
                                                    bool skip_bad_records) {
  return std::make_unique<TextDocuments>(path, whole_file, skip_bad_records);
}

}  // namespace atl::runtime
