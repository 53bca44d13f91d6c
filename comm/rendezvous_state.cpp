#include "comm/rendezvous_state.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <unistd.h>

namespace atl::comm {
namespace {

constexpr const char* kHeader = "atoll rendezvous state 1";

std::string hex_text(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::optional<std::string> text_of_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const auto digit = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int high = digit(hex[i]), low = digit(hex[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
  }
  return out;
}

// FNV-1a, 64 bits: enough to tell a torn or edited file from a whole one.
std::string fnv1a_hex(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

// The round of a record "round/R/...", if it is one.
std::optional<int64_t> round_of(const std::string& key) {
  if (key.rfind("round/", 0) != 0) return std::nullopt;
  try {
    return std::stoll(key.substr(6));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::invalid_argument damaged(const std::string& path, const std::string& what) {
  return std::invalid_argument(
      "atoll rendezvous --state " + path + ": " + what +
      "; restore the file from a copy, or start a new run with a new --state file (the "
      "islands then resume from their checkpoints)");
}

void write_all(int fd, const std::string& text, const std::string& path) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error("rendezvous: cannot write " + path + ": " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::vector<uint8_t> store_bytes(const std::string& text) {
  return {text.begin(), text.end()};
}

std::string store_text(const std::vector<uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}

RendezvousState RendezvousState::load(const std::string& path) {
  RendezvousState state(path);
  if (path.empty() || !std::filesystem::exists(path)) return state;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw damaged(path, "cannot be read (" + std::string(std::strerror(errno)) + ")");
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string text = whole.str();
  // The closing line "end COUNT CHECKSUM" covers every byte before it.
  const size_t end = text.rfind("end ");
  if (text.rfind(std::string(kHeader) + "\n", 0) != 0 || end == std::string::npos || text.back() != '\n')
    throw damaged(path, "is not a whole rendezvous state file (no '" + std::string(kHeader) +
                            "' header or no closing line)");
  std::istringstream closing(text.substr(end + 4));
  size_t count = 0;
  std::string sum;
  closing >> count >> sum;
  if (sum != fnv1a_hex(text.substr(0, end)))
    throw damaged(
        path, "fails its checksum (" + sum + ", the content gives " + fnv1a_hex(text.substr(0, end)) + ")");
  std::istringstream lines(text.substr(0, end));
  std::string line;
  std::getline(lines, line);  // the header
  for (int number = 2; std::getline(lines, line); ++number) {
    const size_t space = line.find(' ');
    const std::optional<std::string> key = text_of_hex(line.substr(0, space));
    const std::optional<std::string> value =
        space == std::string::npos ? std::nullopt : text_of_hex(line.substr(space + 1));
    if (!key || !value)
      throw damaged(path, "line " + std::to_string(number) + " is not a 'KEY VALUE' record");
    state.records_[*key] = *value;
  }
  if (state.records_.size() != count)
    throw damaged(path, "holds " + std::to_string(state.records_.size()) +
                            " records, its closing line says " + std::to_string(count));
  return state;
}

std::optional<int64_t> RendezvousState::latest_round() const {
  const auto it = records_.find(durable::kLatestRound);
  if (it == records_.end()) return std::nullopt;
  return std::stoll(it->second);
}

void RendezvousState::record(const std::vector<std::pair<std::string, std::optional<std::string>>>& changes,
                             bool write_always) {
  bool changed = write_always;
  for (const auto& [key, value] : changes) {
    const auto it = records_.find(key);
    if (value && (it == records_.end() || it->second != *value)) {
      records_[key] = *value;
      changed = true;
    } else if (!value && it != records_.end()) {
      records_.erase(it);
      changed = true;
    }
  }
  if (!changed) return;
  drop_old_rounds();
  if (!path_.empty()) write();
}

void RendezvousState::drop_old_rounds() {
  const std::optional<int64_t> latest = latest_round();
  if (!latest) return;
  for (auto it = records_.begin(); it != records_.end();) {
    const std::optional<int64_t> round = round_of(it->first);
    it = round && *round < *latest - kKeptRounds ? records_.erase(it) : std::next(it);
  }
}

void RendezvousState::write() const {
  std::string text = std::string(kHeader) + "\n";
  for (const auto& [key, value] : records_) text += hex_text(key) + " " + hex_text(value) + "\n";
  text += "end " + std::to_string(records_.size()) + " " + fnv1a_hex(text) + "\n";
  // A crash at any point leaves either the old file or the new one whole, never a mix.
  const std::string temporary = path_ + ".partial";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("rendezvous: cannot write " + temporary + ": " + std::strerror(errno));
  try {
    write_all(fd, text, temporary);
    if (::fsync(fd) != 0)
      throw std::runtime_error("rendezvous: cannot fsync " + temporary + ": " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  if (std::rename(temporary.c_str(), path_.c_str()) != 0)
    throw std::runtime_error("rendezvous: cannot rename " + temporary + " to " + path_ + ": " +
                             std::strerror(errno));
  // The rename itself is durable only once the directory is.
  const std::string directory = std::filesystem::path(path_).parent_path().string();
  const int dir = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace atl::comm
