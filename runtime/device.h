// The device each rank trains on (run.device): chosen once at start-up from what the config asks,
// what this build can run, what the job asked for and the GPUs each rank on the node sees, then
// bound before any CUDA call.
#pragma once

#include <c10/core/Device.h>

#include <array>
#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/placement.h"

namespace atl::runtime {

struct DeviceChoice {
  c10::Device device = c10::Device(c10::kCPU);
  // Said once at start-up by rank 0 when auto fell back to the CPU, or when ranks share GPUs (else empty).
  std::string note;
  // Why run.device auto chose the CPU on this rank ("no CUDA device is visible to this rank"), for
  // the agreement across ranks (device_agreement.h); empty otherwise.
  std::string cpu_reason;
  // The identity of the GPU it took (gpu_identities: nvidia-smi's UUID where CUDA gives one, as on
  // every GPU), what the rank table reports for it; empty on the CPU.
  std::string gpu;
  bool shares_gpu = false;  // ranks on this node share GPUs, allowed by run.share_gpu
  // Ranks on this node share GPUs (run.share_gpu, or islands of one rank each): the first rank on
  // each GPU (local rank < `gpus`) measures its peak alone.
  bool gpu_shared = false;
  int gpus = 0;  // the GPUs the node's ranks share, when gpu_shared
};

// What a rank finds out about GPUs at start-up, recorded: choose_device decides from this alone.
struct GpuEnvironment {
  bool cuda_built = false;  // this binary has the CUDA path
  int visible = 0;          // the CUDA devices this rank sees
  GpuVariables variables;   // what the job asked for (CUDA_VISIBLE_DEVICES, Slurm's GPU variables)
  int local_rank = -1;      // this rank's index on its node; -1: unknown
  int local_size = 1;       // ranks on the node; < 1: unknown, one
  int world_size = 1;       // ranks in the job: with more than one, NCCL joins this rank's GPU to theirs
  // What each rank on the node sees, in local-rank order (node_gpus[local_rank] is this rank's
  // `visible` devices): the identities of its GPUs (gpu_identities). Empty, or not agreeing with
  // `visible`: unknown, and every rank on the node is taken to see what this one sees.
  std::vector<std::vector<std::string>> node_gpus;
};

// This process's: the build, torch's device count, and `placement`'s GPU variables, local rank and
// size and node_ranks (completed_placement), in a job of `world_size` ranks.
GpuEnvironment gpu_environment(const RankPlacement& placement, int world_size);

// cpu: the CPU. Otherwise a GPU for every rank on the node, matched to the node's ranks by the GPUs
// each sees (assign_gpus, gpu_assignment.h) -- so where every rank sees the same GPUs local rank r
// takes the r-th, where each sees a GPU of its own (Slurm's --gpus-per-task=1 or
// --gpu-bind=single:1, a CUDA_VISIBLE_DEVICES per rank) it takes device 0 of what it sees, and a
// rank that sees {A, B} leaves A to one that sees only {A}. A rank left without a GPU of its own
// (no assignment gives every rank one) means the node's ranks share GPUs, which NCCL refuses for two
// ranks of a group, so then:
// - `share_gpu` (run.share_gpu) lets them through -- a rank without a GPU of its own takes device
//   local_rank % visible, so ranks that all see the same GPUs take them round robin -- with a note:
//   each rank then needs a NCCL host identity of its own (comm/nccl_host_identity.h) before its
//   first NCCL call; `one_rank_islands` (parallel.islands > 1 with pp = dp = tp = 1) likewise,
//   without host ids: every NCCL group then has one member (the island group has no NCCL plane: the
//   islands exchange host copies over MPI), so no NCCL runs between ranks;
// - else, like no GPU or no CUDA path in the build: run.device auto trains on the CPU with a note,
//   unless the job asked for GPUs (Slurm's GPU variables, or CUDA_VISIBLE_DEVICES naming a device),
//   and cuda cannot train at all. Both are a StartupError of one line: what was asked, what this
//   rank found, the fix (a rank's own finding, so the rank says it: another rank may differ).
// A GPU that is a MIG instance (a "MIG-" identity, or CUDA_VISIBLE_DEVICES naming one) is like no GPU
// too in a job of several ranks joined by NCCL (not one_rank_islands), share_gpu or not: NCCL has no
// peer-to-peer between MIG instances. One rank per job, or islands of one rank each, train on it.
DeviceChoice choose_device(DeviceKind requested, const GpuEnvironment& gpus, bool share_gpu = false,
                           bool one_rank_islands = false);

// The GPUs this process sees (0 with a CPU-only LibTorch or no driver).
int visible_cuda_devices();

// Identities for the `visible` devices a rank sees, in its device order, equal for one device in
// every process of the node: `uuids` (nvidia-smi's "GPU-5a1c..."), when there is one per device;
// else the node-wide indices Slurm gives (SLURM_STEP_GPUS, per task under GPU binding) or
// CUDA_VISIBLE_DEVICES's entries, whichever lists `visible` of them; else positions ("#0", "#1",
// ...), which take every rank to see the same devices.
std::vector<std::string> gpu_identities(const std::vector<std::string>& uuids, int visible,
                                        const GpuVariables& variables);
// A device's UUID as nvidia-smi writes it: "GPU-" and the 16 bytes in hex, grouped 8-4-4-4-12;
// "MIG-" for a MIG instance, whose CUDA device name says so ("NVIDIA A100-SXM4-40GB MIG 1g.5gb").
std::string gpu_uuid_text(const std::array<unsigned char, 16>& bytes, const std::string& device_name);
// gpu_identities() of the devices this process sees, their UUIDs read from CUDA (no CUDA context).
std::vector<std::string> visible_gpu_identities(const GpuVariables& variables);
// Whether this binary was built with the CUDA path (-DATOLL_WITH_CUDA).
bool cuda_path_built();

// Makes `device` this thread's current CUDA device (nothing for the CPU), so that every later CUDA
// call, NCCL's included, lands on it.
void bind_device(const c10::Device& device);

// Deterministic kernels for the rest of the process (run.deterministic): LibTorch's deterministic
// algorithms, strict -- an operation that has no deterministic kernel stops the run with LibTorch's
// message naming it, since in warn-only mode the fused attention backward (flash and memory
// efficient) keeps its atomic, order-dependent accumulation and only warns -- and, unless the user
// set one, the fixed cuBLAS workspace (CUBLAS_WORKSPACE_CONFIG) cuBLAS needs to repeat itself.
// Before any matmul.
void use_deterministic_kernels();

// The GPU's name, e.g. "NVIDIA H100 80GB HBM3" ("" for the CPU).
std::string gpu_name(const c10::Device& device);
// "cuda:0 (NVIDIA H100 80GB HBM3)" or "cpu": the start-up table's device line.
std::string describe_device(const c10::Device& device);

}  // namespace atl::runtime
