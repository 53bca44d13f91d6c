// The files `atoll data prepare` writes into its output directory, and the folders it creates (on
// the first file): removed again unless kept, so a failure part-way (bad input found late, a
// tokenizer that does not train, too few tokens) leaves nothing behind.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace atl::runtime {

class PrepareOutputs {
 public:
  explicit PrepareOutputs(std::string dir) : dir_(std::move(dir)) {}
  PrepareOutputs(const PrepareOutputs&) = delete;
  PrepareOutputs& operator=(const PrepareOutputs&) = delete;
  ~PrepareOutputs();

  // The path of out_dir/name, which the caller is about to write.
  std::string add(const std::string& name);
  // Writes `bytes` to out_dir/name; returns its path.
  std::string write(const std::string& name, std::string_view bytes);
  void keep() { kept_ = true; }

 private:
  std::string dir_;
  bool created_ = false, kept_ = false;
  std::vector<std::string> files_;
  std::vector<std::filesystem::path> folders_;  // created, outermost first
};

}  // namespace atl::runtime
