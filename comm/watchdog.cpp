#include "comm/watchdog.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "comm/device_backend.h"
#include "comm/flight_recorder.h"
#include "comm/hang_report.h"
#include "comm/mpi_communicator.h"

namespace atl::comm {
namespace {

constexpr int kNoticeTag = 1;   // "a rank saw a hang": one int, the sender's rank
constexpr int kSummaryTag = 2;  // a RankFlightSummary, encoded

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void say(const std::string& line) {
  std::cerr << "atoll: watchdog: " << line << std::endl;
}

}  // namespace

Watchdog::Watchdog(const MpiCommunicator& world, const FlightRecorder& recorder, WatchdogOptions options)
    : recorder_(recorder), options_(std::move(options)), channel_(world.duplicate("watchdog")) {
  thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    const std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_ = true;
  }
  stop_signal_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::watch(const std::vector<DeviceBackend*>& backends) {
  const std::lock_guard<std::mutex> lock(backends_mutex_);
  backends_.insert(backends_.end(), backends.begin(), backends.end());
}

std::string Watchdog::poll_backends() {
  const std::lock_guard<std::mutex> lock(backends_mutex_);
  for (DeviceBackend* backend : backends_)
    if (std::string error = backend->poll(); !error.empty()) return error;
  return "";
}

void Watchdog::watch() {
  const MPI_Comm comm = channel_->handle();
  const double poll_s = std::clamp(options_.timeout_s / 20.0, 0.01, 1.0);
  int notice_from = -1;
  MPI_Request notice;
  MPI_Irecv(&notice_from, 1, MPI_INT, MPI_ANY_SOURCE, kNoticeTag, comm, &notice);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(stop_mutex_);
      if (stop_signal_.wait_for(lock, std::chrono::duration<double>(poll_s), [this] { return stop_; })) break;
    }
    // Device operations complete out of the host's sight: close their records before judging.
    if (const std::string error = poll_backends(); !error.empty()) abort_job(error, Clock::now(), true);
    if (const std::optional<FlightRecord> oldest = recorder_.oldest_in_flight()) {
      const double waited = recorder_.now_s() - oldest->start_s;
      if (waited > options_.timeout_s) {
        char line[512];
        std::snprintf(line, sizeof line, "%s #%llu on %s has waited %.1f s, more than comm.timeout_s = %g",
                      op_name(oldest->op), static_cast<unsigned long long>(oldest->seq),
                      oldest->group.c_str(), waited, options_.timeout_s);
        abort_job(line, Clock::now(), true);
      }
    }
    int heard = 0;
    MPI_Test(&notice, &heard, MPI_STATUS_IGNORE);
    if (heard)
      abort_job("rank " + std::to_string(notice_from) + " saw a collective exceed comm.timeout_s",
                Clock::now(), false);
  }
  MPI_Cancel(&notice);
  MPI_Wait(&notice, MPI_STATUS_IGNORE);
}

void Watchdog::abort_job(const std::string& reason, Clock::time_point detected, bool tell_others) {
  const MPI_Comm comm = channel_->handle();
  const int me = channel_->rank(), size = channel_->size();
  // Tell everyone first, so that their exit timers start now; the sends complete (or not) while we
  // gather: never block on them.
  std::vector<MPI_Request> sends(static_cast<size_t>(size), MPI_REQUEST_NULL);
  if (tell_others)
    for (int r = 0; r < size; ++r)
      if (r != me) MPI_Isend(&me, 1, MPI_INT, r, kNoticeTag, comm, &sends[static_cast<size_t>(r)]);
  // Then the dump, locally: it survives whatever the network and the device do next.
  std::error_code ignored;
  std::filesystem::create_directories(options_.flight_dir, ignored);
  const std::string dump = options_.flight_dir + "/rank-" + std::to_string(me) + ".json";
  std::ofstream(dump) << recorder_.to_json(me, reason);
  const std::string summary = encode(summarize(me, recorder_));
  // No kernel of this rank may stay stuck waiting for a peer that is gone: abort the device
  // backends, on a thread of their own, since an abort can itself block (a kernel still spinning
  // on another communicator); the deadlines below end the process whether or not it returns.
  std::thread([this] {
    const std::lock_guard<std::mutex> lock(backends_mutex_);
    for (DeviceBackend* backend : backends_) backend->abort();
  }).detach();

  if (me != 0) {
    MPI_Request sent;
    MPI_Isend(summary.data(), static_cast<int>(summary.size()), MPI_CHAR, 0, kSummaryTag, comm, &sent);
    // Rank 0 aborts everyone; if it cannot, leave on our own before twice the timeout.
    while (since(detected) < 0.75 * options_.timeout_s) {
      int done = 0;
      MPI_Test(&sent, &done, MPI_STATUS_IGNORE);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    say("rank " + std::to_string(me) + " exits: " + reason + " (flight records in " + dump + ")");
    std::_Exit(options_.exit_code);
  }

  std::vector<RankFlightSummary> ranks(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) ranks[static_cast<size_t>(r)].rank = r;
  ranks[0] = decode(summary);
  int heard = 1;
  while (heard < size && since(detected) < 0.4 * options_.timeout_s) {
    int waiting = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kSummaryTag, comm, &waiting, &status);
    if (!waiting) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    std::string text(static_cast<size_t>(length), '\0');
    MPI_Recv(text.data(), length, MPI_CHAR, status.MPI_SOURCE, kSummaryTag, comm, MPI_STATUS_IGNORE);
    RankFlightSummary& slot = ranks[static_cast<size_t>(status.MPI_SOURCE)];
    if (!slot.answered) ++heard;
    slot = decode(text);
    slot.rank = status.MPI_SOURCE;  // the sender, even when its message did not read
  }
  say(reason);
  for (const std::string& line : diagnose_hang(ranks, options_.timeout_s)) say(line);
  say("flight records of every rank in " + options_.flight_dir + "/; aborting the job");
  MPI_Abort(MPI_COMM_WORLD, options_.exit_code);
  std::_Exit(options_.exit_code);
}

}  // namespace atl::comm
