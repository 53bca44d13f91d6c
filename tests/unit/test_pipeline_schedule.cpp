// Pipeline schedules (parallel/pipeline/schedule.h), checked without MPI or NCCL. Two simulators play
// every stage's operation list together, each run of consecutive transfers posted as one batch as
// the executor posts it:
// - MPI's semantics, with time: posting never blocks, and a compute operation waits until every
//   transfer of the batch holding its input has been posted at the other end. It proves each schedule
//   deadlock-free, ordered, within its memory bound and as idle as theory says.
// - NCCL's semantics: each stage's batches run in order on one stream, a batch starts once the one
//   before it has finished and the computations posted before it are done, and it finishes only when
//   every peer has started the batch holding the matching transfer; transfers between two stages
//   match in the order they are posted (NCCL has no tags). It proves each schedule deadlock-free and
//   its transfers matched in order on GPUs.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/stage_layout.h"

namespace atl::parallel::pipeline {
namespace {

// A transfer: (sender stage, receiver stage, carries activations, microbatch, receiving virtual stage).
using TransferKey = std::tuple<int, int, bool, int, int>;

TransferKey key_of(const PipeOp& op, const PipelineShape& shape) {
  const bool sending = op.action == Action::kSendForward || op.action == Action::kSendBackward;
  const bool activation = op.action == Action::kRecvForward || op.action == Action::kSendForward;
  const int peer = peer_stage(op, shape);
  const int own_vs = shape.virtual_stage(op.chunk);
  const int peer_vs = activation == sending ? own_vs + 1 : own_vs - 1;
  const int receiver_vs = sending ? peer_vs : own_vs;
  return sending ? TransferKey{shape.stage, peer, activation, op.microbatch, receiver_vs}
                 : TransferKey{peer, shape.stage, activation, op.microbatch, receiver_vs};
}

struct SimulationResult {
  bool deadlocked = false;
  double makespan = 0.0;
  std::vector<double> busy;  // compute time per stage
};

bool is_send(Action action) {
  return action == Action::kSendForward || action == Action::kSendBackward;
}

// The batch of each operation: consecutive transfers share one (what the executor posts as one
// batch_p2p), a compute operation has none (-1). `one_per_transfer` gives each transfer its own.
std::vector<int> batch_ids(const std::vector<PipeOp>& ops, bool one_per_transfer = false) {
  std::vector<int> ids(ops.size(), -1);
  int batch = -1;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!is_communication(ops[i].action)) continue;
    if (one_per_transfer || i == 0 || !is_communication(ops[i - 1].action)) ++batch;
    ids[i] = batch;
  }
  return ids;
}

// The receive a compute operation needs, if any.
std::optional<PipeOp> input_of(const PipeOp& op, const PipelineShape& shape) {
  const bool forward = op.action == Action::kForward;
  if (forward ? shape.is_first(op.chunk) : shape.is_last(op.chunk)) return std::nullopt;
  return PipeOp{forward ? Action::kRecvForward : Action::kRecvBackward, op.microbatch, op.chunk};
}

