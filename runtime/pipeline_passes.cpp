#include "runtime/pipeline_passes.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "parallel/context_parallel_attention.h"
#include "parallel/document_mask.h"

namespace atl::runtime {

namespace pipe = parallel::pipeline;

namespace {

// Tokens reach a GPU through pinned host memory (the caching host allocator reuses it), copied
// without blocking the host; on the CPU they stay where the mmap'ed shard put them.
at::Tensor on_device(const at::Tensor& host, const c10::Device& device) {
  if (!device.is_cuda() || !host.defined()) return host;
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

}  // namespace

pipe::PipelineRunStats PipelinePasses::train(int64_t step, const at::Tensor& local_loss, bool poison) const {
  if (layout_.fp8) layout_.fp8->start_step();  // the weights changed since the last pass
  const int microbatches = config_.parallel.microbatches;
  const int64_t microbatch_size = config_.train.global_batch / (data_ranks() * microbatches);
  const std::vector<Microbatch> batches = stage_batches(microbatches, [&](int micro) {
    const BatchSlice slice =
        batch_slice(step, config_.train.global_batch, data_rank(), data_ranks(), micro, microbatches);
    return data_.train->shuffled(slice.first, slice.count);
  });
  pipe::StageCallbacks callbacks;
  callbacks.forward = [&](int chunk, int micro, const at::Tensor& input) {
    const at::Tensor out = forward_chunk(chunk, input, batches[static_cast<size_t>(micro)]);
    if (!layout_.pipeline.is_last(chunk)) return out;
    // Each microbatch's mean is scaled by 1/microbatches, so the accumulated gradient is the
    // gradient of the mean over this rank's share of the batch; the dp average does the rest.
    const at::Tensor loss = poison ? out * std::nan("") : out / microbatches;
    local_loss.add_(loss.detach().to(at::kDouble).reshape({}));
    return loss;
  };
  callbacks.activation_shape = [&](int) { return layout_.chunks.front()->hidden_shape(microbatch_size); };
  callbacks.before_backward = [&] { layout_.data_parallel->start_backward(); };
  return layout_.executor->run(layout_.pipeline, layout_.schedule, callbacks);
}

double PipelinePasses::validation_loss() const {
  const Config& c = config_;
  const ParallelLayout& l = layout_;
  if (l.fp8) l.fp8->start_step();  // the weights may have changed since the last pass (or are phi's)
  at::NoGradGuard no_grad;
  const comm::ShardRange mine = comm::shard_range(c.train.eval_sequences, c.parallel.dp, l.mesh->coord().dp);
  const int64_t chunk = std::max(1, c.train.global_batch / (c.parallel.dp * c.parallel.microbatches));
  const auto count_of = [&](int micro) { return std::min(chunk, mine.numel - micro * chunk); };
  pipe::PipelineShape shape = l.pipeline;
  shape.microbatches = static_cast<int>((mine.numel + chunk - 1) / chunk);
  // On the last stage, summed where the losses are (no host synchronisation inside the schedule).
  const at::Tensor loss_sum = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(l.device));
  if (shape.microbatches > 0) {
    const std::vector<Microbatch> batches = stage_batches(shape.microbatches, [&](int micro) {
      return data_.val->in_order(mine.offset + micro * chunk, count_of(micro));
    });
    pipe::StageCallbacks callbacks;
    callbacks.forward = [&](int model_chunk, int micro, const at::Tensor& input) {
      const at::Tensor out = forward_chunk(model_chunk, input, batches[static_cast<size_t>(micro)]);
      if (l.pipeline.is_last(model_chunk))
        loss_sum.add_(out.to(at::kDouble).reshape({}) * static_cast<double>(count_of(micro)));
      return out;
    };
    callbacks.activation_shape = [&](int micro) { return l.chunks.front()->hidden_shape(count_of(micro)); };
    l.executor->run(shape, pipe::forward_only_schedule(shape), callbacks);
  }
  at::Tensor total = at::full({1}, loss_sum.item<double>(), at::TensorOptions().dtype(at::kDouble));
  if (l.pipeline.stages > 1) l.mesh->pp().all_reduce(total, comm::ReduceOp::kSum)->wait();
  // Summed over the dp group, whose cp ranks each hold one mean over their chunks of the same sequences.
  l.mesh->dp().all_reduce(total, comm::ReduceOp::kSum)->wait();
  return total.item<double>() / (std::max(1, c.train.eval_sequences) * c.parallel.cp);
}

at::Tensor PipelinePasses::forward_chunk(int chunk, const at::Tensor& input, const Microbatch& batch) const {
  const bool first = layout_.pipeline.is_first(chunk), last = layout_.pipeline.is_last(chunk);
  const LlamaModel& model = *layout_.chunks[chunk];
  const at::Tensor out = model.forward(first ? batch.inputs : input, batch.document_ids);
  return last ? model.loss_of(out, batch.targets) : out;
}

// Not inside the schedule: pinning host memory there can synchronise the device (a new
// cudaHostAlloc), which waits for a receive whose sender may be waiting for this rank -- a pipeline
// deadlock on the GPU.
std::vector<PipelinePasses::Microbatch> PipelinePasses::stage_batches(
    int count, const std::function<TokenBatch(int)>& load) const {
  std::vector<Microbatch> batches(static_cast<size_t>(count));
  // Only a rank's first chunk can be the model's first, only its last chunk the model's last.
  const int last_chunk = static_cast<int>(layout_.chunks.size()) - 1;
  const bool tokens = layout_.pipeline.is_first(0) || layout_.pipeline.is_last(last_chunk);
  // Every layer's attention reads the documents, so every stage loads them.
  if (!tokens && !config_.model.document_mask) return batches;
  for (int micro = 0; micro < count; ++micro)
    batches[static_cast<size_t>(micro)] = microbatch_of(load(micro), tokens);
  return batches;
}

PipelinePasses::Microbatch PipelinePasses::microbatch_of(const TokenBatch& batch, bool tokens) const {
  Microbatch micro;
  if (config_.model.document_mask)
    micro.document_ids =
        on_device(parallel::document_ids(batch.document_starts, batch.inputs.size(1)), layout_.device);
  if (!tokens) return micro;
  const comm::Communicator& cp = layout_.mesh->cp();
  // The sequence split is not the loader's: every cp rank reads the same sequences and keeps its
  // two load-balanced chunks of each (so a checkpoint resumes at any cp). The documents stay those
  // of the whole sequences: ring attention cuts every chunk's from them by its global place.
  const auto mine = [&](const at::Tensor& whole) {
    return cp.size() == 1
               ? whole
               : parallel::take_context_chunks(whole, 1, cp.size(), cp.rank(), /*load_balanced=*/true);
  };
  micro.inputs = on_device(mine(batch.inputs), layout_.device);
  micro.targets = on_device(mine(batch.targets), layout_.device);
  return micro;
}

int PipelinePasses::data_rank() const {
  return layout_.mesh->coord().island * config_.parallel.dp + layout_.mesh->coord().dp;
}

int PipelinePasses::data_ranks() const {
  return config_.parallel.islands * config_.parallel.dp;
}

}  // namespace atl::runtime
