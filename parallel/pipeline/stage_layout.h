// Which decoder layers each pipeline stage holds (DESIGN §5). Virtual stage vs = chunk * p + stage
// holds a contiguous range of layers; ranges follow each other in virtual-stage order, so with
// 16 layers, p = 4 and v = 2, rank 0 holds layers 0-1 (chunk 0) and 8-9 (chunk 1), as in Megatron.
// The first virtual stage also holds the embedding, the last the final norm, the head and the loss.
#pragma once

#include <string>
#include <vector>

namespace atl::parallel::pipeline {

struct LayerRange {
  int first = 0;
  int end = 0;  // one past the last layer
  int count() const { return end - first; }
};

// The problem with splitting `layers` over stages * virtual_stages virtual stages, as one line with
// its fix ("" when fine). `stage_layers`: the layer count of each virtual stage in virtual-stage
// order (empty: an even split, which needs the division to come out whole).
std::string stage_layers_problem(int layers, int stages, int virtual_stages,
                                 const std::vector<int>& stage_layers);

// The layer range of every virtual stage; std::invalid_argument with stage_layers_problem's line.
std::vector<LayerRange> virtual_stage_layers(int layers, int stages, int virtual_stages,
                                             const std::vector<int>& stage_layers);

}  // namespace atl::parallel::pipeline
