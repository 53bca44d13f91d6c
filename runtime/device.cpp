#include "runtime/device.h"

#include <ATen/Context.h>
#include <torch/cuda.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>
#include <set>

#include "atoll/build_config.h"
#include "runtime/gpu_assignment.h"
#include "runtime/placement.h"
#include "runtime/startup.h"

#if ATOLL_CUDA
#include <ATen/cuda/CUDAContextLight.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace atl::runtime {

namespace {

std::string plural(int count, const std::string& noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

std::vector<std::string> comma_separated(const std::string& text) {
  std::vector<std::string> items;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    if (comma > begin) items.push_back(text.substr(begin, comma - begin));
    begin = comma + 1;
  }
  return items;
}

// Whether CUDA_VISIBLE_DEVICES names a device: its first entry an index, a GPU or MIG UUID. "",
// "-1" and Slurm's old "NoDevFiles" hide every GPU instead.
bool names_a_device(const std::string& cuda_visible_devices) {
  const std::vector<std::string> entries = comma_separated(cuda_visible_devices);
  if (entries.empty()) return false;
  const std::string& first = entries.front();
  return std::all_of(first.begin(), first.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
         first.rfind("GPU-", 0) == 0 || first.rfind("MIG-", 0) == 0;
}

// What the job asked for, as its variables say it ("SLURM_STEP_GPUS=0,1, CUDA_VISIBLE_DEVICES=0"),
// or "" where it asked for no GPU.
std::string gpus_asked_for(const GpuVariables& v) {
  std::string asked;
  const auto add = [&asked](const std::string& name, const std::string& value) {
    asked += (asked.empty() ? "" : ", ") + name + "=" + value;
  };
  if (!v.slurm_step_gpus.empty()) add("SLURM_STEP_GPUS", v.slurm_step_gpus);
  if (!v.slurm_job_gpus.empty()) add("SLURM_JOB_GPUS", v.slurm_job_gpus);
  if (names_a_device(v.cuda_visible_devices)) add("CUDA_VISIBLE_DEVICES", v.cuda_visible_devices);
  return asked;
}

// How the node's ranks take GPUs (choose_device's comment): this rank's device among those it
// sees, and whether some rank on the node is left without one of its own.
struct NodeBinding {
  int index = 0;
  std::string identity;  // of the GPU at `index` (gpu_identities)
  bool shared = false;
  int gpus = 0;  // the GPUs the node's ranks see between them
};

NodeBinding bind_on_node(const GpuEnvironment& g) {
  const int size = std::max(1, g.local_size);
  const bool known = static_cast<int>(g.node_gpus.size()) == size && g.local_rank >= 0 &&
                     g.local_rank < size &&
                     static_cast<int>(g.node_gpus[static_cast<size_t>(g.local_rank)].size()) == g.visible;
  if (!known) {
    const int index = device_for(g.local_rank, g.visible);
    const std::vector<std::string> ids = gpu_identities({}, g.visible, g.variables);
    return {index, index < static_cast<int>(ids.size()) ? ids[static_cast<size_t>(index)] : "",
            size > g.visible, g.visible};
  }
  const std::vector<std::optional<int>> taken = assign_gpus(g.node_gpus);
  std::set<std::string> seen;
  for (const std::vector<std::string>& ids : g.node_gpus) seen.insert(ids.begin(), ids.end());
  NodeBinding binding;
  binding.shared = std::any_of(taken.begin(), taken.end(), [](const auto& index) { return !index; });
  binding.index = taken[static_cast<size_t>(g.local_rank)].value_or(device_for(g.local_rank, g.visible));
  const std::vector<std::string>& mine = g.node_gpus[static_cast<size_t>(g.local_rank)];
  if (binding.index < static_cast<int>(mine.size()))
    binding.identity = mine[static_cast<size_t>(binding.index)];
  binding.gpus = static_cast<int>(seen.size());
  return binding;
}

bool names_mig(const std::string& identity) {
  return identity.rfind("MIG-", 0) == 0;
}

// Whether the GPU this rank takes is a MIG instance: its identity says so (a MIG UUID), or
// CUDA_VISIBLE_DEVICES's entry for it does (a "MIG-..." entry, of which CUDA shows only the first).
bool is_mig_instance(const GpuEnvironment& g, const NodeBinding& binding) {
  const std::vector<std::string> entries = comma_separated(g.variables.cuda_visible_devices);
  const size_t index = static_cast<size_t>(binding.index);
  return names_mig(binding.identity) || (index < entries.size() && names_mig(entries[index]));
}

// Why this rank has no GPU to train on: what it found, the detail, and what fixes it for a config
// that asked for cuda, and for auto in a job that asked for GPUs.
struct NoGpu {
  std::string why, detail, cuda_fix, auto_fix;
};

std::optional<NoGpu> no_gpu(const GpuEnvironment& g, const NodeBinding& binding, bool share_gpu,
                            bool one_rank_islands) {
  if (!g.cuda_built) {
    const std::string fix = "rebuild with -DATOLL_WITH_CUDA=ON or set run.device: cpu";
    return NoGpu{"this atoll was built without the CUDA path", " (-DATOLL_WITH_CUDA=OFF or a CPU LibTorch)",
                 fix, fix};
  }
  if (g.visible < 1)
    return NoGpu{"no CUDA device is visible to this rank",
                 " (torch sees 0; check nvidia-smi and CUDA_VISIBLE_DEVICES)",
                 "set run.device: auto or cpu to train on the CPU",
                 "set run.device: cpu to train on the CPU"};
  if (g.world_size > 1 && !one_rank_islands && is_mig_instance(g, binding)) {
    // NCCL has no peer-to-peer between MIG instances (nor between a MIG instance and another GPU):
    // ranks joined by NCCL would fail or hang in its set-up.
    const std::string fix =
        "give each rank a whole GPU, run one rank per job (or islands of one rank each: parallel.islands "
        "with pp = dp = tp = 1), or set run.device: cpu";
    return NoGpu{"this rank's GPU " + binding.identity +
                     " is a MIG instance, which NCCL cannot join to other GPUs (a job of " +
                     plural(g.world_size, "rank") + ")",
                 "", fix, fix};
  }
  if (binding.shared && !share_gpu && !one_rank_islands) {
    const std::string fix =
        "launch at most " + plural(binding.gpus, "rank") +
        " per node, set run.share_gpu: true (for tests: slower NCCL over sockets), or set "
        "run.device: cpu";
    return NoGpu{plural(std::max(1, g.local_size), "rank") + " on this node share " +
                     plural(binding.gpus, "GPU") + " and NCCL needs a GPU per rank",
                 "", fix, fix};
  }
  return std::nullopt;
}

}  // namespace

DeviceChoice choose_device(DeviceKind requested, const GpuEnvironment& gpus, bool share_gpu,
                           bool one_rank_islands) {
  if (requested == DeviceKind::kCpu) return {};
  const NodeBinding binding = bind_on_node(gpus);
  if (const std::optional<NoGpu> missing = no_gpu(gpus, binding, share_gpu, one_rank_islands)) {
    if (requested == DeviceKind::kCuda)
      throw StartupError("run.device = cuda but " + missing->why + missing->detail + "; " +
                         missing->cuda_fix);
    const std::string asked = gpus_asked_for(gpus.variables);
    if (!asked.empty())
      throw StartupError("run.device = auto and the job asked for GPUs (" + asked + "), but " + missing->why +
                         missing->detail + "; " + missing->auto_fix);
    DeviceChoice cpu;
    cpu.note = "device: run.device auto: " + missing->why + "; training on the CPU";
    cpu.cpu_reason = missing->why;
    return cpu;
  }
  DeviceChoice choice;
  choice.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(binding.index));
  choice.gpu = binding.identity;
  const std::string ranks = std::to_string(std::max(1, gpus.local_size)) + " ranks on this node share " +
                            plural(binding.gpus, "GPU");
  choice.gpu_shared = binding.shared;
  choice.gpus = binding.gpus;
  if (binding.shared && one_rank_islands) {
    // No NCCL group spans two ranks, so none needs a host id of its own: no socket transport either.
    choice.note = "device: " + ranks +
                  " as islands of one rank each: every group on the GPU has one member (no NCCL "
                  "communicator is made) and the islands exchange over MPI on the host";
  } else if (binding.shared) {
    choice.shares_gpu = true;
    choice.note = "device: run.share_gpu: " + ranks +
                  "; each rank has its own NCCL host id (NCCL_HOSTID), so NCCL joins them over its socket "
                  "transport: real NCCL, for tests, not for speed";
  }
  return choice;
}