// Plays the lists of all stages with forward cost 1 and backward cost 2 per full stage (a chunk
// costs 1/v of that) and instantaneous transfers, under MPI's semantics (see the top).
SimulationResult simulate(const std::vector<std::vector<PipeOp>>& lists,
                          const std::vector<PipelineShape>& shapes) {
  const int stages = static_cast<int>(lists.size());
  std::vector<size_t> position(stages, 0);
  std::vector<double> clock(stages, 0.0);
  std::map<TransferKey, double> sent, received;  // when each end of a transfer was posted
  std::vector<std::vector<int>> batches;
  for (const auto& list : lists) batches.push_back(batch_ids(list));
  SimulationResult result;
  result.busy.assign(stages, 0.0);

  // When every transfer of stage s's batch `batch` had both ends posted; nullopt while one has not.
  const auto batch_ready = [&](int s, int batch) -> std::optional<double> {
    double ready = 0.0;
    for (size_t i = 0; i < lists[s].size(); ++i) {
      if (batches[s][i] != batch) continue;
      const PipeOp& op = lists[s][i];
      const auto& other_end = is_send(op.action) ? received : sent;
      const auto it = other_end.find(key_of(op, shapes[s]));
      if (it == other_end.end()) return std::nullopt;
      ready = std::max(ready, it->second);
    }
    return ready;
  };

  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < stages; ++s) {
      for (; position[s] < lists[s].size(); ++position[s], progress = true) {
        const PipeOp& op = lists[s][position[s]];
        if (is_communication(op.action)) {
          auto& posted = is_send(op.action) ? sent : received;
          EXPECT_TRUE(posted.emplace(key_of(op, shapes[s]), clock[s]).second) << "posted twice";
          continue;
        }
        // The input this compute operation needs: its receive must have been posted earlier, and
        // the operation waits for the whole batch that holds it.
        if (const std::optional<PipeOp> input = input_of(op, shapes[s])) {
          const auto at =
              std::find(lists[s].begin(), lists[s].begin() + static_cast<long>(position[s]), *input);
          EXPECT_NE(at, lists[s].begin() + static_cast<long>(position[s]))
              << action_name(op.action) << " before its receive was posted";
          if (at == lists[s].begin() + static_cast<long>(position[s])) break;
          const std::optional<double> ready = batch_ready(s, batches[s][at - lists[s].begin()]);
          if (!ready) break;  // blocked until the other ends get there
          clock[s] = std::max(clock[s], *ready);
        }
        const double cost = (op.action == Action::kForward ? 1.0 : 2.0) / shapes[s].virtual_stages;
        clock[s] += cost;
        result.busy[s] += cost;
      }
    }
  }
  for (int s = 0; s < stages; ++s) {
    result.deadlocked |= position[s] < lists[s].size();
    result.makespan = std::max(result.makespan, clock[s]);
  }
  if (!result.deadlocked) {
    EXPECT_EQ(sent.size(), received.size()) << "every send needs exactly one receive";
    for (const auto& [key, time] : sent) EXPECT_TRUE(received.count(key)) << "a send nobody receives";
  }
  return result;
}

struct StreamResult {
  bool deadlocked = false;
  bool matched_in_order = true;  // the k-th send from a to b is the k-th receive at b from a
};

