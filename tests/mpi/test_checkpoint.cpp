// Checkpoints: N steps, save, a new trainer resumes, N more steps -- bitwise the same losses and
// parameters as 2N steps straight (1 rank, DP=2 with ZeRO-1, TP=2 x PP=2, by the launched rank
// count), in each save mode (sync, async, async_lazy with a slowed copy) and with a blend of two datasets;
// damaged checkpoints (a flipped byte, a truncated shard, a missing manifest) are refused with a precise
// error when named and skipped by `resume: auto`; and a checkpoint saved under TP=2 x PP=2 loads under DP=4
// with ZeRO-3 and on one rank with the same parameters.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint_store.h"
#include "runtime/inference/trained_model.h"
#include "tests/parity_harness.h"

namespace {

namespace fs = std::filesystem;
using atl::runtime::Config;
using atl::runtime::Trainer;
using atl::test::world_size;

// The world communicator; every test holds it while its trainers live.
class Checkpoint : public ::testing::Test {
 protected:
  atl::comm::MpiCommunicator& world() { return *world_; }

 private:
  std::shared_ptr<atl::comm::MpiCommunicator> world_ = atl::test::MpiTestEnv::runtime().world();
};

// The launched ranks as 1 rank, DP=2 with ZeRO-1, or TP=2 x PP=2 (2 microbatches), with one run
// directory for the job.
Config resume_layout(atl::comm::MpiCommunicator& comm, const std::string& tag) {
  Config config = atl::test::layout(tag, 1);
  config.run.dir = atl::test::from_rank0(comm, config.run.dir);
  if (world_size() == 4) {
    config.parallel.dp = 1;
    config.parallel.tp = 2;
    config.parallel.pp = 2;
    config.parallel.microbatches = 2;
  } else if (world_size() == 2) {
    config.parallel.zero = 1;
  }
  config.train.steps = 8;
  config.checkpoint.resume = "none";
  return config;
}

struct Trained {
  std::vector<double> losses;
  std::map<std::string, at::Tensor> params;
};

Trained run_steps(Trainer& trainer, int steps) {
  Trained out;
  for (int s = 0; s < steps; ++s) out.losses.push_back(trainer.train_step().loss);
  out.params = atl::test::on_host(trainer.full_parameters());
  return out;
}

// In each save mode: N steps, save, two more steps while the save proceeds (under async_lazy the
// copy is slowed so that training reaches the next update before the snapshot is complete), exit;
// a new trainer resumes at N and trains N more steps, bit for bit as 2N steps straight.
class CheckpointMode : public Checkpoint,
                       public ::testing::WithParamInterface<atl::runtime::CheckpointMode> {};

// `config` trained straight and with a save at half its steps, two more steps, an exit and a resume:
// the resumed half is bit for bit the straight run's (losses and parameters).
void expect_resume_is_bitwise(atl::comm::MpiCommunicator& world, Config config,
                              const atl::runtime::LaunchEnvironment& environment = {}) {
  const int half = config.train.steps / 2;
  Trainer straight_trainer(config, world, nullptr);
  const Trained straight = run_steps(straight_trainer, config.train.steps);

  config.run.dir += "-interrupted";
  {
    Trainer first(config, world, nullptr, environment);
    run_steps(first, half);
    first.save_checkpoint();
    run_steps(first, 2);  // the state moves on; the checkpoint must hold step `half`
  }                       // exit: waits for the commit
  config.checkpoint.resume = "auto";
  Trainer resumed(config, world, nullptr);
  ASSERT_EQ(resumed.step(), half);
  const Trained second = run_steps(resumed, half);
  for (int s = 0; s < half; ++s)
    EXPECT_EQ(second.losses[s], straight.losses[half + s]) << "step " << half + s + 1;
  for (const auto& [name, value] : straight.params) EXPECT_TRUE(second.params.at(name).equal(value)) << name;
}

TEST_P(CheckpointMode, ResumeIsBitwise) {
  Config config = resume_layout(world(), "ckpt-resume-" + std::string(atl::runtime::name_of(GetParam())));
  config.checkpoint.mode = GetParam();
  atl::runtime::LaunchEnvironment slow_copy;
  if (GetParam() == atl::runtime::CheckpointMode::kAsyncLazy) slow_copy.checkpoint_copy_delay_ms = "10";
  expect_resume_is_bitwise(world(), config, slow_copy);
}

// The states a checkpoint must carry beyond fp32 ZeRO-1 at DP=2, in the same layout: bf16 training
// (the fp32 master weights, not the bf16 copies, are what resumes) and ZeRO-2 and ZeRO-3 (gradients
// and parameters sharded over the dp ranks).
ATOLL_RUNS_AT(Checkpoint, Bf16AndZero2And3ResumeIsBitwise, 2);
TEST_F(Checkpoint, Bf16AndZero2And3ResumeIsBitwise) {
  struct Variant {
    const char* name;
    atl::runtime::Precision precision;
    int zero;
  };
  for (const Variant v : {Variant{"bf16-zero1", atl::runtime::Precision::kBf16, 1},
                          Variant{"zero2", atl::runtime::Precision::kFp32, 2},
                          Variant{"zero3", atl::runtime::Precision::kFp32, 3},
                          Variant{"bf16-zero3", atl::runtime::Precision::kBf16, 3}}) {
    SCOPED_TRACE(v.name);
    Config config = resume_layout(world(), std::string("ckpt-state-") + v.name);
    config.train.precision = v.precision;
    config.parallel.zero = v.zero;
    expect_resume_is_bitwise(world(), config);
  }
}

// A checkpoint holds the fp32 master weights whatever precision trained them: one saved under fp8
// (on the CPU its emulation, ATOLL_FP8_EMULATION) resumes under bf16, and one saved under bf16
// resumes under fp8. The resumed trainer starts from the saved parameters bit for bit and trains on
// in its own precision, its losses within 1% of the run that kept the saving precision.
ATOLL_RUNS_AT(Checkpoint, Fp8AndBf16ResumeInEachOther, 2);
TEST_F(Checkpoint, Fp8AndBf16ResumeInEachOther) {
  using atl::runtime::Precision;
  atl::runtime::LaunchEnvironment emulated;
  emulated.fp8_emulation = "1";
  for (const auto& [from, to] :
       {std::pair{Precision::kFp8, Precision::kBf16}, std::pair{Precision::kBf16, Precision::kFp8}}) {
    const std::string tag = "ckpt-precision-" + std::string(atl::runtime::name_of(from));
    SCOPED_TRACE(tag);
    Config config = resume_layout(world(), tag);
    config.train.precision = from;
    Trainer straight_trainer(config, world(), nullptr, emulated);
    const Trained straight = run_steps(straight_trainer, config.train.steps);
    const int half = config.train.steps / 2;
    config.run.dir += "-switched";
    Trained saved;
    {
      Trainer first(config, world(), nullptr, emulated);
      saved = run_steps(first, half);
      first.save_checkpoint();
    }
    config.train.precision = to;
    config.checkpoint.resume = "auto";
    Trainer resumed(config, world(), nullptr, emulated);
    ASSERT_EQ(resumed.step(), half);
    for (const auto& [name, value] : atl::test::on_host(resumed.full_parameters()))
      EXPECT_TRUE(value.equal(saved.params.at(name))) << name;
    const Trained second = run_steps(resumed, half);
    for (int s = 0; s < half; ++s)
      EXPECT_NEAR(second.losses[s], straight.losses[half + s], 0.01 * straight.losses[half + s])
          << "step " << half + s + 1;
  }
}

// A blend of two datasets (one of them a directory of two shards) resumes bit for bit too: the
// cursor is the global position, and both the blend and each dataset's order are computed from it.
ATOLL_RUNS_AT(Checkpoint, BlendResumeIsBitwise, 2);
TEST_F(Checkpoint, BlendResumeIsBitwise) {
  Config config = resume_layout(world(), "ckpt-blend");
  const fs::path data = fs::path(config.data.train[0].path).parent_path();
  fs::create_directories(data / "code");
  atl::runtime::write_token_shard((data / "code/train-00000.bin").string(),
                                  atl::test::synthetic_tokens(3000, 3));
  atl::runtime::write_token_shard((data / "code/train-00001.bin").string(),
                                  atl::test::synthetic_tokens(2000, 4));
  config.data.train = {{config.data.train[0].path, 0.7}, {(data / "code").string(), 0.3}};
  expect_resume_is_bitwise(world(), config);
}

INSTANTIATE_TEST_SUITE_P(Modes, CheckpointMode,
                         ::testing::Values(atl::runtime::CheckpointMode::kSync,
                                           atl::runtime::CheckpointMode::kAsync,
                                           atl::runtime::CheckpointMode::kAsyncLazy));

// Saves at steps 2 and 4; returns the checkpoint directory.
std::string two_checkpoints(atl::comm::MpiCommunicator& world, Config& config) {
  config.train.steps = 4;
  config.checkpoint.every = 2;
  Trainer trainer(config, world, nullptr);
  trainer.run();
  return config.checkpoint_dir();
}

// Rank 0 damages a file; everybody waits for it.
void damage(atl::comm::MpiCommunicator& world, const std::function<void()>& act) {
  if (world.rank() == 0) act();
  world.barrier();
}

// Resuming from the damaged step-4 by name fails with `message` on every rank; `auto` falls back to step 2.
void expect_refused_and_skipped(atl::comm::MpiCommunicator& world, Config config, const std::string& dir,
                                const std::string& message) {
  config.checkpoint.resume = dir + "/step-4";
  try {
    Trainer named(config, world, nullptr);
    ADD_FAILURE() << "resuming from a damaged checkpoint should fail";
  } catch (const atl::checkpoint::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
  config.checkpoint.resume = "auto";
  Trainer fallback(config, world, nullptr);
  EXPECT_EQ(fallback.step(), 2);
  EXPECT_TRUE(fs::exists(dir + "/step-4")) << "a damaged checkpoint is never deleted by loading";
}

TEST_F(Checkpoint, FlippedByteIsDetected) {
  Config config = resume_layout(world(), "ckpt-flip");
  const std::string dir = two_checkpoints(world(), config);
  damage(world(), [&] {
    std::fstream f(dir + "/step-4/rank-00000.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    char byte = 0;
    f.read(&byte, 1);
    f.seekp(-100, std::ios::end);
    byte = static_cast<char>(byte ^ 0x10);
    f.write(&byte, 1);
  });
  expect_refused_and_skipped(world(), config, dir,
                             "checksum mismatch in " + dir + "/step-4/rank-00000.safetensors");
}

// The safetensors header altered where no chunk checksum looks (the loader reads by the manifest's
// offsets): one tensor's dtype F32 -> F16 in the JSON. Without the header's own checksum in the
// manifest, this checkpoint loaded as if nothing had happened.
TEST_F(Checkpoint, AlteredShardHeaderIsDetected) {
  Config config = resume_layout(world(), "ckpt-header");
  const std::string dir = two_checkpoints(world(), config);
  damage(world(), [&] {
    const std::string shard = dir + "/step-4/rank-00000.safetensors";
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    std::string head(4096, '\0');
    f.read(head.data(), static_cast<std::streamsize>(head.size()));
    const size_t at = head.find("\"F32\"");
    ASSERT_NE(at, std::string::npos);
    f.clear();
    f.seekp(static_cast<std::streamoff>(at + 2));
    f.write("16", 2);  // "F32" -> "F16"
  });
  expect_refused_and_skipped(world(), config, dir,
                             "shard " + dir +
                                 "/step-4/rank-00000.safetensors: its safetensors header fails the "
                                 "manifest's checksum");
}

TEST_F(Checkpoint, TruncatedShardIsDetected) {
  Config config = resume_layout(world(), "ckpt-truncate");
  const std::string dir = two_checkpoints(world(), config);
  damage(world(), [&] {
    const std::string shard = dir + "/step-4/rank-00000.safetensors";
    fs::resize_file(shard, fs::file_size(shard) / 2);
  });
  expect_refused_and_skipped(world(), config, dir, "is truncated");
}

TEST_F(Checkpoint, MissingManifestIsDetected) {
  Config config = resume_layout(world(), "ckpt-manifest");
  const std::string dir = two_checkpoints(world(), config);
  damage(world(), [&] { fs::remove(dir + "/step-4/manifest.pb"); });
  expect_refused_and_skipped(world(), config, dir, "manifest.pb is missing");
}

ATOLL_RUNS_AT(Checkpoint, LoadsIntoAnotherLayout, 4);
TEST_F(Checkpoint, LoadsIntoAnotherLayout) {
  Config saved = resume_layout(world(), "ckpt-reshard");
  saved.train.steps = 3;
  Trainer original(saved, world(), nullptr);
  run_steps(original, saved.train.steps);
  original.save_checkpoint();
  const std::map<std::string, at::Tensor> pieces =
      atl::test::on_host(original.full_parameters());  // this rank's tp piece

  // One rank alone (a communicator of its own on every rank) reads the whole model.
  Config single = saved;
  single.parallel = atl::runtime::ParallelConfig{};
  single.checkpoint.resume = saved.checkpoint_dir() + "/step-3";
  single.run.dir += "-single-" + std::to_string(world().rank());
  MPI_Comm self;
  MPI_Comm_dup(MPI_COMM_SELF, &self);
  atl::comm::MpiCommunicator alone(atl::test::MpiTestEnv::runtime(), self, "self");
  Trainer one_rank(single, alone, nullptr);
  const std::map<std::string, at::Tensor> whole = atl::test::on_host(one_rank.full_parameters());
  const int tp_rank = world().rank() % 2;
  for (const auto& [name, piece] : pieces)
    EXPECT_TRUE(
        piece.equal(atl::runtime::LlamaModel::shard_of(saved.model, 2, tp_rank, name, whole.at(name))))
        << name;

  // DP=4 with ZeRO-3: the same whole tensors, and training goes on as under the original layout.
  Config zero3 = single;
  zero3.parallel.dp = 4;
  zero3.parallel.zero = 3;
  zero3.run.dir = saved.run.dir + "-zero3";
  Trainer sharded(zero3, world(), nullptr);
  EXPECT_EQ(sharded.step(), 3);
  for (const auto& [name, value] : atl::test::on_host(sharded.full_parameters()))
    EXPECT_TRUE(value.equal(whole.at(name))) << name;
  for (int s = 0; s < 5; ++s) {
    const double expected = original.train_step().loss, ours = sharded.train_step().loss;
    EXPECT_NEAR(ours, expected, 1e-4 * expected) << "step " << 4 + s;
  }
}

}  // namespace

namespace {

// Export round trip: a checkpoint exported to a Hugging Face directory (model.safetensors,
// config.json) and read back with model.init_from gives bitwise the parameters of the trained
// model, in any layout.
TEST_F(Checkpoint, ExportedWeightsStartANewRun) {
  Config config = resume_layout(world(), "ckpt-export");
  config.train.steps = 3;
  Trainer trained(config, world(), nullptr);
  run_steps(trained, config.train.steps);
  const std::string dir = trained.save_checkpoint();
  const std::map<std::string, at::Tensor> expected = atl::test::on_host(trained.full_parameters());
  const std::string exported = config.run.dir + "/export";
  if (world().rank() == 0) atl::runtime::export_hugging_face(dir, exported);
  world().barrier();
  EXPECT_TRUE(fs::exists(exported + "/config.json"));
  EXPECT_TRUE(fs::exists(exported + "/model.safetensors"));

  Config fresh = config;
  fresh.model.init_from = exported;
  fresh.checkpoint.resume = "none";
  fresh.run.dir += "-fresh";
  Trainer started(fresh, world(), nullptr);
  EXPECT_EQ(started.step(), 0);
  for (const auto& [name, value] : atl::test::on_host(started.full_parameters()))
    EXPECT_TRUE(value.equal(expected.at(name))) << name;
}

}  // namespace
