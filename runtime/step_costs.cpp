#include "runtime/step_costs.h"

#include <ATen/ATen.h>

#include "runtime/device.h"
#include "runtime/host_memory.h"
#include "runtime/metrics/peak_flops.h"
#include "runtime/metrics/run_log.h"

namespace atl::runtime {
namespace {

using Clock = std::chrono::steady_clock;

StepCostMeter::CommTotals comm_totals(const comm::DeviceMesh& mesh) {
  StepCostMeter::CommTotals totals;
  auto add = [&totals](const comm::Communicator& group) {
    const uint64_t bytes = group.bytes().total_bytes();
    totals.bytes += bytes;
    totals.wait_seconds += group.bytes().wait_seconds();
    return bytes;
  };
  // The island group carries only the outer exchange, accounted for by IslandExchange.
  totals.tp = add(mesh.tp());
  totals.dp = add(mesh.dp());
  totals.pp = add(mesh.pp());
  // The cp group carries only ring attention's K/V (and in backward their dK/dV): its waits are
  // what the ring did not hide behind the blocks' compute.
  totals.cp = add(mesh.cp());
  totals.cp_wait_seconds = mesh.cp().bytes().wait_seconds();
  add(mesh.model());
  if (mesh.embedding()) add(*mesh.embedding());
  return totals;
}

// The pipeline-stage statistics of a step, gathered from every stage of this rank's pipeline.
void gather_stage_stats(comm::Communicator& pp_group, const parallel::pipeline::PipelineRunStats& stats,
                        StepMetrics& m) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor mine = at::tensor({stats.idle_fraction(), static_cast<double>(m.activation_bytes)}, f64);
  const at::Tensor all = at::empty({pp_group.size(), 2}, f64);
  pp_group.all_gather(mine, all.view({-1}))->wait();
  for (int stage = 0; stage < pp_group.size(); ++stage) {
    m.stage_idle.push_back(all[stage][0].item<double>());
    m.stage_activation_bytes.push_back(all[stage][1].item<double>());
  }
}

}  // namespace

double agreed_peak_flops(const ParallelLayout& layout, const DeviceChoice& device,
                         const RankPlacement& placement, comm::Communicator& world) {
  const bool gpu_shared = layout.device.is_cuda() && device.gpu_shared;
  const bool measures = !gpu_shared || placement.local_rank < device.gpus;
  at::Tensor peak =
      at::full({1}, measures ? measure_matmul_peak_flops(layout.compute_dtype, layout.device) : 0.0,
               at::TensorOptions().dtype(at::kDouble));
  if (gpu_shared)
    world.all_reduce(peak, comm::ReduceOp::kMax)->wait();
  else
    layout.mesh->dp().all_reduce(peak, comm::ReduceOp::kAvg)->wait();
  return peak.item<double>();
}

StepCostMeter::StepCostMeter(const ParallelLayout& layout)
    : layout_(layout), start_(Clock::now()), comm_before_(comm_totals(*layout.mesh)) {}

void StepCostMeter::before_outer_exchange() {
  outer_bytes_before_ = layout_.island_exchange ? layout_.island_exchange->bytes_sent() : 0;
  outer_wait_before_ = layout_.outer ? layout_.outer->wait_seconds() : 0.0;
}

void StepCostMeter::finish(StepMetrics& m, const Config& config, double peak_flops_per_rank,
                           const parallel::pipeline::PipelineRunStats& pipeline_stats,
                           double checkpoint_wait_seconds, double island_average_seconds) const {
  m.step_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  m.tokens_per_s = static_cast<double>(config.train.global_batch) * config.model.seq / m.step_seconds;
  m.mfu = model_flops_utilization(m.tokens_per_s, training_flops_per_token(config.model), peak_flops_per_rank,
                                  layout_.mesh->shape().world_size());
  if (layout_.pipeline.stages > 1) gather_stage_stats(layout_.mesh->pp(), pipeline_stats, m);
  const CommTotals after = comm_totals(*layout_.mesh);
  m.comm_bytes = after.bytes - comm_before_.bytes;
  m.tp_bytes = after.tp - comm_before_.tp;
  m.dp_bytes = after.dp - comm_before_.dp;
  m.pp_bytes = after.pp - comm_before_.pp;
  m.comm_wait_seconds = after.wait_seconds - comm_before_.wait_seconds;
  m.context_parallel = layout_.mesh->cp().size() > 1;
  m.cp_bytes = after.cp - comm_before_.cp;
  m.kv_wait_seconds = after.cp_wait_seconds - comm_before_.cp_wait_seconds;
  m.checkpoint_wait_seconds = checkpoint_wait_seconds;
  if (const optim::outer::IslandExchange* exchange = layout_.island_exchange.get()) {
    m.islands = true;
    m.outer_bytes = exchange->bytes_sent() - outer_bytes_before_;
    m.outer_bytes_total = exchange->bytes_sent();
    m.outer_wait_seconds =
        layout_.outer ? layout_.outer->wait_seconds() - outer_wait_before_ : island_average_seconds;
    m.outer_simulated_seconds = exchange->simulated_seconds();
  }
  m.rss_bytes = resident_memory_bytes();
  m.gpu_memory = device_memory(layout_.device);
  const parallel::ModelStateBytes state = layout_.model_state_bytes();
  m.param_bytes = state.parameters;
  m.grad_bytes = state.gradients;
  m.optimizer_bytes = state.optimizer;
}

}  // namespace atl::runtime
