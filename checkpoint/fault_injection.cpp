#include "checkpoint/fault_injection.h"

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <stdexcept>

namespace atl::checkpoint {

std::optional<FaultPoint> parse_fault_point(const std::string& value) {
  if (value.empty()) return std::nullopt;
  std::smatch m;
  if (!std::regex_match(value, m, std::regex("(copy|write|manifest|latest):([0-9]+)(?::([0-9]+))?")))
    throw std::invalid_argument("ATOLL_CHECKPOINT_FAULT = '" + value +
                                "' is not PHASE:STEP[:RANK] with PHASE copy, write, manifest or latest");
  return FaultPoint{m[1].str(), std::stoll(m[2].str()), m[3].matched ? std::stoi(m[3].str()) : 0};
}

void die_if_fault(const std::optional<FaultPoint>& fault, const char* phase, int64_t step, int rank) {
  if (!fault || fault->phase != phase || fault->step != step || fault->rank != rank) return;
  std::fprintf(stderr, "atoll: ATOLL_CHECKPOINT_FAULT: rank %d dies saving step %lld (%s)\n", rank,
               static_cast<long long>(step), phase);
  std::fflush(stderr);
  std::_Exit(86);
}

}  // namespace atl::checkpoint
