// A fuzz target without libFuzzer: feeds every file of the given files and directories to
// LLVMFuzzerTestOneInput once, so the ordinary build's test suite replays each target's seed corpus
// and the inputs of every finding fixed (regressions/) on every run. A finding aborts, as under
// libFuzzer. As libFuzzer's -malloc_limit_mb does in run.sh, the heap may grow by 512 MiB at most
// (RLIMIT_DATA), so a reader that allocates what a damaged length claims fails here too (bad_alloc
// is a finding). Exit 2 when an argument names nothing readable, so a missing corpus cannot pass.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <sys/resource.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

constexpr uint64_t kHeapGrowthLimit = uint64_t{512} << 20;

// The process's data segment now (VmData: heap and private anonymous mappings, what RLIMIT_DATA
// counts), in bytes; 0 if /proc does not say.
uint64_t data_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmData:", 0) == 0) return std::stoull(line.substr(7)) * 1024;  // "VmData: N kB"
  return 0;
}

void limit_heap_growth() {
  const uint64_t now = data_bytes();
  if (now == 0) return;
  const rlimit limit{now + kHeapGrowthLimit, now + kHeapGrowthLimit};
  if (setrlimit(RLIMIT_DATA, &limit) != 0) std::perror("replay: setrlimit(RLIMIT_DATA)");
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::error_code error;
    if (fs::is_directory(argv[i], error)) {
      for (const auto& entry : fs::directory_iterator(argv[i]))
        if (entry.is_regular_file()) inputs.push_back(entry.path());
    } else if (fs::is_regular_file(argv[i], error)) {
      inputs.emplace_back(argv[i]);
    } else {
      std::fprintf(stderr, "replay: %s is neither a file nor a directory\n", argv[i]);
      return 2;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no input in the arguments; pass corpus directories or files\n");
    return 2;
  }
  std::sort(inputs.begin(), inputs.end());
  limit_heap_growth();
  for (const fs::path& input : inputs) {
    std::ifstream in(input, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s\n", input.c_str());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replay: %zu inputs, every one read or rejected cleanly\n", inputs.size());
  return 0;
}
