// The loader's side of the data: the computed sample order, datasets of many shards (positions past
// 2^32 on sparse files), their resolution from paths, directories and globs, Megatron's blending
// rule, and a blended stream that is the same whatever the layout or the resume point.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "launcher/plan_data.h"
#include "runtime/data/batches.h"
#include "runtime/data/blend.h"
#include "runtime/data/dataset.h"
#include "runtime/data/sample_order.h"
#include "runtime/data/token_shard.h"
#include "runtime/metrics/data_lines.h"
#include "tests/error_of.h"
#include "tests/temp_dir_test.h"

namespace atl::runtime {
namespace {

using test::error_of;

// The permutation is computed, so an order over more sequences than memory could list costs
// nothing to make, and positions past 2^32 (a trillion-token run) are as cheap as the first.
TEST(SampleOrder, OrdersOfTrillionsOfSequencesNeedNoMemoryAndStayInRange) {
  constexpr int64_t n = (int64_t{1} << 40) + 12345;
  const SampleOrder order(n, 7), same(n, 7);
  std::set<int64_t> seen;
  for (int64_t p : {int64_t{0}, int64_t{1}, (int64_t{1} << 32) + 3, n - 1, n, 3 * n + 17}) {
    const int64_t s = order.sample_at(p);
    EXPECT_GE(s, 0);
    EXPECT_LT(s, n);
    EXPECT_EQ(same.sample_at(p), s);
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 6u) << "six positions of a 2^40 order collided";
  // Small orders of every size are permutations (the Feistel domain is cycle-walked into range).
  for (int64_t size = 1; size <= 40; ++size) {
    const SampleOrder small(size, 3);
    std::set<int64_t> epoch;
    for (int64_t p = 0; p < size; ++p) epoch.insert(small.sample_at(size + p));
    EXPECT_EQ(static_cast<int64_t>(epoch.size()), size) << "size " << size;
  }
}

// Megatron's own indices (megatron-core 0.16.1, helpers_cpp.build_blending_indices, 60 samples).
TEST(BlendWalk, PicksWhatMegatronPicks) {
  const auto picks = [](std::vector<double> weights, int n) {
    BlendWalk walk(weights);
    std::string out;
    for (int i = 0; i < n; ++i) out += static_cast<char>('0' + walk.at(i).dataset);
    return out;
  };
  EXPECT_EQ(picks({0.7, 0.3}, 60), "010010010001001001000100100100010010010001001001000100100100");
  EXPECT_EQ(picks({0.5, 0.3, 0.2}, 60), "012010201001201020100120102010012010201001201020100120102010");
  EXPECT_EQ(picks({7, 3}, 60), picks({0.7, 0.3}, 60)) << "weights are normalised";
}

// Megatron's rule keeps every dataset's count from the start within one sequence of its share; two
// datasets hold it over every window too (their picks are a balanced word), more datasets within two
// (from the bound on both ends: 1.4 at worst seen for four, and 1.0 for three). A walk that jumps back
// (a resume) gives what a fresh walk gives.
TEST(BlendWalk, EachShareIsWithinOneSequenceFromTheStartAndOverWindows) {
  for (const std::vector<double>& weights :
       {std::vector<double>{0.7, 0.3}, std::vector<double>{0.9, 0.1}, std::vector<double>{0.5, 0.3, 0.2},
        std::vector<double>{0.6, 0.25, 0.1, 0.05}}) {
    constexpr int n = 1500;
    constexpr double kSlack = 1e-9;  // the shares' rounding in double
    BlendWalk walk(weights);
    double total = 0;
    for (double w : weights) total += w;
    std::vector<std::vector<int>> before(weights.size(), std::vector<int>(n + 1, 0));
    for (int i = 0; i < n; ++i) {
      const BlendWalk::Draw draw = walk.at(i);
      for (size_t d = 0; d < weights.size(); ++d)
        before[d][i + 1] = before[d][i] + (static_cast<int>(d) == draw.dataset ? 1 : 0);
      EXPECT_EQ(draw.index, before[static_cast<size_t>(draw.dataset)][i]);
    }
    double from_start = 0, window = 0;
    for (size_t d = 0; d < weights.size(); ++d)
      for (int a = 0; a < n; ++a)
        for (int b = a + 1; b <= n; ++b) {
          const double off = std::abs(before[d][b] - before[d][a] - weights[d] / total * (b - a));
          window = std::max(window, off);
          if (a == 0) from_start = std::max(from_start, off);
        }
    EXPECT_LE(from_start, 1.0 + kSlack) << weights.size() << " datasets";
    EXPECT_LE(window, (weights.size() == 2 ? 1.0 : 2.0) + kSlack) << weights.size() << " datasets";
    BlendWalk fresh(weights);
    for (int p : {1000, 17, 999, 0, 1499}) {
      const BlendWalk::Draw ours = walk.at(p), theirs = fresh.at(p);
      EXPECT_EQ(ours.dataset, theirs.dataset) << p;
      EXPECT_EQ(ours.index, theirs.index) << p;
    }
  }
}

class Datasets : public test::TempDirTest {
 protected:
  std::string shard(const std::string& name, const std::vector<uint32_t>& tokens) const {
    write_token_shard(path(name), tokens);
    return path(name);
  }
  // A uint16 llm.c shard of `count` tokens that takes no disk: a sparse body, zero but for `marks`
  // (position -> token).
  std::string sparse_shard(const std::string& name, int32_t count,
                           const std::vector<std::pair<int64_t, uint16_t>>& marks) const {
    const int fd = ::open(path(name).c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    EXPECT_GE(fd, 0);
    int32_t header[256] = {20240520, 1, count};
    EXPECT_EQ(::pwrite(fd, header, sizeof header, 0), static_cast<ssize_t>(sizeof header));
    for (const auto& [position, token] : marks) EXPECT_EQ(::pwrite(fd, &token, 2, 1024 + position * 2), 2);
    EXPECT_EQ(::ftruncate(fd, 1024 + int64_t{count} * 2), 0);
    ::close(fd);
    return path(name);
  }
};

// Three sparse shards of 2^31 - 1 tokens: 6.4 billion tokens, past 2^32, read at its far end
// without writing 12 GB.
TEST_F(Datasets, PositionsPastTwoToTheThirtyTwoAreExact) {
  constexpr int32_t count = INT32_MAX;
  constexpr int seq = 1000;
  const int64_t per_shard = (int64_t{count} - 1) / seq;  // sequences in each shard
  // The last sequence of the third shard, whose first token sits past 2^32 in the dataset.
  const int64_t last = 3 * per_shard - 1;
  const int64_t in_shard = (per_shard - 1) * seq;
  sparse_shard("train-00000.bin", count, {});
  sparse_shard("train-00001.bin", count, {{0, 11}});
  sparse_shard("train-00002.bin", count, {{in_shard, 7}, {in_shard + seq, 9}});
  sparse_shard("val.bin", 2001, {});
  const Dataset dataset = open_dataset(dir_.string(), DataSplit::kTrain, seq);
  EXPECT_EQ(dataset.shards().size(), 3u) << "the directory's train*.bin, not its val.bin";
  EXPECT_EQ(dataset.tokens(), 3 * int64_t{count});
  EXPECT_GT(dataset.tokens(), int64_t{1} << 32);
  EXPECT_EQ(dataset.num_sequences(), 3 * per_shard);
  std::vector<int64_t> tokens(seq + 1);
  dataset.read_sequence(last, tokens.data());
  EXPECT_EQ(tokens.front(), 7);
  EXPECT_EQ(tokens.back(), 9);
  dataset.read_sequence(per_shard, tokens.data());
  EXPECT_EQ(tokens.front(), 11) << "the second shard's first sequence";
  EXPECT_EQ(dataset.locate(last).shard, dataset.shards()[2].get());
  EXPECT_EQ(dataset.locate(last).position, in_shard);
  EXPECT_THROW(dataset.read_sequence(3 * per_shard, tokens.data()), std::out_of_range);
  // A shuffled order over them reaches the far end too.
  const SampleOrder order(dataset.num_sequences(), 1);
  EXPECT_LT(order.sample_at(dataset.num_sequences() + 5), dataset.num_sequences());
}

TEST_F(Datasets, PathsDirectoriesAndGlobsNameTheirShards) {
  std::filesystem::create_directories(path("prepared"));
  std::filesystem::create_directories(path("loose"));
  std::filesystem::create_directories(path("empty"));
  const std::vector<uint32_t> tokens(50, 1);
  for (const char* name : {"prepared/train-00001.bin", "prepared/train-00000.bin", "prepared/val.bin",
                           "loose/b.bin", "loose/a.bin"})
    shard(name, tokens);
  write_file("loose/notes.txt", "not a shard");
  EXPECT_EQ(dataset_files(path("prepared"), DataSplit::kTrain),
            (std::vector<std::string>{path("prepared/train-00000.bin"), path("prepared/train-00001.bin")}));
  EXPECT_EQ(dataset_files(path("prepared/"), DataSplit::kVal),
            (std::vector<std::string>{path("prepared/val.bin")}));
  EXPECT_EQ(dataset_files(path("loose"), DataSplit::kVal),
            (std::vector<std::string>{path("loose/a.bin"), path("loose/b.bin")}))
      << "no val*.bin: every shard";
  EXPECT_EQ(dataset_files(path("*/*a*.bin"), DataSplit::kTrain),
            (std::vector<std::string>{path("loose/a.bin"), path("prepared/train-00000.bin"),
                                      path("prepared/train-00001.bin"), path("prepared/val.bin")}));
  EXPECT_EQ(dataset_files(path("prepared/val.bin"), DataSplit::kTrain),
            (std::vector<std::string>{path("prepared/val.bin")}));
  EXPECT_EQ(error_of([&] { dataset_files(path("web/*.bin"), DataSplit::kTrain); }),
            "data: " + path("web/*.bin") +
                " matches no file; check the pattern, or run `atoll data prepare` first");
  EXPECT_EQ(
      error_of([&] { dataset_files(path("empty"), DataSplit::kTrain); }),
      "data: directory " + path("empty") +
          " holds no .bin shard; point data.train/data.val at one that `atoll data prepare` wrote, or at "
          "the shards themselves");
}

// Two datasets told apart by their tokens (below 100, and 100 and up), blended 3:1.
class TwoDatasetBlend : public Datasets {
 protected:
  void SetUp() override {
    Datasets::SetUp();
    std::vector<uint32_t> low, high;
    for (int i = 0; i < 40 * kSeq + 1; ++i) low.push_back(static_cast<uint32_t>(i % 100));
    for (int i = 0; i < 13 * kSeq + 1; ++i) high.push_back(100 + static_cast<uint32_t>(i % 100));
    std::filesystem::create_directories(path("high"));
    shard("low.bin", low);
    shard("high/train.bin", std::vector<uint32_t>(high.begin(), high.begin() + 6 * kSeq + 1));
    shard("high/train-2.bin", std::vector<uint32_t>(high.begin() + 6 * kSeq, high.end()));
  }
  std::unique_ptr<SequenceSource> source() const {
    return std::move(
        open_training_data({{path("low.bin"), 3}, {path("high"), 1}}, {{path("low.bin")}}, kSeq, 256, 5, 0, 0)
            .train);
  }
  static constexpr int kSeq = 8;
};

TEST_F(TwoDatasetBlend, TheStreamIsTheSameWhateverTheLayoutAndTheResumePoint) {
  constexpr int64_t steps = 30, global_batch = 8;
  std::unique_ptr<SequenceSource> whole = source();
  EXPECT_EQ(whole->num_sequences(), 40 + 6 + 7);
  EXPECT_DOUBLE_EQ(whole->shares()[0], 0.75);
  const at::Tensor straight = whole->shuffled(0, steps * global_batch).inputs;
  // Each step's rows from each dataset: 6 and 2, within one sequence of 3:1 in every step.
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t high =
        straight.narrow(0, s * global_batch, global_batch).select(1, 0).ge(100).sum().item<int64_t>();
    EXPECT_EQ(high, 2) << "step " << s;
  }
  // dp = 1, 2, 4 ranks each reading their slices, and a source opened afresh at step 17 (a resume).
  for (int dp : {1, 2, 4}) {
    std::vector<std::unique_ptr<SequenceSource>> ranks;
    for (int r = 0; r < dp; ++r) ranks.push_back(source());
    for (int64_t s = 17; s < steps; ++s)
      for (int r = 0; r < dp; ++r) {
        const BatchSlice slice = batch_slice(s, global_batch, r, dp, 0, 1);
        EXPECT_TRUE(ranks[r]
                        ->shuffled(slice.first, slice.count)
                        .inputs.equal(straight.narrow(0, slice.first, slice.count)))
            << "dp " << dp << " rank " << r << " step " << s;
      }
  }
  // The high dataset (13 sequences, a quarter of 240 = 60 draws) goes through several epochs, each a
  // permutation of its sequences.
  std::vector<int64_t> firsts;
  for (int64_t i = 0; i < steps * global_batch; ++i)
    if (straight[i][0].item<int64_t>() >= 100) firsts.push_back(straight[i][0].item<int64_t>());
  ASSERT_EQ(firsts.size(), 60u);
  for (int e = 0; e < 4; ++e) {
    std::set<int64_t> epoch(firsts.begin() + e * 13, firsts.begin() + (e + 1) * 13);
    EXPECT_EQ(epoch.size(), 13u) << "epoch " << e;
  }
}

// Each sequence says where documents start in it, from the tokenizer's BOS (at the token) or EOS
// (after it) -- a start at offset 0 is no boundary and is not listed.
TEST_F(Datasets, EachSequenceSaysWhereItsDocumentsStart) {
  // Documents of 3, 6, 2 and 9 tokens, each led by 1 (bos) and ended by 2 (eos); seq 8.
  std::vector<uint32_t> tokens;
  for (int length : {3, 6, 2, 9})
    for (int k = 0; k < length; ++k) tokens.push_back(k == 0 ? 1 : k == length - 1 ? 2 : 7);
  shard("docs.bin", tokens);  // 20 tokens: sequences [0, 9), [8, 17)
  const auto starts = [&](DocumentMarkers markers) {
    return open_sequence_source({{path("docs.bin")}}, DataSplit::kVal, 8, 256, 0, markers)
        ->in_order(0, 2)
        .document_starts;
  };
  using Starts = std::vector<std::vector<int32_t>>;
  EXPECT_EQ(starts({1, -1}), (Starts{{3}, {1, 3}}))
      << "bos at 0, 3, 9 and 11 (offsets 1 and 3 of the second)";
  EXPECT_EQ(starts({-1, 2}), (Starts{{3}, {1, 3}})) << "eos at 2, 8, 10: the next token starts one";
  EXPECT_EQ(starts({1, 7}), starts({1, -1})) << "bos wins";
  EXPECT_EQ(starts({}), (Starts{{}, {}})) << "the byte tokenizer marks nothing";
  // The shuffled stream carries them with its rows.
  const TokenBatch batch =
      open_sequence_source({{path("docs.bin")}}, DataSplit::kTrain, 8, 256, 3, {1, -1})->shuffled(0, 2);
  const std::vector<int32_t> second{1, 3}, first{3};
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(batch.document_starts[i], batch.inputs[i][1].item<int64_t>() == 1 ? second : first);
}

// The start-up summary and `atoll plan` say what the run reads of each dataset, and in one line
// which datasets it reads more than once.
TEST_F(TwoDatasetBlend, TheSummaryNamesEachDatasetItsShareAndItsEpochs) {
  const std::vector<DatasetUse> uses = source()->uses(240);
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[1].name, path("high"));
  EXPECT_EQ(uses[1].shards, 2);
  EXPECT_EQ(uses[1].sequences, 13);
  EXPECT_DOUBLE_EQ(uses[1].share, 0.25);
  EXPECT_DOUBLE_EQ(uses[1].epochs, 60.0 / 13);
  EXPECT_DOUBLE_EQ(uses[0].epochs, 180.0 / 40);
  const std::vector<std::string> blend = data_lines(uses, kSeq, ", validation off");
  EXPECT_EQ(blend,
            (std::vector<std::string>{
                "data: 2 datasets blended by weight (53 sequences of 8 tokens), validation off",
                "  " + path("low.bin") +
                    ": 321 tokens in 1 shard, weight 3 (75.0% of sequences), 4.50 epochs "
                    "in this run",
                "  " + path("high") +
                    ": 106 tokens in 2 shards, weight 1 (25.0% of sequences), 4.62 "
                    "epochs in this run",
                "data: read more than once in this run: " + path("low.bin") + " 4.50 times, " + path("high") +
                    " 4.62 times (repeats weigh less than new tokens; more data or fewer "
                    "steps avoid them)"}));
  const std::vector<std::string> alone = data_lines({uses[0]}, kSeq, "");
  ASSERT_EQ(alone.size(), 2u);
  EXPECT_EQ(alone[0], "data: " + path("low.bin") + " (40 sequences of 8 tokens, 321 tokens in 1 shard)");
  EXPECT_EQ(data_lines({DatasetUse{"a.bin", 1, 100, 10, 1, 1, 0.5}}, kSeq, "").size(), 1u)
      << "read once: no line";

  Config config;
  config.model.seq = kSeq;
  config.train.steps = 30;
  config.train.global_batch = 8;
  config.data.train = {{path("low.bin"), 3}, {path("high"), 1}};
  const std::string plan = launcher::format_data_plan(config);
  EXPECT_NE(plan.find(blend[1]), std::string::npos) << plan;
  config.data.train = {{path("none/*.bin"), 1}};
  EXPECT_EQ(launcher::format_data_plan(config),
            "\ndata: not read here (data: " + path("none/*.bin") +
                " matches no file; check the pattern, or run `atoll data prepare` first)\n");
}

}  // namespace
}  // namespace atl::runtime
