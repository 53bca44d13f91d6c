// What a rank sends rank 0 when the watchdog fires (its flight recorder's summary, as text) and rank
// 0's diagnosis of the summaries. A summary that does not decode is reported as unreadable, so a
// damaged message never takes down the rank that is diagnosing the hang.
#include "comm/hang_report.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  atl::fuzz::expect_clean(
      [&] {
        const atl::comm::RankFlightSummary summary = atl::comm::decode(text);
        atl::comm::diagnose_hang({summary}, 60.0);
        atl::comm::decode(atl::comm::encode(summary));
      },
      {atl::fuzz::Rejection::kRuntimeError});
  return 0;
}
