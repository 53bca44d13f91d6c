// A file memory-mapped read-only, as the shard readers read their files in place: the pages come
// from the page cache on demand, so a shard of any size costs address space, not memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace atl::runtime {

class MappedFile {
 public:
  // Throws std::runtime_error "data: PATH <problem>; <fix>" for a missing, unreadable or
  // non-regular file. An empty file maps to no bytes.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const unsigned char* bytes() const { return static_cast<const unsigned char*>(map_); }
  int64_t size() const { return static_cast<int64_t>(bytes_); }

 private:
  void unmap();

  void* map_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace atl::runtime
