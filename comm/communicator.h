// The Communicator interface: collective and point-to-point operations on one group of ranks.
//
// Every operation is asynchronous and returns a Work handle; call wait() before touching the
// tensors again. Tensors are reduced in place where the operation allows it and must be
// contiguous (no hidden copies on the hot path). Two backends implement it: MPI (CPU tensors,
// control, always present) and NCCL (CUDA tensors, when built with -DATOLL_WITH_CUDA); a mesh group
// holds both and routes each operation by its tensors' device (two_plane_communicator.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace atl::comm {

// An operation of a group over TCP (Gloo) failed: a member is gone (its connections closed) or timed out.
// The group is unusable afterwards; the islands meet again and build a new one.
class GroupFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class FlightRecorder;

enum class ReduceOp { kSum, kAvg, kMax };

// A handle to an operation in flight.
class Work {
 public:
  virtual ~Work() = default;
  // Makes the result visible to what the caller does next: on the CPU (MPI) blocks until the
  // operation is complete; on a device (NCCL) makes the current stream wait for it, without blocking
  // the host, so kernels queued next see the result.
  virtual void wait() = 0;
  // Blocks the host until the operation is complete (the host is about to read the result itself).
  virtual void synchronize() { wait(); }
  // Non-blocking completion check; also drives progress of the backend (MPI progresses
  // non-blocking collectives only inside MPI calls, so polling it during backward matters).
  virtual bool test() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

// A Work that is already complete (zero-sized operations, world size 1).
class CompletedWork final : public Work {
 public:
  void wait() override {}
  bool test() override { return true; }
};

// One leg of a batched point-to-point exchange.
struct P2POp {
  enum class Kind { kSend, kRecv };
  Kind kind;
  at::Tensor tensor;
  int peer;  // rank inside the communicator
  int tag = 0;
};

// The slice of a flat tensor of `numel` elements that rank `rank` of `size` owns in reduce-scatter
// and all-gather: an even split where the first numel % size ranks hold one element more.
struct ShardRange {
  int64_t offset;
  int64_t numel;
};
ShardRange shard_range(int64_t numel, int size, int rank);

enum class OpKind { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kSend, kRecv, kBarrier, kCount };
const char* op_name(OpKind op);

// Bytes this rank puts on the wire per operation kind, under the bandwidth-optimal (ring)
// algorithm costs that nccl-tests use for bus bandwidth: all-reduce 2(p-1)/p * n, reduce-scatter
// and all-gather (p-1)/p * n (n = the full tensor), broadcast (p-1)/p * n, send n, recv 0.
// Wire bytes of one rank for a ring algorithm that moves the n-byte tensor `passes` times.
inline uint64_t ring_wire_bytes(uint64_t nbytes, int size, int passes) {
  return nbytes * static_cast<uint64_t>(passes) * static_cast<uint64_t>(size - 1) /
         static_cast<uint64_t>(size);
}

class ByteCounters {
 public:
  void add(OpKind op, uint64_t bytes) {
    bytes_[static_cast<size_t>(op)].fetch_add(bytes, std::memory_order_relaxed);
    calls_[static_cast<size_t>(op)].fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t bytes(OpKind op) const { return bytes_[static_cast<size_t>(op)].load(std::memory_order_relaxed); }
  uint64_t calls(OpKind op) const { return calls_[static_cast<size_t>(op)].load(std::memory_order_relaxed); }
  uint64_t total_bytes() const;

  // Time callers spent blocked waiting for this group's operations: the communication that was not
  // hidden behind computation.
  void add_wait(uint64_t nanoseconds) { wait_ns_.fetch_add(nanoseconds, std::memory_order_relaxed); }
  double wait_seconds() const { return static_cast<double>(wait_ns_.load(std::memory_order_relaxed)) * 1e-9; }

 private:
  static constexpr size_t kOps = static_cast<size_t>(OpKind::kCount);
  std::array<std::atomic<uint64_t>, kOps> bytes_{};
  std::array<std::atomic<uint64_t>, kOps> calls_{};
  std::atomic<uint64_t> wait_ns_{0};
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The group's name ("world", "dp", "tp", ...), used in logs and byte accounting.
  virtual const std::string& name() const = 0;

  // In place: every rank ends with the reduction of all ranks' `tensor`.
  virtual WorkPtr all_reduce(const at::Tensor& tensor, ReduceOp op) = 0;
  // `input` holds the full tensor on every rank; `output` receives this rank's shard_range of the
  // reduction (its numel must equal shard_range(input.numel(), size(), rank()).numel).
  virtual WorkPtr reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) = 0;
  // `input` is this rank's shard_range of `output`; every rank ends with the full `output`. In
  // place when `input` is a view of exactly that slice of `output`.
  virtual WorkPtr all_gather(const at::Tensor& input, const at::Tensor& output) = 0;
  virtual WorkPtr broadcast(const at::Tensor& tensor, int root) = 0;
  // Single-leg point-to-point: a batch_p2p of one operation.
  WorkPtr send(const at::Tensor& tensor, int peer, int tag = 0);
  WorkPtr recv(const at::Tensor& tensor, int peer, int tag = 0);
  // Starts every send and receive together (no ordering deadlocks between pipeline neighbours).
  virtual WorkPtr batch_p2p(const std::vector<P2POp>& ops) = 0;
  virtual void barrier() = 0;
  // Sets up the point-to-point connections with `peers` (each once) now; every rank of a pair names
  // the other and calls this at the same point. NCCL connects a pair lazily, inside the first batch that uses
  // it, and that batch holds its host until the peer's first batch on the pair arrives: a batch that
  // also carries data the peer needs before it gets there deadlocks (a pipeline stage's first
  // backward receive, posted with its last forward send). Nothing to do where matching needs no set-up.
  virtual void connect_peers(const std::vector<int>& /*peers*/) {}
  // While the returned handle lives, non-blocking operations keep progressing although this thread
  // computes instead of calling the communicator (a helper thread for MPI; null where the backend
  // progresses by itself, as NCCL on its stream does).
  virtual std::shared_ptr<void> progress_in_background() { return nullptr; }

