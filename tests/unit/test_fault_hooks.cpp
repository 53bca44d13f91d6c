// The failure tests' hooks (ATOLL_FAULT): each form reads into its field, anything else is one line
// naming the entry and the forms.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "runtime/fault_hooks.h"

namespace {

using atl::runtime::FaultHooks;

TEST(FaultHooks, EachFormReadsIntoItsField) {
  const FaultHooks hooks = FaultHooks::parse("nan_gradient@3:1,skip_collective@2:5,sigkill@7,ignore_sigterm");
  EXPECT_TRUE(hooks.nan_gradient(3, 1));
  EXPECT_TRUE(hooks.skip_collective(5, 2));
  EXPECT_EQ(hooks.sigkill_step, 7);
  EXPECT_TRUE(hooks.ignore_sigterm);
  EXPECT_FALSE(FaultHooks::parse("").ignore_sigterm);
  EXPECT_FALSE(FaultHooks::parse("sigkill@7").ignore_sigterm);
}

TEST(FaultHooks, AnUnknownOrMalformedEntryIsOneLineNamingIt) {
  for (const std::string text : {"bogus", "ignore_sigterm@1", "sigkill@x"}) {
    try {
      FaultHooks::parse(text);
      FAIL() << text << " was accepted";
    } catch (const std::invalid_argument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("'" + text + "'"), std::string::npos) << message;
      EXPECT_NE(message.find("sigkill_in_exchange@EXCHANGE or ignore_sigterm"), std::string::npos) << message;
    }
  }
}

}  // namespace
