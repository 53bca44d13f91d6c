#include "launcher/plan_data.h"

#include <exception>

#include "runtime/data/dataset.h"
#include "runtime/metrics/data_lines.h"

namespace atl::launcher {

std::string format_data_plan(const runtime::Config& config) {
  std::vector<runtime::Dataset> datasets;
  std::vector<double> weights;
  try {
    for (const runtime::DatasetSource& source : config.data.train) {
      datasets.push_back(runtime::open_dataset(source.path, runtime::DataSplit::kTrain, config.model.seq));
      weights.push_back(source.weight);
    }
  } catch (const std::exception& e) {
    return std::string("\ndata: not read here (") + e.what() + ")\n";
  }
  const int64_t sequences = static_cast<int64_t>(config.train.steps) * config.train.global_batch;
  std::string text = "\n";
  for (const std::string& line :
       runtime::data_lines(runtime::dataset_uses(datasets, weights, sequences), config.model.seq, ""))
    text += line + "\n";
  return text;
}

}  // namespace atl::launcher
