#include "runtime/data/dataset.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

namespace atl::runtime {
namespace {

bool is_glob(const std::string& path) {
  return path.find_first_of("*?[") != std::string::npos;
}

std::vector<std::string> glob_matches(const std::string& pattern) {
  glob_t found{};
  const int status = ::glob(pattern.c_str(), 0, nullptr, &found);
  std::vector<std::string> files;
  if (status == 0)
    for (size_t i = 0; i < found.gl_pathc; ++i) files.emplace_back(found.gl_pathv[i]);
  ::globfree(&found);
  std::sort(files.begin(), files.end());
  return files;
}

// The regular *.bin files of `dir` whose name starts with `prefix`, sorted.
std::vector<std::string> shards_in(const std::filesystem::path& dir, const std::string& prefix) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.starts_with(prefix) && entry.path().extension() == ".bin")
      files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::vector<std::string> dataset_files(const std::string& path, DataSplit split) {
  if (is_glob(path)) {
    std::vector<std::string> files = glob_matches(path);
    if (files.empty())
      throw std::runtime_error("data: " + path +
                               " matches no file; check the pattern, or run `atoll data prepare` first");
    return files;
  }
  std::error_code error;
  if (!std::filesystem::is_directory(path, error)) return {path};  // a file, or what open_shard reports
  std::vector<std::string> files = shards_in(path, split == DataSplit::kTrain ? "train" : "val");
  if (files.empty()) files = shards_in(path, "");
  if (files.empty())
    throw std::runtime_error("data: directory " + path +
                             " holds no .bin shard; point data.train/data.val at one that `atoll data "
                             "prepare` wrote, or at the shards themselves");
  return files;
}

Dataset::Dataset(std::string name, std::vector<std::unique_ptr<Shard>> shards, int seq)
    : name_(std::move(name)), shards_(std::move(shards)), seq_(seq) {
  first_sequence_.push_back(0);
  for (const std::unique_ptr<Shard>& shard : shards_) {
    tokens_ += shard->size();
    first_sequence_.push_back(first_sequence_.back() + (shard->size() - 1) / seq_);
  }
  if (num_sequences() < 1)
    throw std::runtime_error(
        "data: " + name_ + " holds " + std::to_string(tokens_) +
        " tokens, fewer than one sequence of model.seq + 1 = " + std::to_string(seq_ + 1) +
        (shards_.size() > 1 ? " in any of its shards" : "") + "; use a larger shard or a smaller model.seq");
}

Dataset::Location Dataset::locate(int64_t index) const {
  if (index < 0 || index >= num_sequences())
    throw std::out_of_range("data: " + name_ + " holds " + std::to_string(num_sequences()) +
                            " sequences, asked for sequence " + std::to_string(index));
  // The last shard whose first sequence is at or before `index` (shards without a sequence share
  // their first sequence with the next one, which upper_bound skips past).
  const auto after = std::upper_bound(first_sequence_.begin(), first_sequence_.end(), index);
  const size_t shard = static_cast<size_t>(after - first_sequence_.begin()) - 1;
  return {shards_[shard].get(), (index - first_sequence_[shard]) * seq_};
}

void Dataset::read_sequence(int64_t index, int64_t* out) const {
  const Location where = locate(index);
  where.shard->read(where.position, seq_ + 1, out);
}

std::vector<DatasetUse> dataset_uses(const std::vector<Dataset>& datasets, const std::vector<double>& weights,
                                     int64_t sequences_in_run) {
  double total = 0;
  for (double w : weights) total += w;
  std::vector<DatasetUse> uses;
  for (size_t d = 0; d < datasets.size(); ++d) {
    const Dataset& dataset = datasets[d];
    const double share = weights[d] / total;
    uses.push_back(
        {dataset.name(), static_cast<int64_t>(dataset.shards().size()), dataset.tokens(),
         dataset.num_sequences(), weights[d], share,
         share * static_cast<double>(sequences_in_run) / static_cast<double>(dataset.num_sequences())});
  }
  return uses;
}

Dataset open_dataset(const std::string& path, DataSplit split, int seq) {
  std::vector<std::unique_ptr<Shard>> shards;
  for (const std::string& file : dataset_files(path, split)) shards.push_back(open_shard(file));
  return Dataset(path, std::move(shards), seq);
}

}  // namespace atl::runtime
