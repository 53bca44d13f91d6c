#include "runtime/startup.h"

#include <exception>

#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"
#include "runtime/config/config.h"

namespace atl::runtime {

PeerFailure::PeerFailure(int failed_rank)
    : std::runtime_error("rank " + std::to_string(failed_rank) + " failed its start-up checks"),
      failed_rank_(failed_rank) {}

StartupError::StartupError(const std::string& message) : std::runtime_error(message) {}

void agree_on_startup(const comm::MpiCommunicator& world, const std::function<void()>& local_checks) {
  std::exception_ptr local_error;
  try {
    local_checks();
  } catch (...) {
    local_error = std::current_exception();
  }
  int first_failed = local_error ? world.rank() : world.size();
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, world.handle()));
  if (first_failed == world.size()) return;
  if (first_failed != world.rank()) throw PeerFailure(first_failed);
  try {
    std::rethrow_exception(local_error);
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw StartupError(e.what());  // data and initial-weight problems: the user's to fix
  }
}

}  // namespace atl::runtime
