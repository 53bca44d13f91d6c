// Test tool for tests/interop/tiktoken_check.py: Atoll's ids for a set of documents, under the
// tokenizer load_tokenizer reads from MODEL and then rebuilt from its serialized form (what a
// checkpoint carries), so both readers are checked. Each document must decode back to itself and
// its tokens' byte lengths sum to its size; else the tool says which document and fails.
// usage: atoll_tokenize MODEL DOCS IDS
//   DOCS: per document, its byte length (uint32, little-endian) and its bytes;
//   IDS (written): per document, its token count (uint32; kRefused if Atoll refused the text)
//   and its ids (uint32 each).
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>

#include "runtime/tokenizer/tokenizer.h"

namespace {

constexpr uint32_t kRefused = 0xFFFFFFFF;

void put(std::ofstream& out, uint32_t value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof value);
}

}  // namespace

int tokenize(char** argv) {
  const auto loaded = atl::runtime::load_tokenizer(argv[1]);
  const auto tokenizer = atl::runtime::tokenizer_from_serialized(loaded->serialized());
  if (tokenizer->description() != loaded->description()) {
    std::cerr << "serialized tokenizer differs: " << tokenizer->description() << "\n";
    return 1;
  }
  std::ifstream in(argv[2], std::ios::binary);
  const std::string docs{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::ofstream out(argv[3], std::ios::binary);
  size_t document = 0;
  for (size_t at = 0; at + 4 <= docs.size(); ++document) {
    uint32_t length = 0;
    docs.copy(reinterpret_cast<char*>(&length), sizeof length, at);
    const std::string text = docs.substr(at + 4, length);
    at += 4 + length;
    std::vector<uint32_t> ids;
    try {
      ids = tokenizer->encode(text);
    } catch (const std::invalid_argument& e) {
      std::cout << "document " << document << " refused: " << e.what() << "\n";
      put(out, kRefused);
      continue;
    }
    if (tokenizer->decode(ids) != text) {
      std::cerr << "document " << document << " does not decode back to itself\n";
      return 1;
    }
    size_t bytes = 0;
    for (uint32_t id : ids) bytes += static_cast<size_t>(tokenizer->byte_length(id));
    if (bytes != text.size()) {
      std::cerr << "document " << document << ": byte lengths sum to " << bytes << ", not " << text.size()
                << "\n";
      return 1;
    }
    put(out, static_cast<uint32_t>(ids.size()));
    out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 4));
  }
  std::cout << tokenizer->description() << ": " << document << " documents, bos " << tokenizer->bos_id()
            << ", eos " << tokenizer->eos_id() << ", vocab " << tokenizer->vocab_size() << "\n";
  return out ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: atoll_tokenize MODEL DOCS IDS\n";
    return 2;
  }
  try {
    return tokenize(argv);
  } catch (const std::exception& e) {
    std::cerr << "atoll_tokenize: " << e.what() << "\n";
    return 1;
  }
}
