// The islands' job secret (comm/message_authenticator.h): tags are HMAC-SHA256 of the
// length-prefixed context and the data -- checked against Python's hmac module on the same bytes --
// any changed byte, context or secret fails verification, and a secret file is refused with one line
// when it is missing, too short or readable by other users.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "comm/message_authenticator.h"

namespace {

using atl::comm::MessageAuthenticator;

const std::string kSecret = "0123456789abcdef0123456789abcdef";

std::string hex(const MessageAuthenticator::Tag& tag) {
  std::string out;
  char digits[3];
  for (uint8_t byte : tag) {
    std::snprintf(digits, sizeof(digits), "%02x", byte);
    out += digits;
  }
  return out;
}

const uint8_t* bytes(const std::string& text) {
  return reinterpret_cast<const uint8_t*>(text.data());
}

TEST(MessageAuthenticator, TagIsHmacSha256OfTheLengthPrefixedContextAndTheData) {
  const MessageAuthenticator auth(kSecret);
  // python3: hmac.new(key, struct.pack('<Q', len(ctx)) + ctx + data, hashlib.sha256).hexdigest()
  const std::string data = "pseudo-gradient bytes";
  EXPECT_EQ(hex(auth.tag("round 3|1>2", bytes(data), data.size())),
            "eef1bea96e17194fcac4cb671d4d8db2b708f63585a11b12d74ccaffa9db6f12");
  const std::string hi = "Hi There";
  EXPECT_EQ(hex(auth.tag("", bytes(hi), hi.size())),
            "02527353a00d1b49187a8f2c448387bd61eec24424c896a960ab5d28b4ab027f");
  EXPECT_EQ(auth.hex_tag("round 3|1>2", data),
            "eef1bea96e17194fcac4cb671d4d8db2b708f63585a11b12d74ccaffa9db6f12");
}

TEST(MessageAuthenticator, AnyChangedByteContextOrSecretFailsVerification) {
  const MessageAuthenticator auth(kSecret), other(kSecret + "!");
  std::vector<uint8_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  const MessageAuthenticator::Tag tag = auth.tag("exchange 1|0>1", data.data(), data.size());
  EXPECT_TRUE(auth.verify("exchange 1|0>1", data.data(), data.size(), tag.data()));
  EXPECT_FALSE(auth.verify("exchange 2|0>1", data.data(), data.size(), tag.data()));  // a replay
  EXPECT_FALSE(auth.verify("exchange 1|0>1", data.data(), data.size() - 1, tag.data()));
  EXPECT_FALSE(other.verify("exchange 1|0>1", data.data(), data.size(), tag.data()));
  for (size_t i : {size_t{0}, size_t{499}, size_t{999}}) {
    data[i] ^= 0x01;
    EXPECT_FALSE(auth.verify("exchange 1|0>1", data.data(), data.size(), tag.data())) << "byte " << i;
    data[i] ^= 0x01;
  }
  // Moving bytes between the context and the data changes the tag (the context is length-prefixed).
  const std::string ab = "ab";
  EXPECT_NE(hex(auth.tag("a", bytes(ab) + 1, 1)), hex(auth.tag("", bytes(ab), 2)));
  EXPECT_TRUE(auth.verify_hex("c", "text", auth.hex_tag("c", "text")));
  EXPECT_FALSE(auth.verify_hex("c", "text", auth.hex_tag("c", "texT")));
  EXPECT_FALSE(auth.verify_hex("c", "text", "00"));
}

class SecretFile : public ::testing::Test {
 protected:
  std::string path =
      (std::filesystem::temp_directory_path() / ("atoll-secret-" + std::to_string(::getpid()))).string();
  void write(const std::string& content, mode_t mode) {
    std::ofstream(path, std::ios::binary) << content;
    ::chmod(path.c_str(), mode);
  }
  void TearDown() override { std::filesystem::remove(path); }
  std::string refusal() {
    try {
      MessageAuthenticator::from_file(path);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(SecretFile, ReadsTheSecretWithoutItsTrailingNewline) {
  write(kSecret + "\n", 0600);
  const std::string data = "x";
  EXPECT_EQ(MessageAuthenticator::from_file(path).hex_tag("c", data),
            MessageAuthenticator(kSecret).hex_tag("c", data));
  EXPECT_EQ(MessageAuthenticator::from_file(path).source(), "outer.secret_file " + path);
}

TEST_F(SecretFile, RefusesAMissingShortOrOpenFileWithOneLine) {
  EXPECT_EQ(refusal(),
            "outer.secret_file " + path +
                " is not a readable file; make the job's secret with `openssl rand -hex 32 > FILE && "
                "chmod 600 FILE` and copy it to every island");
  write("short\n", 0600);
  EXPECT_EQ(refusal(), "outer.secret_file " + path +
                           " holds 5 bytes, fewer than 16; make one with `openssl rand -hex 32 > " + path +
                           "`");
  write(kSecret, 0644);
  EXPECT_EQ(refusal(),
            "outer.secret_file " + path + " may be read by other users of this machine; chmod 600 " + path);
  EXPECT_THROW(MessageAuthenticator("fifteen bytes!!"), std::invalid_argument);
}

}  // namespace
