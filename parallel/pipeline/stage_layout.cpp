#include "parallel/pipeline/stage_layout.h"

#include <numeric>
#include <stdexcept>

namespace atl::parallel::pipeline {

std::string stage_layers_problem(int layers, int stages, int virtual_stages,
                                 const std::vector<int>& stage_layers) {
  const int parts = stages * virtual_stages;
  if (stage_layers.empty()) {
    if (layers % parts == 0) return "";
    return "config: model.layers = " + std::to_string(layers) +
           " does not split evenly over pp*virtual_stages = " + std::to_string(parts) +
           " virtual stages; use a multiple of " + std::to_string(parts) +
           " layers or list the layers of each virtual stage in parallel.stage_layers";
  }
  if (static_cast<int>(stage_layers.size()) != parts)
    return "config: parallel.stage_layers has " + std::to_string(stage_layers.size()) +
           " entries but there are " + std::to_string(parts) +
           " virtual stages (pp*virtual_stages); give one layer count per virtual stage";
  for (int count : stage_layers)
    if (count < 1)
      return "config: parallel.stage_layers holds " + std::to_string(count) +
             "; every virtual stage needs at least one layer";
  const int total = std::accumulate(stage_layers.begin(), stage_layers.end(), 0);
  if (total != layers)
    return "config: parallel.stage_layers sums to " + std::to_string(total) +
           " but model.layers = " + std::to_string(layers) + "; make the counts add up to model.layers";
  return "";
}

std::vector<LayerRange> virtual_stage_layers(int layers, int stages, int virtual_stages,
                                             const std::vector<int>& stage_layers) {
  const std::string problem = stage_layers_problem(layers, stages, virtual_stages, stage_layers);
  if (!problem.empty()) throw std::invalid_argument(problem);
  const int parts = stages * virtual_stages;
  std::vector<LayerRange> ranges;
  int next = 0;
  for (int vs = 0; vs < parts; ++vs) {
    const int count = stage_layers.empty() ? layers / parts : stage_layers[vs];
    ranges.push_back({next, next + count});
    next += count;
  }
  return ranges;
}

}  // namespace atl::parallel::pipeline
