// `atoll plan`'s data lines: what the run would read of each training dataset (shards, tokens,
// weight, epochs at train.steps), from the shards' headers alone -- no token is read, so it is quick
// on any corpus. Where the data is not on this machine, one line says why instead.
#pragma once

#include <string>

#include "runtime/config/config.h"

namespace atl::launcher {

std::string format_data_plan(const runtime::Config& config);

}  // namespace atl::launcher
