// run.device: which device a rank trains on, for every combination of what the config asks, what
// the build has, what the job asked for and which GPUs the node's ranks see (recorded environments:
// every GPU visible to every rank, one per task under Slurm, a CUDA_VISIBLE_DEVICES per rank, none;
// the matching of ranks to the GPUs they see);
// and the datasheet peaks MFU is quoted against.
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include "runtime/device.h"
#include "runtime/gpu_assignment.h"
#include "runtime/metrics/device_memory.h"
#include "runtime/metrics/peak_flops.h"
#include "runtime/startup.h"

namespace atl::runtime {
namespace {

// A rank on a node whose `local_size` ranks all see the same `visible` GPUs (the node's view not
// gathered, as for a lone process), with nothing asked for in the environment.
GpuEnvironment same_gpus(bool built, int visible, int local_rank, int local_size = 1) {
  GpuEnvironment g;
  g.cuda_built = built;
  g.visible = visible;
  g.local_rank = local_rank;
  g.local_size = local_size;
  return g;
}

// Rank `local_rank` of a node whose ranks see `node` (each its GPUs' identities), under `variables`.
GpuEnvironment on_node(const std::vector<std::vector<std::string>>& node, int local_rank,
                       const GpuVariables& variables = {}) {
  GpuEnvironment g;
  g.cuda_built = true;
  g.visible = static_cast<int>(node[static_cast<size_t>(local_rank)].size());
  g.variables = variables;
  g.local_rank = local_rank;
  g.local_size = static_cast<int>(node.size());
  g.node_gpus = node;
  return g;
}

std::string error_of(DeviceKind kind, const GpuEnvironment& gpus, bool share_gpu = false) {
  try {
    choose_device(kind, gpus, share_gpu);
  } catch (const StartupError& e) {
    return e.what();
  }
  return "";
}

const std::vector<std::string> kNode4 = {"GPU-a", "GPU-b", "GPU-c", "GPU-d"};

TEST(Device, CpuIsTheCpuWhateverTheMachineHas) {
  for (bool built : {false, true})
    for (int devices : {0, 8}) {
      GpuEnvironment g = same_gpus(built, devices, 3, 4);
      g.variables.slurm_step_gpus = "0,1,2,3";  // asked for, and still the CPU: the config says so
      const DeviceChoice choice = choose_device(DeviceKind::kCpu, g);
      EXPECT_EQ(choice.device, c10::Device(c10::kCPU));
      EXPECT_EQ(choice.note, "");  // said nothing: the user asked for it
    }
}

TEST(Device, AutoTakesTheLocalRanksGpuWhenThereIsOne) {
  const DeviceChoice choice = choose_device(DeviceKind::kAuto, same_gpus(true, 8, 6, 8));
  EXPECT_EQ(choice.device, c10::Device(c10::kCUDA, 6));
  EXPECT_EQ(choice.note, "");
}

TEST(Device, AutoFallsBackToTheCpuWithOneLineSayingWhy) {
  const DeviceChoice no_gpu = choose_device(DeviceKind::kAuto, same_gpus(true, 0, 0));
  EXPECT_EQ(no_gpu.device, c10::Device(c10::kCPU));
  EXPECT_EQ(no_gpu.note,
            "device: run.device auto: no CUDA device is visible to this rank; training on the CPU");
  const DeviceChoice no_build = choose_device(DeviceKind::kAuto, same_gpus(false, 8, 0));
  EXPECT_EQ(no_build.device, c10::Device(c10::kCPU));
  EXPECT_EQ(no_build.note,
            "device: run.device auto: this atoll was built without the CUDA path; training on the CPU");
  // CUDA_VISIBLE_DEVICES that hides every GPU asks for none.
  for (const std::string hidden : {"", "-1", "NoDevFiles"}) {
    GpuEnvironment g = same_gpus(true, 0, 0);
    g.variables.cuda_visible_devices = hidden;
    EXPECT_EQ(choose_device(DeviceKind::kAuto, g).device, c10::Device(c10::kCPU)) << hidden;
  }
}

TEST(Device, CudaTakesTheLocalRanksGpu) {
  EXPECT_EQ(choose_device(DeviceKind::kCuda, same_gpus(true, 8, 5, 8)).device, c10::Device(c10::kCUDA, 5));
  EXPECT_EQ(choose_device(DeviceKind::kCuda, same_gpus(true, 8, 1, 2)).device, c10::Device(c10::kCUDA, 1));
  EXPECT_EQ(choose_device(DeviceKind::kCuda, same_gpus(true, 2, -1)).device,
            c10::Device(c10::kCUDA, 0));  // unknown local rank
}

TEST(Device, MoreRanksThanGpusOnANodeIsTheCpuForAutoAndAnErrorForCuda) {
  const DeviceChoice shared = choose_device(DeviceKind::kAuto, same_gpus(true, 1, 1, 2));
  EXPECT_EQ(shared.device, c10::Device(c10::kCPU));
  EXPECT_EQ(
      shared.note,
      "device: run.device auto: 2 ranks on this node share 1 GPU and NCCL needs a GPU per rank; training on "
      "the CPU");
  EXPECT_EQ(
      error_of(DeviceKind::kCuda, same_gpus(true, 2, 0, 4)),
      "run.device = cuda but 4 ranks on this node share 2 GPUs and NCCL needs a GPU per rank; launch at "
      "most 2 ranks per node, set run.share_gpu: true (for tests: slower NCCL over sockets), or set "
      "run.device: cpu");
}

TEST(Device, ShareGpuLetsMoreRanksThanGpusOntoThemRoundRobinAndSaysSo) {
  for (DeviceKind kind : {DeviceKind::kCuda, DeviceKind::kAuto}) {
    const DeviceChoice third = choose_device(kind, same_gpus(true, 2, 2, 4), /*share_gpu=*/true);
    EXPECT_EQ(third.device, c10::Device(c10::kCUDA, 0));
    EXPECT_TRUE(third.shares_gpu);
    EXPECT_EQ(choose_device(kind, same_gpus(true, 2, 3, 4), true).device, c10::Device(c10::kCUDA, 1));
    EXPECT_EQ(third.note,
              "device: run.share_gpu: 4 ranks on this node share 2 GPUs; each rank has its own NCCL host id "
              "(NCCL_HOSTID), so NCCL joins them over its socket transport: real NCCL, for tests, not for "
              "speed");
  }
  // Asked for but not needed (a GPU per rank): nothing shared, nothing said.
  const DeviceChoice own = choose_device(DeviceKind::kCuda, same_gpus(true, 4, 3, 4), true);
  EXPECT_EQ(own.device, c10::Device(c10::kCUDA, 3));
  EXPECT_FALSE(own.shares_gpu);
  EXPECT_EQ(own.note, "");
  // It shares GPUs, it does not make them: no GPU is still the CPU for auto and an error for cuda.
  EXPECT_EQ(choose_device(DeviceKind::kAuto, same_gpus(true, 0, 0, 2), true).device, c10::Device(c10::kCPU));
  EXPECT_FALSE(choose_device(DeviceKind::kAuto, same_gpus(true, 0, 0, 2), true).shares_gpu);
  EXPECT_THROW(choose_device(DeviceKind::kCuda, same_gpus(true, 0, 0, 2), true), StartupError);
}

TEST(Device, IslandsOfOneRankShareAGpuWithoutHostIdsAndSaySoInOneLine) {
  // 4 islands of one rank on one GPU: every group on the GPU has one member, so no share_gpu is needed.
  for (DeviceKind kind : {DeviceKind::kCuda, DeviceKind::kAuto})
    for (bool share_gpu : {false, true}) {
      const DeviceChoice third =
          choose_device(kind, same_gpus(true, 1, 2, 4), share_gpu, /*one_rank_islands=*/true);
      EXPECT_EQ(third.device, c10::Device(c10::kCUDA, 0));
      EXPECT_FALSE(third.shares_gpu);  // no NCCL host id of its own: no NCCL group spans two ranks
      EXPECT_EQ(
          third.note,
          "device: 4 ranks on this node share 1 GPU as islands of one rank each: every group on the GPU "
          "has one member (no NCCL communicator is made) and the islands exchange over MPI on the host");
    }
  // Round robin over the GPUs there are; a GPU per rank says nothing.
  EXPECT_EQ(choose_device(DeviceKind::kCuda, same_gpus(true, 2, 3, 4), false, true).device,
            c10::Device(c10::kCUDA, 1));
  EXPECT_EQ(choose_device(DeviceKind::kCuda, same_gpus(true, 4, 3, 4), false, true).note, "");
  // It needs a GPU all the same, and islands of several ranks still need one per rank.
  EXPECT_THROW(choose_device(DeviceKind::kCuda, same_gpus(true, 0, 0, 4), false, true), StartupError);
  EXPECT_THROW(choose_device(DeviceKind::kCuda, same_gpus(false, 1, 0, 4), false, true), StartupError);
  EXPECT_THROW(choose_device(DeviceKind::kCuda, same_gpus(true, 1, 0, 4), false, false), StartupError);
}

// The rank's own finding (another rank may see otherwise), so a StartupError the failing rank says.
TEST(Device, CudaWithoutAGpuOrTheCudaPathIsOneLineWithTheFix) {
  EXPECT_EQ(
      error_of(DeviceKind::kCuda, same_gpus(true, 0, 0)),
      "run.device = cuda but no CUDA device is visible to this rank (torch sees 0; check nvidia-smi and "
      "CUDA_VISIBLE_DEVICES); set run.device: auto or cpu to train on the CPU");
  EXPECT_EQ(
      error_of(DeviceKind::kCuda, same_gpus(false, 8, 0)),
      "run.device = cuda but this atoll was built without the CUDA path (-DATOLL_WITH_CUDA=OFF or a CPU "
      "LibTorch); rebuild with -DATOLL_WITH_CUDA=ON or set run.device: cpu");
}

// sbatch --gpus-per-node=4 --ntasks-per-node=4 (or --gres=gpu:4): every task sees the node's four GPUs,
// and local rank r takes the r-th.
TEST(DeviceBinding, EveryRankSeesEveryGpuAndTakesTheOneAtItsLocalRank) {
  const GpuVariables slurm{"0,1,2,3", "0,1,2,3", "0,1,2,3"};
  for (int r = 0; r < 4; ++r)
    for (DeviceKind kind : {DeviceKind::kAuto, DeviceKind::kCuda}) {
      const DeviceChoice choice = choose_device(kind, on_node({kNode4, kNode4, kNode4, kNode4}, r, slurm));
      EXPECT_EQ(choice.device, c10::Device(c10::kCUDA, r));
      EXPECT_EQ(choice.gpu, kNode4[static_cast<size_t>(r)]);
      EXPECT_FALSE(choice.shares_gpu);
      EXPECT_EQ(choice.note, "");
    }
}

// --gpus-per-task=1 or --gpu-bind=single:1 with Slurm's device cgroup: each task sees one GPU, device
// 0 to it (CUDA_VISIBLE_DEVICES=0 in every task), a different one in each (SLURM_STEP_GPUS, the UUIDs).
// Four ranks and one GPU each is a GPU per rank, not four ranks on one GPU.
TEST(DeviceBinding, OneGpuPerTaskIsDeviceZeroOfWhatEachRankSees) {
  const std::vector<std::vector<std::string>> by_uuid = {{"GPU-a"}, {"GPU-b"}, {"GPU-c"}, {"GPU-d"}};
  std::vector<std::vector<std::string>> by_slurm;  // without UUIDs: Slurm's node-wide index
  for (int r = 0; r < 4; ++r)
    by_slurm.push_back(gpu_identities({}, 1, GpuVariables{"0", std::to_string(r), "0,1,2,3"}));
  EXPECT_EQ(by_slurm, (std::vector<std::vector<std::string>>{{"0"}, {"1"}, {"2"}, {"3"}}));
  for (const auto& node : {by_uuid, by_slurm})
    for (int r = 0; r < 4; ++r)
      for (DeviceKind kind : {DeviceKind::kAuto, DeviceKind::kCuda}) {
        const GpuVariables task{"0", std::to_string(r), "0,1,2,3"};
        const DeviceChoice choice = choose_device(kind, on_node(node, r, task));
        EXPECT_EQ(choice.device, c10::Device(c10::kCUDA, 0)) << r;
        EXPECT_EQ(choice.gpu, node[static_cast<size_t>(r)][0]);  // device 0 of each, its own GPU
        EXPECT_FALSE(choice.shares_gpu);
        EXPECT_EQ(choice.note, "");
      }
  // Without what the other ranks see, one GPU among four ranks reads as four ranks sharing it.
  EXPECT_EQ(error_of(DeviceKind::kAuto,
                     [] {
                       GpuEnvironment g = same_gpus(true, 1, 2, 4);
                       g.variables = {"0", "2", "0,1,2,3"};
                       return g;
                     }()),
            "run.device = auto and the job asked for GPUs (SLURM_STEP_GPUS=2, SLURM_JOB_GPUS=0,1,2,3, "
            "CUDA_VISIBLE_DEVICES=0), but 4 ranks on this node share 1 GPU and NCCL needs a GPU per rank; "
            "launch at most 1 rank per node, set run.share_gpu: true (for tests: slower NCCL over sockets), "
            "or set run.device: cpu");
}

// mpirun with a wrapper that gives each rank CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK; and a
// list shared by the ranks (CUDA_VISIBLE_DEVICES=2,3 mpirun -np 2): rank r takes its r-th entry.
TEST(DeviceBinding, ACudaVisibleDevicesListPerRankOrSharedByTheRanks) {
  std::vector<std::vector<std::string>> own;
  for (int r = 0; r < 4; ++r) own.push_back(gpu_identities({}, 1, GpuVariables{std::to_string(r), "", ""}));
  for (int r = 0; r < 4; ++r) {
    const DeviceChoice choice =
        choose_device(DeviceKind::kAuto, on_node(own, r, {std::to_string(r), "", ""}));
    EXPECT_EQ(choice.device, c10::Device(c10::kCUDA, 0));
    EXPECT_FALSE(choice.shares_gpu);
  }
  const std::vector<std::string> two = gpu_identities({}, 2, GpuVariables{"2,3", "", ""});
  EXPECT_EQ(two, (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(choose_device(DeviceKind::kAuto, on_node({two, two}, 1, {"2,3", "", ""})).device,
            c10::Device(c10::kCUDA, 1));
}

// --gpu-bind=closest on two sockets: ranks 0-3 see the first socket's four GPUs, 4-7 the second's.
TEST(DeviceBinding, RanksSeeingGroupsOfGpusSplitEachGroup) {
  const std::vector<std::string> first = kNode4, second = {"GPU-e", "GPU-f", "GPU-g", "GPU-h"};
  const std::vector<std::vector<std::string>> node = {first,  first,  first,  first,
                                                      second, second, second, second};
  EXPECT_EQ(choose_device(DeviceKind::kCuda, on_node(node, 2)).device, c10::Device(c10::kCUDA, 2));
  EXPECT_EQ(choose_device(DeviceKind::kCuda, on_node(node, 5)).device, c10::Device(c10::kCUDA, 1));
  EXPECT_FALSE(choose_device(DeviceKind::kCuda, on_node(node, 7)).shares_gpu);
}

// --gres=gpu:1 --ntasks-per-node=4: the ranks see one and the same GPU. A job that asked for GPUs
// stops with one line (auto would otherwise train on the CPU unnoticed); run.share_gpu lets it on.
TEST(DeviceBinding, RanksThatReallyShareOneGpu) {
  const std::vector<std::vector<std::string>> node = {{"GPU-a"}, {"GPU-a"}, {"GPU-a"}, {"GPU-a"}};
  const GpuVariables slurm{"0", "0", "0"};
  EXPECT_EQ(error_of(DeviceKind::kAuto, on_node(node, 0, slurm)),
            "run.device = auto and the job asked for GPUs (SLURM_STEP_GPUS=0, SLURM_JOB_GPUS=0, "
            "CUDA_VISIBLE_DEVICES=0), but 4 ranks on this node share 1 GPU and NCCL needs a GPU per rank; "
            "launch at most 1 rank per node, set run.share_gpu: true (for tests: slower NCCL over sockets), "
            "or set run.device: cpu");
  const DeviceChoice shared = choose_device(DeviceKind::kAuto, on_node(node, 3, slurm), /*share_gpu=*/true);
  EXPECT_EQ(shared.device, c10::Device(c10::kCUDA, 0));
  EXPECT_TRUE(shared.shares_gpu);
  EXPECT_EQ(shared.gpu, "GPU-a");  // the one GPU, as every rank reports it
  // Nothing asked for (a workstation's one GPU under mpirun -np 4): the CPU, with the note.
  EXPECT_EQ(
      choose_device(DeviceKind::kAuto, on_node(node, 1)).note,
      "device: run.device auto: 4 ranks on this node share 1 GPU and NCCL needs a GPU per rank; training "
      "on the CPU");
}

// Rank 0 sees {A, B}, rank 1 sees only {A} (a CUDA_VISIBLE_DEVICES per rank, --gpu-bind masks): A
// goes to rank 1 and B to rank 0. Taking the first free GPU in rank order would give rank 0 A and
// leave rank 1 sharing it.
TEST(DeviceBinding, AGpuSeenByFewerRanksIsLeftToThem) {
  const std::vector<std::vector<std::string>> node = {{"GPU-a", "GPU-b"}, {"GPU-a"}};
  for (DeviceKind kind : {DeviceKind::kAuto, DeviceKind::kCuda}) {
    const DeviceChoice first = choose_device(kind, on_node(node, 0)),
                       second = choose_device(kind, on_node(node, 1));
    EXPECT_EQ(first.device, c10::Device(c10::kCUDA, 1));
    EXPECT_EQ(first.gpu, "GPU-b");
    EXPECT_EQ(second.device, c10::Device(c10::kCUDA, 0));
    EXPECT_EQ(second.gpu, "GPU-a");
    EXPECT_FALSE(first.shares_gpu || first.gpu_shared || second.shares_gpu || second.gpu_shared);
    EXPECT_EQ(first.note, "");
  }
}

// Three ranks that see two GPUs between them: no assignment gives each its own, refused in one line.
TEST(DeviceBinding, NoAssignmentOfAGpuPerRankIsRefusedInOneLine) {
  const std::vector<std::vector<std::string>> node = {{"GPU-a", "GPU-b"}, {"GPU-a"}, {"GPU-b"}};
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(error_of(DeviceKind::kCuda, on_node(node, r)),
              "run.device = cuda but 3 ranks on this node share 2 GPUs and NCCL needs a GPU per rank; launch "
              "at most 2 ranks per node, set run.share_gpu: true (for tests: slower NCCL over sockets), or "
              "set run.device: cpu")
        << r;
  EXPECT_TRUE(choose_device(DeviceKind::kCuda, on_node(node, 0), /*share_gpu=*/true).shares_gpu);
}

TEST(GpuAssignment, AMaximumMatchingThatMovesNothingItNeedNot) {
  using Node = std::vector<std::vector<std::string>>;
  using Taken = std::vector<std::optional<int>>;
  EXPECT_EQ(assign_gpus(Node{kNode4, kNode4, kNode4, kNode4}), (Taken{0, 1, 2, 3}));  // the r-th
  EXPECT_EQ(assign_gpus(Node{{"a"}, {"b"}, {"c"}}), (Taken{0, 0, 0}));                // its own
  EXPECT_EQ(assign_gpus(Node{{"a", "b"}, {"a"}}), (Taken{1, 0}));
  // An augmenting path through two ranks: rank 2 takes a, rank 1 moves to b, rank 0 to c.
  EXPECT_EQ(assign_gpus(Node{{"a", "b", "c"}, {"a", "b"}, {"a"}}), (Taken{2, 1, 0}));
  // More ranks than GPUs: ranks in order are given one while any assignment allows, the rest none.
  EXPECT_EQ(assign_gpus(Node{{"a"}, {"a"}}), (Taken{0, std::nullopt}));
  EXPECT_EQ(assign_gpus(Node{{"a", "b"}, {"a"}, {"b"}}), (Taken{1, 0, std::nullopt}));
  EXPECT_EQ(assign_gpus(Node{{}, {"a"}}), (Taken{std::nullopt, 0}));
  EXPECT_EQ(assign_gpus(Node{}), Taken{});
}

// A job that asked for GPUs and finds none stops, naming both, instead of training on the CPU.
TEST(DeviceBinding, AskedForGpusAndFoundNoneIsAnErrorNamingBoth) {
  GpuEnvironment none = same_gpus(true, 0, 0, 2);
  none.variables.slurm_job_gpus = "0,1";
  EXPECT_EQ(
      error_of(DeviceKind::kAuto, none),
      "run.device = auto and the job asked for GPUs (SLURM_JOB_GPUS=0,1), but no CUDA device is visible to "
      "this rank (torch sees 0; check nvidia-smi and CUDA_VISIBLE_DEVICES); set run.device: cpu to train on "
      "the CPU");
  GpuEnvironment unbuilt = same_gpus(false, 1, 0);
  unbuilt.variables.cuda_visible_devices = "GPU-5a1c2f3e-0000-1111-2222-333344445555";
  EXPECT_EQ(
      error_of(DeviceKind::kAuto, unbuilt),
      "run.device = auto and the job asked for GPUs "
      "(CUDA_VISIBLE_DEVICES=GPU-5a1c2f3e-0000-1111-2222-333344445555), but this atoll was built without "
      "the CUDA path (-DATOLL_WITH_CUDA=OFF or a CPU LibTorch); rebuild with -DATOLL_WITH_CUDA=ON or set "
      "run.device: cpu");
  GpuEnvironment listed = same_gpus(true, 0, 0);
  listed.variables.cuda_visible_devices = "0";
  EXPECT_NE(error_of(DeviceKind::kAuto, listed).find("asked for GPUs (CUDA_VISIBLE_DEVICES=0)"),
            std::string::npos);
}

// What the rank table reports for each rank's GPU (tests/gpu/binding.sh compares it to nvidia-smi's).
TEST(GpuIdentities, AUuidIsWrittenAsNvidiaSmiWritesIt) {
  std::array<unsigned char, 16> bytes{};
  for (size_t b = 0; b < bytes.size(); ++b) bytes[b] = static_cast<unsigned char>(0x5a + 17 * b);
  EXPECT_EQ(gpu_uuid_text(bytes, "NVIDIA H100 80GB HBM3"), "GPU-5a6b7c8d-9eaf-c0d1-e2f3-041526374859");
  EXPECT_EQ(gpu_uuid_text(bytes, "NVIDIA A100-SXM4-40GB MIG 1g.5gb"),
            "MIG-5a6b7c8d-9eaf-c0d1-e2f3-041526374859");
}

// MIG instances (CUDA_VISIBLE_DEVICES=MIG-..., or a container given one by its device plugin; one
// instance a rank): NCCL has no peer-to-peer between them, so ranks joined by NCCL are refused in
// one line naming the fix; one rank per job, or islands of one rank each, train on their instance.
const std::string kMigA = "MIG-5a1c2f3e-0000-1111-2222-333344445555";
const std::string kMigB = "MIG-6b2d3a4f-0000-1111-2222-333344445555";

GpuEnvironment on_mig(int local_rank, int world_size) {
  const std::string& mine = local_rank == 0 ? kMigA : kMigB;
  GpuEnvironment g = on_node({{kMigA}, {kMigB}}, local_rank, {mine, "", ""});
  g.world_size = world_size;
  return g;
}

TEST(DeviceBinding, MigInstancesJoinedByNcclAreRefusedInOneLine) {
  EXPECT_EQ(
      error_of(DeviceKind::kCuda, on_mig(1, 2)),
      "run.device = cuda but this rank's GPU " + kMigB +
          " is a MIG instance, which NCCL cannot join to other GPUs (a job of 2 ranks); give each rank a "
          "whole GPU, run one rank per job (or islands of one rank each: parallel.islands with pp = dp = tp "
          "= 1), or set run.device: cpu");
  EXPECT_EQ(
      error_of(DeviceKind::kAuto, on_mig(0, 8)),
      "run.device = auto and the job asked for GPUs (CUDA_VISIBLE_DEVICES=" + kMigA +
          "), but this rank's GPU " + kMigA +
          " is a MIG instance, which NCCL cannot join to other GPUs (a job of 8 ranks); give each rank a "
          "whole GPU, run one rank per job (or islands of one rank each: parallel.islands with pp = dp = tp "
          "= 1), or set run.device: cpu");
  EXPECT_NE(error_of(DeviceKind::kCuda, on_mig(0, 2), /*share_gpu=*/true), "");  // sockets do not help
  // Known by CUDA_VISIBLE_DEVICES alone (identities by position), and by the recorded UUIDs alone:
  // then nothing was asked for, and auto trains on the CPU saying why.
  GpuEnvironment by_variable = same_gpus(true, 1, 0, 1);
  by_variable.variables.cuda_visible_devices = kMigA + "," + kMigB;  // CUDA shows the first only
  by_variable.world_size = 2;
  EXPECT_NE(error_of(DeviceKind::kCuda, by_variable).find("is a MIG instance"), std::string::npos);
  GpuEnvironment by_uuid = on_node({{kMigA}, {kMigB}}, 0);
  by_uuid.world_size = 2;
  const DeviceChoice cpu = choose_device(DeviceKind::kAuto, by_uuid);
  EXPECT_EQ(cpu.device, c10::Device(c10::kCPU));
  EXPECT_EQ(cpu.cpu_reason,
            "this rank's GPU " + kMigA +
                " is a MIG instance, which NCCL cannot join to other GPUs (a job of 2 ranks)");
}

TEST(DeviceBinding, AMigInstanceTrainsOneRankOrAnIslandOfOne) {
  for (DeviceKind kind : {DeviceKind::kAuto, DeviceKind::kCuda}) {
    const DeviceChoice alone = choose_device(kind, on_mig(0, 1));
    EXPECT_EQ(alone.device, c10::Device(c10::kCUDA, 0));
    EXPECT_EQ(alone.gpu, kMigA);
    const DeviceChoice island = choose_device(kind, on_mig(1, 2), false, /*one_rank_islands=*/true);
    EXPECT_EQ(island.device, c10::Device(c10::kCUDA, 0));
    EXPECT_EQ(island.gpu, kMigB);
    EXPECT_EQ(island.note, "");  // an instance of its own: nothing shared
  }
  // Whole GPUs in a job of many ranks are not MIG instances.
  GpuEnvironment whole = on_node({{"GPU-a"}, {"GPU-b"}}, 1, {"GPU-b", "", ""});
  whole.world_size = 16;
  EXPECT_EQ(choose_device(DeviceKind::kCuda, whole).gpu, "GPU-b");
}

// A node whose ranks see no GPU, its view gathered (a CPU node): the CPU, no GPU named.
TEST(DeviceBinding, ANodeWithoutGpusGatheredIsTheCpu) {
  for (int r = 0; r < 2; ++r) {
    const DeviceChoice choice = choose_device(DeviceKind::kAuto, on_node({{}, {}}, r));
    EXPECT_EQ(choice.device, c10::Device(c10::kCPU));
    EXPECT_EQ(choice.gpu, "");
    EXPECT_EQ(choice.cpu_reason, "no CUDA device is visible to this rank");
  }
}

// Without the node's view a rank still names the GPU it took, from what its variables say.
TEST(GpuIdentities, ARankNamesItsGpuWithoutTheNodesView) {
  GpuEnvironment g = same_gpus(true, 2, 1, 2);
  g.variables.cuda_visible_devices = "2,3";
  EXPECT_EQ(choose_device(DeviceKind::kCuda, g).gpu, "3");
  EXPECT_EQ(choose_device(DeviceKind::kCuda, same_gpus(true, 2, 1, 2)).gpu, "#1");
  EXPECT_EQ(choose_device(DeviceKind::kAuto, same_gpus(true, 0, 0)).gpu, "");  // the CPU
}

TEST(GpuIdentities, UuidsThenSlurmsIndicesThenCudaVisibleDevicesThenPositions) {
  const GpuVariables variables{"1,0", "4,5", ""};
  EXPECT_EQ(gpu_identities({"GPU-x", "GPU-y"}, 2, variables), (std::vector<std::string>{"GPU-x", "GPU-y"}));
  EXPECT_EQ(gpu_identities({}, 2, variables), (std::vector<std::string>{"4", "5"}));
  EXPECT_EQ(gpu_identities({}, 2, GpuVariables{"1,0", "", ""}), (std::vector<std::string>{"1", "0"}));
  EXPECT_EQ(gpu_identities({}, 3, variables), (std::vector<std::string>{"#0", "#1", "#2"}));
  EXPECT_EQ(gpu_identities({"GPU-x"}, 0, variables), std::vector<std::string>{});
}

// A node view that does not fit this rank (another count of ranks or of devices) is not used.
TEST(DeviceBinding, ANodeViewThatDoesNotFitIsSetAside) {
  GpuEnvironment g = on_node({{"GPU-a"}, {"GPU-b"}}, 1);
  g.local_size = 4;  // the launcher counts 4 ranks on the node, the gather 2
  EXPECT_EQ(choose_device(DeviceKind::kAuto, g).device, c10::Device(c10::kCPU));  // 4 ranks, 1 GPU
  g = on_node({{"GPU-a"}, {"GPU-b"}}, 1);
  g.visible = 2;  // torch counts otherwise than the gather did
  EXPECT_EQ(choose_device(DeviceKind::kAuto, g).device, c10::Device(c10::kCUDA, 1));  // as if all saw 2
}

TEST(Device, ConfigSpellsTheThreeChoices) {
  EXPECT_EQ(parse_config("").run.device, DeviceKind::kAuto);
  EXPECT_EQ(parse_config("run: {device: cuda}").run.device, DeviceKind::kCuda);
  EXPECT_EQ(parse_config("", {"run.device=cpu"}).run.device, DeviceKind::kCpu);
  try {
    parse_config("run: {device: gpu}");
    FAIL() << "run.device: gpu was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "config: run.device = 'gpu' is not one of auto, cpu, cuda; set run.device to one of them, e.g. auto");
  }
}

TEST(Device, CpuHasNoAllocatorFigures) {
  EXPECT_FALSE(device_memory(c10::Device(c10::kCPU)).has_value());
}

TEST(DatasheetPeak, KnownGpusByTheirDeviceNames) {
  EXPECT_DOUBLE_EQ(*datasheet_bf16_peak_flops("NVIDIA H100 80GB HBM3"), 989e12);
  EXPECT_DOUBLE_EQ(*datasheet_bf16_peak_flops("NVIDIA H100 PCIe"), 756e12);
  EXPECT_DOUBLE_EQ(*datasheet_bf16_peak_flops("NVIDIA H100 NVL"), 835e12);
  EXPECT_DOUBLE_EQ(*datasheet_bf16_peak_flops("NVIDIA H200"), 989e12);
  EXPECT_DOUBLE_EQ(*datasheet_bf16_peak_flops("NVIDIA A100-SXM4-80GB"), 312e12);
  EXPECT_DOUBLE_EQ(*datasheet_bf16_peak_flops("NVIDIA L40S"), 362e12);
  EXPECT_FALSE(datasheet_bf16_peak_flops("Some Future GPU").has_value());
}

// run.deterministic is strict: in warn-only mode LibTorch's fused attention backward keeps its
// order-dependent atomic accumulation on a GPU and only warns (seen on an H100, 2026-11-26).
TEST(DeterministicKernels, StrictSoThatAnOperationWithoutADeterministicKernelStopsTheRun) {
  at::Context& context = at::globalContext();
  const bool was = context.deterministicAlgorithms(),
             was_warn_only = context.deterministicAlgorithmsWarnOnly();
  use_deterministic_kernels();
  EXPECT_TRUE(context.deterministicAlgorithms());
  EXPECT_FALSE(context.deterministicAlgorithmsWarnOnly());
  EXPECT_NE(std::getenv("CUBLAS_WORKSPACE_CONFIG"), nullptr);
  context.setDeterministicAlgorithms(was, was_warn_only);
}

}  // namespace
}  // namespace atl::runtime