// Plays the lists under NCCL's semantics (see the top); no time.
StreamResult simulate_in_order_streams(const std::vector<std::vector<PipeOp>>& lists,
                                       const std::vector<PipelineShape>& shapes,
                                       bool one_per_transfer = false) {
  const int stages = static_cast<int>(lists.size());
  StreamResult result;
  std::vector<std::vector<int>> batches;
  std::map<std::pair<TransferKey, bool>, std::pair<int, int>> batch_of;  // (key, is send) -> (stage, batch)
  std::map<std::pair<int, int>, std::vector<TransferKey>> sends, receives;  // by (from, to), in posting order
  std::vector<int> batch_count(stages, 0);
  for (int s = 0; s < stages; ++s) {
    batches.push_back(batch_ids(lists[s], one_per_transfer));
    for (size_t i = 0; i < lists[s].size(); ++i) {
      const PipeOp& op = lists[s][i];
      if (!is_communication(op.action)) continue;
      const TransferKey key = key_of(op, shapes[s]);
      batch_of[{key, is_send(op.action)}] = {s, batches[s][i]};
      (is_send(op.action) ? sends : receives)[{std::get<0>(key), std::get<1>(key)}].push_back(key);
      batch_count[s] = batches[s][i] + 1;
    }
  }
  for (const auto& [pair, keys] : sends) result.matched_in_order &= receives[pair] == keys;

  std::vector<std::vector<bool>> started(stages), finished(stages);
  for (int s = 0; s < stages; ++s) {
    started[s].assign(batch_count[s], false);
    finished[s].assign(batch_count[s], false);
  }
  std::vector<size_t> computed(stages, 0);  // list position of the next compute operation
  const auto next_compute = [&](int s) {
    while (computed[s] < lists[s].size() && is_communication(lists[s][computed[s]].action)) ++computed[s];
    return computed[s];
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < stages; ++s) {
      // The stream: its first unstarted batch starts once the batch before it has finished and the
      // computations posted before it (whose results it may send) are done.
      for (size_t i = 0; i < lists[s].size(); ++i) {
        const int b = batches[s][i];
        if (b < 0 || started[s][b]) continue;
        if ((b == 0 || finished[s][b - 1]) && next_compute(s) > i) started[s][b] = progress = true;
        break;
      }
      // Started batches finish when every transfer's other end is in a started batch.
      for (int b = 0; b < batch_count[s]; ++b) {
        if (!started[s][b] || finished[s][b]) continue;
        bool all = true;
        for (size_t i = 0; i < lists[s].size(); ++i) {
          if (batches[s][i] != b) continue;
          const PipeOp& op = lists[s][i];
          const auto [peer, peer_batch] = batch_of.at({key_of(op, shapes[s]), !is_send(op.action)});
          all &= started[peer][peer_batch];
        }
        if (all) finished[s][b] = progress = true;
      }
      // The compute stream: in order, each operation after the batch holding its input.
      while (next_compute(s) < lists[s].size()) {
        const PipeOp& op = lists[s][computed[s]];
        if (const std::optional<PipeOp> input = input_of(op, shapes[s])) {
          const auto [stage, batch] = batch_of.at({key_of(*input, shapes[s]), false});
          if (!finished[stage][batch]) break;
        }
        ++computed[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < stages; ++s) {
    result.deadlocked |= next_compute(s) < lists[s].size();
    for (int b = 0; b < batch_count[s]; ++b) result.deadlocked |= !finished[s][b];
  }
  return result;
}

std::vector<PipelineShape> shapes_of(int p, int m, int v) {
  std::vector<PipelineShape> shapes;
  for (int r = 0; r < p; ++r) shapes.push_back({r, p, m, v});
  return shapes;
}

std::vector<std::vector<PipeOp>> lists_of(ScheduleKind kind, const std::vector<PipelineShape>& shapes) {
  std::vector<std::vector<PipeOp>> lists;
  for (const PipelineShape& s : shapes) lists.push_back(build_schedule(kind, s));
  return lists;
}

// Every (microbatch, chunk) runs one forward and, later, one backward; returns the forwards run
// before the first backward (the warmup, plus the steady state's first forward when there is one)
// and the most forwards ever waiting for their backward.
std::pair<int, int> check_order(const std::vector<PipeOp>& ops, const PipelineShape& shape) {
  std::set<std::pair<int, int>> forwarded, backwarded;
  int warmup = -1, in_flight = 0, max_in_flight = 0;
  for (const PipeOp& op : ops) {
    if (op.action == Action::kForward) {
      EXPECT_TRUE(forwarded.insert({op.microbatch, op.chunk}).second) << "forward twice";
      max_in_flight = std::max(max_in_flight, ++in_flight);
    } else if (op.action == Action::kBackward) {
      if (warmup < 0) warmup = static_cast<int>(forwarded.size());
      EXPECT_TRUE(forwarded.count({op.microbatch, op.chunk}))
          << "backward of mb " << op.microbatch << " before its forward";
      EXPECT_TRUE(backwarded.insert({op.microbatch, op.chunk}).second) << "backward twice";
      --in_flight;
    }
  }
  const size_t expected = static_cast<size_t>(shape.microbatches) * shape.virtual_stages;
  EXPECT_EQ(forwarded.size(), expected);
  EXPECT_EQ(backwarded.size(), expected);
  return {warmup, max_in_flight};
}

TEST(PipelineSchedule, GPipeAndOneFOneBAreDeadlockFreeOrderedAndIdleAsTheoryForSmallPipelines) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 16; ++m) {
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                     (kind == ScheduleKind::kGPipe ? " gpipe" : " 1f1b"));
        const auto shapes = shapes_of(p, m, 1);
        const auto lists = lists_of(kind, shapes);
        for (int r = 0; r < p; ++r) {
          const auto [before_backward, in_flight] = check_order(lists[r], shapes[r]);
          EXPECT_EQ(before_backward, std::min(warmup_forwards(kind, shapes[r]) + 1, m));
          if (kind == ScheduleKind::kOneFOneB) {
            EXPECT_EQ(warmup_forwards(kind, shapes[r]), std::min(p - r - 1, m));
            EXPECT_LE(in_flight, p);  // 1F1B's memory bound: at most p microbatches stored
          } else {
            EXPECT_EQ(in_flight, m);
          }
        }
        const SimulationResult sim = simulate(lists, shapes);
        ASSERT_FALSE(sim.deadlocked);
        const double theory = static_cast<double>(p - 1) / (m + p - 1);
        for (int r = 0; r < p; ++r)
          EXPECT_NEAR(1.0 - sim.busy[r] / sim.makespan, theory, 1e-12) << "stage " << r;
      }
    }
  }
}

