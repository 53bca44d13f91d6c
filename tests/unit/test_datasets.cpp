// The loader's side of the data: the sample order, computed rather than stored.
#include <gtest/gtest.h>

#include <set>

#include "runtime/data/sample_order.h"

namespace atl::runtime {
namespace {

// The permutation is computed, so an order over more sequences than memory could list costs
// nothing to make, and positions past 2^32 (a trillion-token run) are as cheap as the first.
TEST(SampleOrder, OrdersOfTrillionsOfSequencesNeedNoMemoryAndStayInRange) {
  constexpr int64_t n = (int64_t{1} << 40) + 12345;
  const SampleOrder order(n, 7), same(n, 7);
  std::set<int64_t> seen;
  for (int64_t p : {int64_t{0}, int64_t{1}, (int64_t{1} << 32) + 3, n - 1, n, 3 * n + 17}) {
    const int64_t s = order.sample_at(p);
    EXPECT_GE(s, 0);
    EXPECT_LT(s, n);
    EXPECT_EQ(same.sample_at(p), s);
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 6u) << "six positions of a 2^40 order collided";
  // Small orders of every size are permutations (the Feistel domain is cycle-walked into range).
  for (int64_t size = 1; size <= 40; ++size) {
    const SampleOrder small(size, 3);
    std::set<int64_t> epoch;
    for (int64_t p = 0; p < size; ++p) epoch.insert(small.sample_at(size + p));
    EXPECT_EQ(static_cast<int64_t>(epoch.size()), size) << "size " << size;
  }
}

}  // namespace
}  // namespace atl::runtime
