#include "runtime/data/prepare_outputs.h"

#include <fstream>
#include <stdexcept>
#include <system_error>

namespace atl::runtime {

PrepareOutputs::~PrepareOutputs() {
  if (kept_) return;
  std::error_code ignored;
  for (auto it = files_.rbegin(); it != files_.rend(); ++it) std::filesystem::remove(*it, ignored);
  for (auto it = folders_.rbegin(); it != folders_.rend(); ++it) std::filesystem::remove(*it, ignored);
}

std::string PrepareOutputs::add(const std::string& name) {
  namespace fs = std::filesystem;
  if (!created_) {
    for (fs::path folder = fs::absolute(dir_); !folder.empty() && !fs::exists(folder);
         folder = folder.parent_path()) {
      folders_.insert(folders_.begin(), folder);
      if (folder == folder.parent_path()) break;
    }
    std::error_code error;
    fs::create_directories(dir_, error);
    if (error)
      throw std::runtime_error("data prepare: cannot create " + dir_ + " (" + error.message() +
                               "); check the --out path");
    created_ = true;
  }
  const std::string path = (fs::path(dir_) / name).string();
  files_.push_back(path);
  return path;
}

std::string PrepareOutputs::write(const std::string& name, std::string_view bytes) {
  const std::string path = add(name);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("data prepare: cannot write " + path + "; check the --out path");
  return path;
}

}  // namespace atl::runtime