TEST(PipelineSchedule, InterleavedIsDeadlockFreeOrderedAndIdleAsTheory) {
  for (int p = 2; p <= 8; ++p) {
    for (int v = 1; v <= 4; ++v) {
      for (int m = p; m <= 16; m += p) {
        SCOPED_TRACE("p=" + std::to_string(p) + " v=" + std::to_string(v) + " m=" + std::to_string(m));
        const auto shapes = shapes_of(p, m, v);
        const auto lists = lists_of(ScheduleKind::kInterleaved, shapes);
        for (int r = 0; r < p; ++r) {
          const int warmup = warmup_forwards(ScheduleKind::kInterleaved, shapes[r]);
          EXPECT_EQ(warmup, std::min(2 * (p - r - 1) + (v - 1) * p, m * v));
          const auto [before_backward, in_flight] = check_order(lists[r], shapes[r]);
          EXPECT_EQ(before_backward, std::min(warmup + 1, m * v));
          EXPECT_LE(in_flight, warmup + 1);
        }
        const SimulationResult sim = simulate(lists, shapes);
        ASSERT_FALSE(sim.deadlocked);
        const double one_f_one_b = static_cast<double>(p - 1) / (m + p - 1);
        for (int r = 0; r < p; ++r) {
          const double idle = 1.0 - sim.busy[r] / sim.makespan;
          EXPECT_LE(idle, one_f_one_b + 1e-12) << "stage " << r;
          // Megatron: chunks of 1/v the work shrink the bubble v-fold.
          EXPECT_NEAR(idle, static_cast<double>(p - 1) / (v * m + p - 1), 1e-12) << "stage " << r;
        }
      }
    }
  }
}

TEST(PipelineSchedule, InterleavedRunsChunksInRoundsOfTheStageCount) {
  // p = 2, v = 2, m = 4 on stage 0: forwards take microbatches 0, 1 through chunk 0, then chunk 1.
  const std::vector<PipeOp> ops = build_schedule(ScheduleKind::kInterleaved, {0, 2, 4, 2});
  std::vector<std::pair<int, int>> forwards;
  for (const PipeOp& op : ops)
    if (op.action == Action::kForward) forwards.push_back({op.microbatch, op.chunk});
  const std::vector<std::pair<int, int>> expected = {{0, 0}, {1, 0}, {0, 1}, {1, 1},
                                                     {2, 0}, {3, 0}, {2, 1}, {3, 1}};
  EXPECT_EQ(forwards, expected);
}

TEST(PipelineSchedule, ForwardOnlyIsDeadlockFree) {
  for (int p = 1; p <= 8; ++p) {
    for (int v = 1; v <= 4; ++v) {
      for (int m = 1; m <= 9; m += 4) {
        const auto shapes = shapes_of(p, m, v);
        std::vector<std::vector<PipeOp>> lists;
        for (const PipelineShape& s : shapes) lists.push_back(forward_only_schedule(s));
        EXPECT_FALSE(simulate(lists, shapes).deadlocked) << "p=" << p << " v=" << v << " m=" << m;
      }
    }
  }
}