  const ByteCounters& bytes() const { return *counting_; }
  // Counts this communicator's bytes and waits in `counters` from now on (which must outlive it): a
  // two-plane group counts both its planes as one group.
  void count_into(ByteCounters& counters) { counting_ = &counters; }

  // Records every operation on this group (of more than one rank) in `recorder`, which must outlive
  // the communicator; null stops recording.
  virtual void record_in(FlightRecorder* recorder) { recorder_ = recorder; }
  // The group's name and its members' world ranks, e.g. "dp[0,2]": how flight records name groups.
  const std::string& label() const { return label_.empty() ? name() : label_; }

 protected:
  // A flight record of an operation starting now (0 when not recording); the closer of
  // record_closer() ends it when the operation completes.
  // Point-to-point batches are counted apart from collectives (group "<label> p2p"): their counts
  // differ between ranks by design, so only collective counts tell who is behind.
  uint64_t record_start(OpKind op, uint64_t bytes, bool point_to_point = false);
  // Ends `record` when called (empty for record 0). The recorder must outlive the closer.
  std::function<void()> record_closer(uint64_t record) const;
  FlightRecorder* recorder() const { return recorder_; }
  ByteCounters& counters() { return *counting_; }

  std::string label_;  // set by backends that know their members' world ranks

 private:
  FlightRecorder* recorder_ = nullptr;
  ByteCounters own_counters_;
  ByteCounters* counting_ = &own_counters_;
};

// Throws std::invalid_argument naming the operation if `tensor` cannot be handed to a backend.
void check_contiguous(const at::Tensor& tensor, const char* op);

// For backends that sum and then divide: the division turning a sum of `size` members into kAvg's
// average (integer tensors truncate), or nothing for another op or a group of one.
std::function<void()> average_finisher(const at::Tensor& tensor, ReduceOp op, int size);

// One number from every member of `group`, in rank order (a few bytes).
std::vector<double> all_gather_value(Communicator& group, double value);
// Throws std::invalid_argument naming the operation unless `shard` (contiguous, like `full`) has
// the dtype of `full` and the size of this rank's shard_range of it.
void check_shard(const char* op, const at::Tensor& full, const at::Tensor& shard, int size, int rank);

}  // namespace atl::comm
