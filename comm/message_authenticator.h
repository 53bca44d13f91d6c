// Who may take part in the islands' outer exchange (issue 19): HMAC-SHA256 (OpenSSL) keyed with the
// job secret, a file every island of the job holds (outer.secret_file) and none sends. The rendezvous
// admits an island only with a proof made with it, and every chunk of the exchange carries a tag made
// with it, which each receiver checks before the chunk enters the mean: an island without the secret
// cannot join, and a chunk altered in flight is never averaged in.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace atl::comm {

class MessageAuthenticator {
 public:
  static constexpr size_t kTagBytes = 32;  // SHA-256
  static constexpr size_t kMinSecretBytes = 16;
  using Tag = std::array<uint8_t, kTagBytes>;

  // Throws std::invalid_argument when the secret is shorter than kMinSecretBytes. `source` says
  // where it came from in messages.
  explicit MessageAuthenticator(std::string secret, std::string source = "job secret");
  // The secret in `path` (one trailing newline dropped, so `openssl rand -hex 32 > F` works). Throws
  // std::invalid_argument naming `option` (where the path came from), the file and the fix when it
  // cannot be read, is too short, or other users may read it (group/other permission bits set).
  static MessageAuthenticator from_file(const std::string& path,
                                        const std::string& option = "outer.secret_file");

  // The tag of `data` in `context` (what the bytes are: round, sender, receiver, ...). The context is
  // length-prefixed, so no context/data split of the same bytes gives another's tag.
  Tag tag(std::string_view context, const uint8_t* data, size_t size) const;
  // Whether `tag` is the tag of `data` in `context` (compared in constant time).
  bool verify(std::string_view context, const uint8_t* data, size_t size, const uint8_t* tag) const;

  // The same over text, hex-encoded: the rendezvous' proofs travel as text in the store.
  std::string hex_tag(std::string_view context, std::string_view text) const;
  bool verify_hex(std::string_view context, std::string_view text, std::string_view hex) const;

  // "outer.secret_file PATH" (or what the constructor was given).
  const std::string& source() const { return source_; }

 private:
  std::string secret_;
  std::string source_;
};

// `size` random bytes (OpenSSL's generator), hex-encoded: nonces for the rendezvous' proofs.
std::string random_hex(size_t size);

}  // namespace atl::comm
