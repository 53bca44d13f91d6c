#include "tests/fuzz/fuzz_input.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <typeinfo>

#include "checkpoint/remove_tree.h"
#include "runtime/config/config.h"

namespace atl::fuzz {
namespace fs = std::filesystem;
namespace {

bool safe_name(const std::string& name) {
  if (name.empty() || name.front() == '/' || name.back() == '/') return false;
  for (char c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '-' || c == '/';
    if (!plain) return false;
  }
  for (const auto& part : fs::path(name))
    if (part.empty() || part == "." || part == "..") return false;
  return name.find("//") == std::string::npos;
}

bool one_line(const std::string& message) {
  return !message.empty() && message.find('\n') == std::string::npos;
}

[[noreturn]] void finding(const char* kind, const std::string& what) {
  std::fprintf(stderr, "fuzz: the reader ended with %s: %s\n", kind, what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace

ScratchDir::ScratchDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/atoll-fuzz-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) finding("no scratch directory", pattern);
  path_ = pattern;
}

// remove_tree, not fs::remove_all: see checkpoint/remove_tree.h.
ScratchDir::~ScratchDir() {
  try {
    checkpoint::remove_tree(path_.string());
  } catch (const std::exception&) {  // a scratch directory left behind is no finding
  }
}

void ScratchDir::clear() const {
  for (const auto& entry : fs::directory_iterator(path_)) checkpoint::remove_tree(entry.path().string());
}

std::string ScratchDir::write(const std::string& name, std::string_view bytes) const {
  const fs::path file = path_ / name;
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return file.string();
}

std::string ScratchDir::hold(const std::string& name, const uint8_t* data, size_t size) const {
  clear();
  return write(name, {reinterpret_cast<const char*>(data), size});
}

std::string ScratchDir::hold_files(const uint8_t* data, size_t size) const {
  clear();
  for (const NamedFile& file : split_files(data, size)) write(file.name, file.bytes);
  return path_.string();
}

std::vector<NamedFile> split_files(const uint8_t* data, size_t size) {
  std::vector<NamedFile> files;
  size_t at = 0;
  while (at < size) {
    const size_t name_length = data[at++];
    if (name_length > size - at) break;
    std::string name(reinterpret_cast<const char*>(data + at), name_length);
    at += name_length;
    if (size - at < 4) break;
    size_t length = 0;
    for (int i = 3; i >= 0; --i) length = length << 8 | data[at + i];
    at += 4;
    length = std::min(length, size - at);
    std::string bytes(reinterpret_cast<const char*>(data + at), length);
    at += length;
    if (!safe_name(name)) continue;
    std::erase_if(files, [&](const NamedFile& f) { return f.name == name; });
    files.push_back({std::move(name), std::move(bytes)});
  }
  return files;
}

std::string join_files(const std::vector<NamedFile>& files) {
  std::string out;
  for (const NamedFile& f : files) {
    out += static_cast<char>(f.name.size());
    out += f.name;
    for (int i = 0; i < 4; ++i) out += static_cast<char>((f.bytes.size() >> (8 * i)) & 0xff);
    out += f.bytes;
  }
  return out;
}

void expect_clean(const std::function<void()>& read, std::vector<Rejection> allowed) {
  const auto allows = [&](Rejection r) {
    for (Rejection a : allowed)
      if (a == r) return true;
    return false;
  };
  try {
    read();
  } catch (const runtime::ConfigError& e) {
    if (!allows(Rejection::kConfigError)) finding("a ConfigError", e.what());
    for (const std::string& problem : e.problems())
      if (!one_line(problem)) finding("a ConfigError problem that is not one line", problem);
    if (e.problems().empty()) finding("a ConfigError listing no problem", "");
  } catch (const std::invalid_argument& e) {
    if (!allows(Rejection::kInvalidArgument)) finding("std::invalid_argument", e.what());
    if (!one_line(e.what())) finding("an error that is not one line", e.what());
  } catch (const std::runtime_error& e) {
    // std::runtime_error's own subclasses that are not an error message of a reader's.
    if (dynamic_cast<const std::range_error*>(&e) || dynamic_cast<const std::overflow_error*>(&e) ||
        dynamic_cast<const std::underflow_error*>(&e))
      finding(typeid(e).name(), e.what());
    if (!allows(Rejection::kRuntimeError)) finding("std::runtime_error", e.what());
    if (!one_line(e.what())) finding("an error that is not one line", e.what());
  } catch (const std::exception& e) {
    finding(typeid(e).name(), e.what());
  } catch (...) {
    finding("an exception of unknown type", "");
  }
}

}  // namespace atl::fuzz
