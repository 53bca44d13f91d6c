// Encoding speed of a tokenizer (data.tokenizer's value: Llama 3's tokenizer.model, a SentencePiece
// model, bytes) on one thread: the best of REPEATS encodings of TEXT. Prints one line,
//   atoll: TOKENS tokens, BYTES bytes, best SECONDS s, RATE tokens/s
// which bench/bench_tokenizer.py sets beside tiktoken's figure on the same text.
//   build/bin/bench_tokenizer MODEL TEXT [REPEATS=5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "runtime/tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: bench_tokenizer MODEL TEXT [REPEATS=5]\n";
    return 2;
  }
  const auto tokenizer = atl::runtime::load_tokenizer(argv[1]);
  std::ifstream in(argv[2], std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const int repeats = argc > 3 ? std::stoi(argv[3]) : 5;
  double best = 1e30;
  size_t tokens = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    tokens = tokenizer->encode(text).size();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("atoll: %zu tokens, %zu bytes, best %.4f s, %.0f tokens/s\n", tokens, text.size(), best,
              static_cast<double>(tokens) / best);
  return 0;
}
