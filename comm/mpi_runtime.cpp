#include "comm/mpi_runtime.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"

namespace atl::comm {
namespace {

// MPI user reductions for 16-bit floats: widen to float, combine, round back (round-to-nearest,
// as the c10 conversions do), element by element.
template <typename T>
void sum_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = T(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}

template <typename T>
void max_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = T(std::max(static_cast<float>(a[i]), static_cast<float>(b[i])));
}

}  // namespace

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int initialized = 0;
  MPI_CHECK(MPI_Initialized(&initialized));
  if (initialized)
    throw std::logic_error("MpiRuntime: MPI is already initialised; create one MpiRuntime per process");
  // Open MPI's non-blocking all-reduce (libnbc) picks recursive doubling by default, which runs at
  // 0.5-0.65x the blocking collective's bandwidth for 1-64 MiB on shared memory; its ring
  // algorithm matches it (bench/bench_allreduce). A user's own setting wins.
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &thread_level_));
  // Errors come back as codes and become exceptions through MPI_CHECK, instead of aborting silently.
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &half_type_));
  MPI_CHECK(MPI_Type_commit(&half_type_));
  MPI_CHECK(MPI_Op_create(&sum_16bit<c10::Half>, /*commute=*/1, &half_sum_));
  MPI_CHECK(MPI_Op_create(&max_16bit<c10::Half>, 1, &half_max_));
  MPI_CHECK(MPI_Op_create(&sum_16bit<c10::BFloat16>, 1, &bf16_sum_));
  MPI_CHECK(MPI_Op_create(&max_16bit<c10::BFloat16>, 1, &bf16_max_));
}

MpiRuntime::~MpiRuntime() {
  MPI_Op_free(&half_sum_);
  MPI_Op_free(&half_max_);
  MPI_Op_free(&bf16_sum_);
  MPI_Op_free(&bf16_max_);
  MPI_Type_free(&half_type_);
  MPI_Finalize();
}

std::unique_ptr<MpiCommunicator> MpiRuntime::world() const {
  MPI_Comm dup;
  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  return std::make_unique<MpiCommunicator>(*this, dup, "world");
}

MPI_Datatype MpiRuntime::datatype(at::ScalarType type) const {
  switch (type) {
    case at::kFloat:
      return MPI_FLOAT;
    case at::kDouble:
      return MPI_DOUBLE;
    case at::kInt:
      return MPI_INT32_T;
    case at::kLong:
      return MPI_INT64_T;
    case at::kByte:
      return MPI_UINT8_T;
    case at::kChar:
      return MPI_INT8_T;
    case at::kBool:
      return MPI_C_BOOL;
    case at::kHalf:
    case at::kBFloat16:
      return half_type_;
    default:
      throw std::invalid_argument(std::string("MPI backend: unsupported dtype ") + at::toString(type));
  }
}

MPI_Op MpiRuntime::reduce_op(at::ScalarType type, ReduceOp op) const {
  const bool max = op == ReduceOp::kMax;  // kAvg reduces with a sum, then divides
  if (type == at::kHalf) return max ? half_max_ : half_sum_;
  if (type == at::kBFloat16) return max ? bf16_max_ : bf16_sum_;
  if (type == at::kBool) return MPI_LOR;  // sum and max of flags are both "any"
  return max ? MPI_MAX : MPI_SUM;
}

}  // namespace atl::comm
