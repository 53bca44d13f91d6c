// `atoll --version`: what a bug report needs -- Atoll's version and git description, and the
// libraries this binary was built with (LibTorch, CUDA, NCCL, protobuf, SentencePiece) and runs with
// (the MPI library, NCCL's and the CUDA runtime's own version calls, the CUDA driver). Compiled
// alone and without the torch header (launcher/CMakeLists.txt): it is rebuilt at every commit.
#include <mpi.h>

#include <iostream>
#include <string>

#include "atoll/build_config.h"
#include "atoll/git_description.h"
#include "launcher/commands.h"

#if ATOLL_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace atl::launcher {
namespace {

// "Open MPI v4.1.4, package: ..., ident: ..." -> "Open MPI v4.1.4" (callable before MPI_Init).
std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown";
  const std::string full(text, static_cast<size_t>(length));
  return full.substr(0, full.find_first_of(",\n"));
}

#if ATOLL_CUDA
// 13000 -> "13.0" (CUDA's encoding: 1000 * major + 10 * minor).
std::string cuda_version(int encoded) {
  return std::to_string(encoded / 1000) + "." + std::to_string(encoded % 1000 / 10);
}

std::string cuda_line() {
  int runtime = 0, driver = 0;
  const bool have_runtime = cudaRuntimeGetVersion(&runtime) == cudaSuccess;
  const bool have_driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0;
  return std::string("CUDA ") + ATOLL_TORCH_CUDA + " (LibTorch's), runtime " +
         (have_runtime ? cuda_version(runtime) : "unknown") + ", driver " +
         (have_driver ? cuda_version(driver) : "none (no GPU driver on this machine)");
}

// NCCL's encoding since 2.9: 10000 * major + 100 * minor + patch.
std::string nccl_line() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return "NCCL unknown";
  return "NCCL " + std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) + "." +
         std::to_string(version % 100) + " (headers " + ATOLL_NCCL_HEADERS + ")";
}
#endif

}  // namespace

int version_command() {
  std::cout << "atoll " << ATOLL_VERSION << " (git " << ATOLL_GIT_DESCRIPTION << ")\n"
            << "LibTorch " << ATOLL_TORCH_VERSION << "\n";
#if ATOLL_CUDA
  std::cout << cuda_line() << "\n" << nccl_line() << "\n";
#else
  std::cout << "CUDA: built without CUDA\nNCCL: built without CUDA\n";
#endif
  std::cout << "MPI: " << mpi_library() << "\n"
            << "protobuf " << ATOLL_PROTOBUF_VERSION << "\n"
            << "SentencePiece " << ATOLL_SENTENCEPIECE_VERSION << "\n";
  return 0;
}

}  // namespace atl::launcher
