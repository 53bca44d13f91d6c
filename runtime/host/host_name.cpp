#include "runtime/host/host_name.h"

#include <unistd.h>

namespace atl::runtime {

std::string host_name() {
  char name[256] = {};
  const bool named = gethostname(name, sizeof name - 1) == 0 && name[0] != '\0';
  return named ? name : "localhost";
}

}  // namespace atl::runtime
