// This machine's name as its ranks report it in start-up messages ("node-a"), "localhost" when it
// has none.
#pragma once

#include <string>

namespace atl::runtime {

std::string host_name();

}  // namespace atl::runtime
