#include "runtime/canonical_space.h"

#include <ATen/ATen.h>

#include <map>
#include <string>

#include "checkpoint/box.h"

namespace atl::runtime {
namespace {

int outer_fragment_count(const Config& config) {
  return config.outer.algorithm == OuterAlgorithm::kStreamingDiLoCo ? config.outer.fragments : 1;
}

// Each parameter's first element in its fragment's canonical space, and each fragment's size.
struct CanonicalOffsets {
  std::map<std::string, int64_t> offset;
  std::vector<int64_t> numel;
};

CanonicalOffsets canonical_offsets(const Config& config) {
  const int fragments = outer_fragment_count(config);
  CanonicalOffsets out;
  out.numel.assign(static_cast<size_t>(fragments), 0);
  for (const parallel::ParamInfo& info : LlamaModel::param_infos(config.model)) {
    const size_t fragment = static_cast<size_t>(layer_of(info.name, config.model.layers) % fragments);
    int64_t numel = 1;
    for (int64_t d : LlamaModel::piece_of(config.model, 1, 0, info.name).global_shape) numel *= d;
    out.offset[info.name] = out.numel[fragment];
    out.numel[fragment] += numel;
  }
  return out;
}

// Writes into `index` (over the optimizer's coordinates) the canonical index of every element of
// the run `rb` of parameter `first` (its canonical offset) with global shape `global`, placed at
// `local` in the optimizer's coordinates.
void place_box(at::TensorAccessor<int64_t, 1> index, const checkpoint::Box& box,
               const std::vector<int64_t>& global, int64_t first, int64_t local) {
  if (box.sizes.size() == 1) {
    for (int64_t k = 0; k < box.sizes[0]; ++k) index[local + k] = first + box.offsets[0] + k;
    return;
  }
  const int64_t rows = box.sizes[0], cols = box.sizes[1];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      index[local + r * cols + c] = first + (box.offsets[0] + r) * global[1] + box.offsets[1] + c;
}

at::Tensor concatenated(const at::Tensor& flat, const std::vector<optim::outer::ValueSpan>& spans) {
  std::vector<at::Tensor> pieces;
  for (const optim::outer::ValueSpan& span : spans) pieces.push_back(flat.narrow(0, span.offset, span.numel));
  return pieces.empty() ? flat.narrow(0, 0, 0).clone() : at::cat(pieces);
}

}  // namespace

std::vector<optim::outer::CanonicalFragment> canonical_fragments(
    const Config& config, const ParallelLayout& layout,
    const std::vector<std::vector<optim::outer::ValueSpan>>& fragments) {
  const CanonicalOffsets canonical = canonical_offsets(config);
  const int tp_rank = layout.mesh->coord().tp;
  int64_t total = 0;
  for (const at::Tensor& segment : layout.data_parallel->optimizer_values()) total += segment.numel();

  at::Tensor index = at::full({total}, -1, at::kLong);
  auto at_index = index.accessor<int64_t, 1>();
  for (const parallel::ShardedDataParallel::OwnedRun& run : layout.data_parallel->owned_runs()) {
    const std::string& name = layout.params->entries()[run.entry].info.name;
    const LlamaModel::Piece piece = LlamaModel::piece_of(config.model, config.parallel.tp, tp_rank, name);
    for (const checkpoint::RunBox& rb :
         checkpoint::run_boxes({piece.offsets, piece.sizes}, piece.global_shape, run.entry_offset,
                               run.entry_offset + run.numel))
      place_box(at_index, rb.box, piece.global_shape, canonical.offset.at(name), run.offset + rb.run_offset);
  }
  // Who contributes: the elements the island's gradient norm counts (each once in the model
  // group), and of ZeRO-0's dp replicas (dp x cp ranks) only dp-group rank 0's.
  at::Tensor owned = at::zeros({total}, at::kBool);
  if (layout.data_parallel->stage() > 0 || layout.mesh->dp().rank() == 0)
    for (const parallel::ShardSpan& span : layout.norm_spans())
      owned.narrow(0, span.offset, span.numel).fill_(true);

  std::vector<optim::outer::CanonicalFragment> out;
  for (size_t f = 0; f < fragments.size(); ++f) {
    optim::outer::CanonicalFragment fragment;
    fragment.numel = canonical.numel.at(f);
    fragment.index = concatenated(index, fragments[f]);
    fragment.owned = concatenated(owned, fragments[f]).logical_and(fragment.index.ge(0));
    out.push_back(std::move(fragment));
  }
  return out;
}

}  // namespace atl::runtime
