#include "runtime/fault_hooks.h"

#include <chrono>
#include <csignal>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace atl::runtime {
namespace {

constexpr const char* kForms =
    "nan_gradient@STEP[:RANK], skip_collective@RANK:STEP, corrupt_chunk@EXCHANGE:ISLAND, sigkill@STEP, "
    "sigkill_in_exchange@EXCHANGE or ignore_sigterm";

// "A:B" or "A" -> {A, B or fallback}.
std::pair<int64_t, int64_t> numbers(const std::string& entry, const std::string& text, int64_t fallback) {
  try {
    const size_t colon = text.find(':');
    if (colon == std::string::npos) return {std::stoll(text), fallback};
    return {std::stoll(text.substr(0, colon)), std::stoll(text.substr(colon + 1))};
  } catch (const std::exception&) {
    throw std::invalid_argument("ATOLL_FAULT: cannot read '" + entry + "'; use " + std::string(kForms));
  }
}

}  // namespace

FaultHooks FaultHooks::parse(const std::string& text) {
  FaultHooks hooks;
  std::istringstream list(text);
  for (std::string entry; std::getline(list, entry, ',');) {
    if (entry.empty()) continue;
    const size_t at = entry.find('@');
    const std::string kind = entry.substr(0, at), args = at == std::string::npos ? "" : entry.substr(at + 1);
    if (kind == "nan_gradient") {
      const auto [step, rank] = numbers(entry, args, 0);
      hooks.nan_gradient_step = step;
      hooks.nan_gradient_rank = static_cast<int>(rank);
    } else if (kind == "skip_collective") {
      const auto [rank, step] = numbers(entry, args, -1);
      hooks.skip_collective_rank = static_cast<int>(rank);
      hooks.skip_collective_step = step;
    } else if (kind == "corrupt_chunk") {
      const auto [exchange, island] = numbers(entry, args, 0);
      hooks.corrupt_chunk_exchange = exchange;
      hooks.corrupt_chunk_island = static_cast<int>(island);
    } else if (kind == "sigkill") {
      hooks.sigkill_step = numbers(entry, args, 0).first;
    } else if (kind == "sigkill_in_exchange") {
      hooks.sigkill_exchange = numbers(entry, args, 0).first;
    } else if (entry == "ignore_sigterm") {
      hooks.ignore_sigterm = true;
    } else {
      throw std::invalid_argument("ATOLL_FAULT: unknown hook '" + entry + "'; use " + std::string(kForms));
    }
  }
  return hooks;
}

void FaultHooks::act_before_step(int64_t step, int rank) const {
  if (skip_collective(step, rank)) {
    std::cerr << "atoll: fault hook: rank " << rank << " skips the collectives of step " << step << std::endl;
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (step == sigkill_step) {
    std::cerr << "atoll: fault hook: rank " << rank << " dies (SIGKILL) at step " << step << std::endl;
    std::raise(SIGKILL);
  }
}

}  // namespace atl::runtime
