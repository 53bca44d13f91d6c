#include "runtime/data/byte_stream.h"

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace atl::runtime {
namespace {

class FileStream : public ByteStream {
 public:
  explicit FileStream(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) throw std::runtime_error("data prepare: cannot read input " + path + "; check its permissions");
  }
  size_t read(char* out, size_t size) override {
    in_.read(out, static_cast<std::streamsize>(size));
    if (in_.bad()) throw std::runtime_error("data prepare: reading input " + path_ + " failed");
    const auto got = static_cast<size_t>(in_.gcount());
    consumed_ += static_cast<int64_t>(got);
    return got;
  }
  int64_t consumed() const override { return consumed_; }

 private:
  std::string path_;
  std::ifstream in_;
  int64_t consumed_ = 0;
};

}  // namespace

std::unique_ptr<ByteStream> open_file_stream(const std::string& path) {
  return std::make_unique<FileStream>(path);
}

std::string file_head(const std::string& path, size_t count) {
  std::string head(count, '\0');
  const size_t got = open_file_stream(path)->read(head.data(), count);
  head.resize(got);
  return head;
}

}  // namespace atl::runtime