// Every schedule the executor runs, on in-order streams with tagless matching (NCCL): no deadlock,
// and the transfers between each pair of stages posted in the same order at both ends.
TEST(PipelineSchedule, EveryScheduleIsDeadlockFreeAndMatchedInOrderOnInOrderStreams) {
  struct Case {
    ScheduleKind kind;
    int p, v, m;
  };
  std::vector<Case> cases;
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 16; ++m)
      for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB})
        cases.push_back({kind, p, 1, m});
  for (int p = 2; p <= 8; ++p)
    for (int v = 1; v <= 4; ++v)
      for (int m = p; m <= 16; m += p) cases.push_back({ScheduleKind::kInterleaved, p, v, m});
  for (const Case& c : cases) {
    const auto shapes = shapes_of(c.p, c.m, c.v);
    const StreamResult training = simulate_in_order_streams(lists_of(c.kind, shapes), shapes);
    std::vector<std::vector<PipeOp>> evaluation;
    for (const PipelineShape& s : shapes) evaluation.push_back(forward_only_schedule(s));
    const StreamResult forward_only = simulate_in_order_streams(evaluation, shapes);
    const std::string name = "p=" + std::to_string(c.p) + " v=" + std::to_string(c.v) +
                             " m=" + std::to_string(c.m) +
                             " kind=" + std::to_string(static_cast<int>(c.kind));
    EXPECT_FALSE(training.deadlocked) << name;
    EXPECT_TRUE(training.matched_in_order) << name;
    EXPECT_FALSE(forward_only.deadlocked) << name;
    EXPECT_TRUE(forward_only.matched_in_order) << name;
  }
}

// The executor connects a stage's neighbours once, on its first list, which may be a training or a
// forward-only one: both name the same neighbours, and each stage's neighbours name it back.
TEST(PipelineSchedule, NeighboursAreSymmetricAndTheSameForTrainingAndEvaluation) {
  for (int p = 2; p <= 8; ++p)
    for (int v = 1; v <= 3; ++v)
      for (int m : {p, 2 * p}) {
        const ScheduleKind kind = v > 1 ? ScheduleKind::kInterleaved : ScheduleKind::kOneFOneB;
        const auto shapes = shapes_of(p, m, v);
        const std::string name =
            "p=" + std::to_string(p) + " v=" + std::to_string(v) + " m=" + std::to_string(m);
        std::vector<std::vector<int>> neighbours;
        for (const PipelineShape& s : shapes) {
          neighbours.push_back(neighbour_stages(build_schedule(kind, s), s));
          if (v == 1) {
            EXPECT_EQ(neighbours.back(), neighbour_stages(build_schedule(ScheduleKind::kGPipe, s), s))
                << name;
          }
          PipelineShape one = s;
          one.microbatches = 1;  // evaluation may run fewer microbatches than training
          EXPECT_EQ(neighbours.back(), neighbour_stages(forward_only_schedule(one), one)) << name;
        }
        for (int a = 0; a < p; ++a) {
          EXPECT_FALSE(neighbours[a].empty()) << name;
          for (int b : neighbours[a]) {
            EXPECT_NE(a, b) << name;
            EXPECT_TRUE(std::count(neighbours[b].begin(), neighbours[b].end(), a) == 1)
                << name << " " << a << "-" << b;
          }
        }
      }
}

// Why the executor batches: the same 1F1B lists with every transfer in a group of its own deadlock on
// in-order streams (stage 0 waits for a gradient that stage 1 queued behind a receive of an activation
// stage 0 queued behind that wait).
TEST(PipelineSchedule, OneTransferPerGroupDeadlocksOnInOrderStreams) {
  const auto shapes = shapes_of(2, 4, 1);
  EXPECT_TRUE(simulate_in_order_streams(lists_of(ScheduleKind::kOneFOneB, shapes), shapes,
                                        /*one_per_transfer=*/true)
                  .deadlocked);
}

