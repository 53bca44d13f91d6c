// Test tool for tests/interop/megatron_check.py: what Atoll reads from a shard, as text -- its token
// count, where its documents start (the shard's own record, or "none"), then every token.
// usage: atoll_read_shard SHARD OUT
#include <fstream>
#include <iostream>
#include <vector>

#include "runtime/data/shard.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: atoll_read_shard SHARD OUT\n";
    return 2;
  }
  try {
    const auto shard = atl::runtime::open_shard(argv[1]);
    std::vector<int64_t> tokens(static_cast<size_t>(shard->size()));
    shard->read(0, shard->size(), tokens.data());
    std::ofstream out(argv[2]);
    out << "tokens " << shard->size() << "\nstarts";
    if (const auto starts = shard->document_starts(0, shard->size()))
      for (int64_t s : *starts) out << ' ' << s;
    else
      out << " none";
    out << "\nmax " << shard->max_token() << "\n";
    for (int64_t t : tokens) out << t << '\n';
    return out ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
}
