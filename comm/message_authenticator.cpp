#include "comm/message_authenticator.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>

namespace atl::comm {
namespace {

struct MacDeleter {
  void operator()(EVP_MAC* mac) const { EVP_MAC_free(mac); }
  void operator()(EVP_MAC_CTX* context) const { EVP_MAC_CTX_free(context); }
};

void check(int ok, const char* what) {
  if (ok != 1) throw std::runtime_error(std::string("OpenSSL: ") + what + " failed");
}

std::string to_hex(const uint8_t* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    hex += kDigits[data[i] >> 4];
    hex += kDigits[data[i] & 0xf];
  }
  return hex;
}

}  // namespace

MessageAuthenticator::MessageAuthenticator(std::string secret, std::string source)
    : secret_(std::move(secret)), source_(std::move(source)) {
  if (secret_.size() < kMinSecretBytes)
    throw std::invalid_argument("the job secret has " + std::to_string(secret_.size()) +
                                " bytes, fewer than " + std::to_string(kMinSecretBytes) +
                                "; make one with `openssl rand -hex 32`");
}

MessageAuthenticator MessageAuthenticator::from_file(const std::string& path, const std::string& option) {
  const std::string field = option + " " + path;
  struct stat status {};
  if (stat(path.c_str(), &status) != 0 || !S_ISREG(status.st_mode))
    throw std::invalid_argument(
        field +
        " is not a readable file; make the job's secret with "
        "`openssl rand -hex 32 > FILE && chmod 600 FILE` and copy it to every island");
  if ((status.st_mode & (S_IRWXG | S_IRWXO)) != 0)
    throw std::invalid_argument(field + " may be read by other users of this machine; chmod 600 " + path);
  std::ifstream in(path, std::ios::binary);
  std::string secret((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.eof() && in.fail())
    throw std::invalid_argument(field + " could not be read; check its permissions");
  if (!secret.empty() && secret.back() == '\n') secret.pop_back();
  if (!secret.empty() && secret.back() == '\r') secret.pop_back();
  if (secret.size() < kMinSecretBytes)
    throw std::invalid_argument(field + " holds " + std::to_string(secret.size()) + " bytes, fewer than " +
                                std::to_string(kMinSecretBytes) + "; make one with `openssl rand -hex 32 > " +
                                path + "`");
  return MessageAuthenticator(std::move(secret), field);
}

MessageAuthenticator::Tag MessageAuthenticator::tag(std::string_view context, const uint8_t* data,
                                                    size_t size) const {
  std::unique_ptr<EVP_MAC, MacDeleter> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  if (!mac) throw std::runtime_error("OpenSSL: HMAC is not available");
  std::unique_ptr<EVP_MAC_CTX, MacDeleter> ctx(EVP_MAC_CTX_new(mac.get()));
  if (!ctx) throw std::runtime_error("OpenSSL: out of memory for an HMAC");
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  check(
      EVP_MAC_init(ctx.get(), reinterpret_cast<const unsigned char*>(secret_.data()), secret_.size(), params),
      "HMAC init");
  const uint64_t context_size = context.size();
  check(
      EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(&context_size), sizeof(context_size)),
      "HMAC update");
  check(EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(context.data()), context.size()),
        "HMAC update");
  check(EVP_MAC_update(ctx.get(), data, size), "HMAC update");
  Tag out{};
  size_t written = 0;
  check(EVP_MAC_final(ctx.get(), out.data(), &written, out.size()), "HMAC final");
  if (written != kTagBytes) throw std::runtime_error("OpenSSL: HMAC-SHA256 gave an unexpected length");
  return out;
}

bool MessageAuthenticator::verify(std::string_view context, const uint8_t* data, size_t size,
                                  const uint8_t* expected) const {
  const Tag actual = tag(context, data, size);
  return CRYPTO_memcmp(actual.data(), expected, kTagBytes) == 0;
}

std::string MessageAuthenticator::hex_tag(std::string_view context, std::string_view text) const {
  const Tag t = tag(context, reinterpret_cast<const uint8_t*>(text.data()), text.size());
  return to_hex(t.data(), t.size());
}

bool MessageAuthenticator::verify_hex(std::string_view context, std::string_view text,
                                      std::string_view hex) const {
  const std::string actual = hex_tag(context, text);
  return hex.size() == actual.size() && CRYPTO_memcmp(actual.data(), hex.data(), actual.size()) == 0;
}

std::string random_hex(size_t size) {
  std::string bytes(size, '\0');
  check(RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(size)), "random bytes");
  return to_hex(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace atl::comm
