// What a restarted `atoll rendezvous --state FILE` must know to go on where it stopped (issue 63):
// the store records islands act on -- each round's members and outcome, the newest round that
// counted and its settings, the admission record (a nonce and its tag, never the job secret), the
// island ids' holders. An island asks the rendezvous to keep such a record (RendezvousClient::
// persist) and acts on it only once the rendezvous has written it here, so a crash never loses a
// record an island acted on; everything else in the store (arrivals, reports, heartbeats, the Gloo
// groups' addresses) is met again after a restart.
//
// The file is text: a header line, one "KEY VALUE" line per record (both hex), and a closing line
// with the record count and a checksum of everything before it. Each change rewrites it whole,
// atomically (a temporary file, fsync, rename, fsync of the directory). Records of rounds well
// behind the newest that counted are dropped: an island that far behind catches up from the newest.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace atl::comm {

// The store keys of the keeping protocol between RendezvousClient and RendezvousServer.
namespace durable {
// Where islands push their requests: "ACK_KEY\nKEY\nKEY...".
constexpr const char* kRequests = "durable/requests";
// Set by the server once the state file's records are in the store: islands wait for it before
// anything else, so none sees the store of a restarted rendezvous half restored.
constexpr const char* kReady = "durable/ready";
// The newest round that counted (IslandRendezvous::record_round).
constexpr const char* kLatestRound = "latest_round";
}  // namespace durable

// A store value from text and back (the store holds bytes).
std::vector<uint8_t> store_bytes(const std::string& text);
std::string store_text(const std::vector<uint8_t>& bytes);

class RendezvousState {
 public:
  // Rounds behind the newest that counted whose records are kept.
  static constexpr int64_t kKeptRounds = 16;

  // The records of `path`; none when it does not exist yet (a new run) or `path` is empty (a
  // rendezvous that keeps nothing). Throws std::invalid_argument naming the file, the damage and the
  // fix when it cannot be read or is not a whole state file.
  static RendezvousState load(const std::string& path);

  // Sets the records of `changes` (KEY, VALUE; VALUE nullopt: removed) and, when that changed
  // anything or `write_always`, rewrites the file atomically (never with an empty path). Throws
  // std::runtime_error naming the file when it cannot be written.
  void record(const std::vector<std::pair<std::string, std::optional<std::string>>>& changes,
              bool write_always = false);

  const std::map<std::string, std::string>& records() const { return records_; }
  const std::string& path() const { return path_; }
  std::optional<int64_t> latest_round() const;

 private:
  explicit RendezvousState(std::string path) : path_(std::move(path)) {}
  void drop_old_rounds();
  void write() const;

  std::string path_;
  std::map<std::string, std::string> records_;
};

}  // namespace atl::comm
