// Access to the process's MpiRuntime from multi-rank tests (set once by mpi_test_main.cpp before
// any test runs; tests only read it).
#pragma once

#include "comm/mpi_runtime.h"

namespace atl::test {

class MpiTestEnv {
 public:
  static void set_runtime(const comm::MpiRuntime* runtime) { runtime_ = runtime; }
  static const comm::MpiRuntime& runtime() { return *runtime_; }

 private:
  static inline const comm::MpiRuntime* runtime_ = nullptr;
};

}  // namespace atl::test
