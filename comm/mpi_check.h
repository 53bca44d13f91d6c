// MPI_CHECK: turns an MPI error code into an exception naming the call and MPI's own message.
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>

namespace atl::comm {

inline void mpi_check(int code, const char* call, const char* file, int line) {
  if (code == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, message, &length);
  throw std::runtime_error(std::string("MPI error in ") + call + " at " + file + ":" + std::to_string(line) +
                           ": " + std::string(message, length));
}

}  // namespace atl::comm

#define MPI_CHECK(call) ::atl::comm::mpi_check((call), #call, __FILE__, __LINE__)
