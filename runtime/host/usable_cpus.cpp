#include "runtime/host/usable_cpus.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "runtime/host/cpu_cores.h"
#include "runtime/host/cpu_quota.h"

namespace atl::runtime {

std::vector<int> usable_cpu_ids() {
  std::vector<int> ids;
  // A cpu_set_t holds 1024 CPUs; a machine with more needs a larger set, so grow it until the kernel
  // takes it (EINVAL: too small).
  for (int capacity = CPU_SETSIZE; capacity <= (1 << 20); capacity *= 2) {
    cpu_set_t* set = CPU_ALLOC(capacity);
    if (!set) break;
    const size_t bytes = CPU_ALLOC_SIZE(capacity);
    CPU_ZERO_S(bytes, set);
    const bool read = sched_getaffinity(0, bytes, set) == 0;
    const int error = read ? 0 : errno;
    if (read)
      for (int cpu = 0; cpu < capacity; ++cpu)
        if (CPU_ISSET_S(cpu, bytes, set)) ids.push_back(cpu);
    CPU_FREE(set);
    if (read || error != EINVAL) break;
  }
  if (ids.empty()) {
    const int machine = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int cpu = 0; cpu < machine; ++cpu) ids.push_back(cpu);
  }
  return ids;
}

int usable_cpus() {
  return cpus_within(static_cast<int>(usable_cpu_ids().size()), process_cpu_limit());
}

int usable_cores() {
  return cpus_within(physical_cores(usable_cpu_ids()), process_cpu_limit());
}

}  // namespace atl::runtime