GpuEnvironment gpu_environment(const RankPlacement& placement, int world_size) {
  GpuEnvironment g;
  g.world_size = world_size;
  g.cuda_built = cuda_path_built();
  g.visible = visible_cuda_devices();
  g.variables = placement.gpu_variables;
  g.local_rank = placement.local_rank;
  g.local_size = placement.local_size;
  for (const NodeRank& rank : placement.node_ranks) g.node_gpus.push_back(rank.gpus);
  return g;
}

std::vector<std::string> gpu_identities(const std::vector<std::string>& uuids, int visible,
                                        const GpuVariables& variables) {
  if (visible < 1) return {};
  if (static_cast<int>(uuids.size()) == visible) return uuids;
  for (const std::string& list : {variables.slurm_step_gpus, variables.cuda_visible_devices}) {
    std::vector<std::string> entries = comma_separated(list);
    if (static_cast<int>(entries.size()) == visible) return entries;
  }
  std::vector<std::string> positions;
  for (int i = 0; i < visible; ++i) positions.push_back("#" + std::to_string(i));
  return positions;
}

std::string gpu_uuid_text(const std::array<unsigned char, 16>& bytes, const std::string& device_name) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text = device_name.find(" MIG ") != std::string::npos ? "MIG-" : "GPU-";
  for (size_t b = 0; b < bytes.size(); ++b) {
    text += kHex[bytes[b] >> 4];
    text += kHex[bytes[b] & 15];
    if (b == 3 || b == 5 || b == 7 || b == 9) text += '-';
  }
  return text;
}