TEST(PipelineSchedule, EndsOfTheModelNeitherReceiveNorSend) {
  const std::vector<PipeOp> first = build_schedule(ScheduleKind::kOneFOneB, {0, 4, 8, 1});
  const std::vector<PipeOp> last = build_schedule(ScheduleKind::kOneFOneB, {3, 4, 8, 1});
  for (const PipeOp& op : first)
    EXPECT_TRUE(op.action != Action::kRecvForward && op.action != Action::kSendBackward)
        << action_name(op.action);
  for (const PipeOp& op : last)
    EXPECT_TRUE(op.action != Action::kSendForward && op.action != Action::kRecvBackward)
        << action_name(op.action);
}

TEST(PipelineSchedule, TagsMatchAtBothEndsAndPeersWrapAroundForChunks) {
  const PipelineShape last{1, 2, 2, 2}, first{0, 2, 2, 2};
  // Stage 1 chunk 0 (virtual stage 1) sends to stage 0 chunk 1 (virtual stage 2).
  const PipeOp send{Action::kSendForward, 1, 0}, recv{Action::kRecvForward, 1, 1};
  EXPECT_EQ(peer_stage(send, last), 0);
  EXPECT_EQ(peer_stage(recv, first), 1);
  EXPECT_EQ(message_tag(send, last), message_tag(recv, first));
  EXPECT_NE(message_tag(send, last), message_tag({Action::kSendBackward, 1, 1}, first));
}

TEST(PipelineSchedule, RejectsShapesItCannotRun) {
  EXPECT_THROW(build_schedule(ScheduleKind::kInterleaved, {0, 4, 6, 2}), std::invalid_argument);  // m % p
  EXPECT_THROW(build_schedule(ScheduleKind::kOneFOneB, {0, 2, 4, 2}),
               std::invalid_argument);  // v without interleaved
  EXPECT_THROW(build_schedule(ScheduleKind::kInterleaved, {0, 1, 4, 2}), std::invalid_argument);  // one stage
}

}  // namespace
}  // namespace atl::parallel::pipeline

namespace atl::parallel::pipeline {
namespace {

TEST(StageLayout, VirtualStagesTakeContiguousRangesInVirtualStageOrder) {
  // 16 layers, p = 4, v = 2: virtual stage c * 4 + r holds two layers; rank 0 gets 0-1 and 8-9.
  const std::vector<LayerRange> ranges = virtual_stage_layers(16, 4, 2, {});
  ASSERT_EQ(ranges.size(), 8u);
  for (int vs = 0; vs < 8; ++vs) {
    EXPECT_EQ(ranges[vs].first, 2 * vs);
    EXPECT_EQ(ranges[vs].count(), 2);
  }
  const PipelineShape rank0{0, 4, 8, 2};
  EXPECT_EQ(ranges[rank0.virtual_stage(0)].first, 0);
  EXPECT_EQ(ranges[rank0.virtual_stage(1)].first, 8);
}

TEST(StageLayout, ExplicitCountsOverrideTheEvenSplit) {
  const std::vector<LayerRange> ranges = virtual_stage_layers(7, 2, 1, {3, 4});
  EXPECT_EQ(ranges[0].first, 0);
  EXPECT_EQ(ranges[0].end, 3);
  EXPECT_EQ(ranges[1].first, 3);
  EXPECT_EQ(ranges[1].end, 7);
  EXPECT_THROW(virtual_stage_layers(7, 2, 1, {}), std::invalid_argument);      // 7 over 2
  EXPECT_THROW(virtual_stage_layers(7, 2, 1, {3, 3}), std::invalid_argument);  // sums to 6
  EXPECT_THROW(virtual_stage_layers(7, 2, 1, {7}), std::invalid_argument);     // one entry for two
  EXPECT_THROW(virtual_stage_layers(7, 2, 1, {7, 0}), std::invalid_argument);  // an empty stage
  EXPECT_EQ(stage_layers_problem(8, 2, 2, {}), "");
}

}  // namespace
}  // namespace atl::parallel::pipeline
