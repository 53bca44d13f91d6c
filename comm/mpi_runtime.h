// MpiRuntime: owns MPI's lifetime in a process (init in the constructor, finalize in the
// destructor) and the process-wide MPI handles Atoll defines: reduction operators for the
// 16-bit float types, which MPI lacks. Create exactly one, in main(), and pass it down.
#pragma once

#include <mpi.h>

#include <ATen/core/ScalarType.h>

#include <memory>

#include "comm/communicator.h"

namespace atl::comm {

class MpiCommunicator;

class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  // The thread level MPI granted (MPI_THREAD_MULTIPLE is requested).
  int thread_level() const { return thread_level_; }

  // A communicator over MPI_COMM_WORLD, named "world".
  std::unique_ptr<MpiCommunicator> world() const;

  MPI_Datatype datatype(at::ScalarType type) const;
  MPI_Op reduce_op(at::ScalarType type, ReduceOp op) const;

 private:
  int thread_level_ = MPI_THREAD_SINGLE;
  MPI_Datatype half_type_ = MPI_DATATYPE_NULL;  // 2-byte opaque element for fp16 and bf16
  MPI_Op half_sum_ = MPI_OP_NULL, half_max_ = MPI_OP_NULL;
  MPI_Op bf16_sum_ = MPI_OP_NULL, bf16_max_ = MPI_OP_NULL;
};

}  // namespace atl::comm