std::vector<std::string> visible_gpu_identities(const GpuVariables& variables) {
  const int visible = visible_cuda_devices();
  std::vector<std::string> uuids;
#if ATOLL_CUDA
  // The properties come from cudaGetDeviceProperties, which makes no context on the device: the
  // rank has not bound its device yet.
  for (int i = 0; i < visible; ++i) {
    const cudaDeviceProp* properties = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(i));
    std::array<unsigned char, 16> bytes{};
    std::copy(properties->uuid.bytes, properties->uuid.bytes + 16, bytes.begin());
    uuids.push_back(gpu_uuid_text(bytes, properties->name));
  }
#endif
  return gpu_identities(uuids, visible, variables);
}

int visible_cuda_devices() {
  return static_cast<int>(torch::cuda::device_count());
}

bool cuda_path_built() {
  return ATOLL_CUDA;
}

void bind_device(const c10::Device& device) {
#if ATOLL_CUDA
  if (device.is_cuda()) c10::cuda::set_device(device.index());
#else
  (void)device;
#endif
}

void use_deterministic_kernels() {
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
}

std::string gpu_name(const c10::Device& device) {
#if ATOLL_CUDA
  if (device.is_cuda()) return at::cuda::getDeviceProperties(device.index())->name;
#endif
  (void)device;
  return "";
}

std::string describe_device(const c10::Device& device) {
  return device.is_cuda() ? device.str() + " (" + gpu_name(device) + ")" : device.str();
}

}  // namespace atl::runtime
