// The run section: its rows of the field table.
#include "runtime/config/config_fields.h"

namespace atl::runtime::config_detail {

std::vector<Field> run_fields() {
  const SectionFields<RunConfig> run{"run", &Config::run};
  return {
      run("dir", &RunConfig::dir,
          "The run's directory: config.yaml, metrics.jsonl, logs, TensorBoard events and, by "
          "default, checkpoints."),
      run("seed", &RunConfig::seed,
          "Seeds the initial weights, the data order and the samples; a seed and a layout repeat a run bit "
          "for bit.",
          at_least(0)),
      run("threads", &RunConfig::threads,
          "Intra-op threads per rank; 0: the CPUs the rank may use (its affinity) over the ranks sharing "
          "them.",
          at_least(0)),
      run("device", &RunConfig::device,
          "Where tensors live; auto: CUDA when each rank on the node has a GPU, else the CPU (an error "
          "when the job asked for GPUs: Slurm's GPU variables or CUDA_VISIBLE_DEVICES)."),
      run("share_gpu", &RunConfig::share_gpu,
          "Lets ranks of a node share one GPU (tests on a one-GPU machine): each gets a NCCL "
          "host id of its own."),
      run("deterministic", &RunConfig::deterministic,
          "Deterministic GPU kernels (and a fixed cuBLAS workspace), so GPU runs repeat bit for "
          "bit; slower."),
      run("mfu_peak_tflops", &RunConfig::mfu_peak_tflops,
          "Per-rank peak TFLOP/s that MFU is measured against (a datasheet figure); 0: a matmul "
          "measured at start-up.",
          at_least(0.0)),
  };
}

}  // namespace atl::runtime::config_detail
