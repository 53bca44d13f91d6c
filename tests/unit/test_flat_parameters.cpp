// The flat buffers' bucket layout (aligned parameter starts, buckets padded to split into equal
// pieces, bucket boundaries at units and around own-bucket parameters, separate storages) and the
// release/re-allocation of a buffer's bytes under live views.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "parallel/flat_parameters.h"
#include "parallel/resident_storage.h"

using atl::parallel::FlatLayout;
using atl::parallel::FlatParameters;
using atl::parallel::ParamInfo;

namespace {

ParamInfo param(const std::string& name, std::vector<int64_t> shape, int unit = 0, bool own_bucket = false) {
  ParamInfo info{name, std::move(shape)};
  info.unit = unit;
  info.own_bucket = own_bucket;
  return info;
}

}  // namespace

TEST(FlatParameters, AlignsStartsAndPadsBucketsIntoEqualPieces) {
  FlatLayout layout;
  layout.align = 16;
  layout.shards = 4;
  layout.bucket_numel = 100;
  // a (42) starts at 0, b at 48 and c at 112 (16-element starts): before c the bucket holds 98 < 100
  // elements, so c joins it; then it is full, and d opens the second bucket.
  FlatParameters flat({param("a", {42}), param("b", {5, 10}), param("c", {30}), param("d", {3})}, at::kFloat,
                      layout);
  ASSERT_EQ(flat.buckets().size(), 2u);
  EXPECT_EQ(flat.entry("a").offset, 0);
  EXPECT_EQ(flat.entry("b").offset, 48);
  EXPECT_EQ(flat.entry("c").offset, 112);
  EXPECT_EQ(flat.buckets()[0].numel, 192);  // 142 rounded up to a multiple of 16 x 4
  EXPECT_EQ(flat.buckets()[1].offset, 192);
  EXPECT_EQ(flat.buckets()[1].numel, 64);  // a 3-element parameter, padded to one aligned piece per shard
  EXPECT_EQ(flat.entry("d").bucket, 1u);
  EXPECT_EQ(flat.numel(), 256);
  for (const atl::parallel::FlatBucket& b : flat.buckets()) EXPECT_EQ(b.numel % (16 * 4), 0);
}

TEST(FlatParameters, BucketsCloseAtUnitsAndAroundOwnBucketParameters) {
  FlatLayout layout;
  layout.split_units = true;
  FlatParameters flat({param("l1.a", {4}, 1), param("l1.b", {4}, 1), param("l0.a", {4}, 0),
                       param("embed", {8}, -1, /*own_bucket=*/true), param("after", {2}, -1)},
                      at::kFloat, layout);
  ASSERT_EQ(flat.buckets().size(), 4u);
  EXPECT_EQ(flat.entry("l1.b").bucket, 0u);
  EXPECT_EQ(flat.entry("l0.a").bucket, 1u);
  EXPECT_EQ(flat.entry("embed").bucket, 2u);
  EXPECT_EQ(flat.entry("after").bucket, 3u);  // same unit, but the own-bucket parameter stands alone
  EXPECT_EQ(flat.buckets()[0].unit, 1);
}

TEST(FlatParameters, GradientsAccumulateInPlaceInTheirOwnDtype) {
  FlatLayout layout;
  layout.separate_grads = true;
  FlatParameters flat({param("w", {3})}, at::kBFloat16, layout, at::kFloat);
  const at::Tensor& w = flat.entry("w").value;
  (w * 2).sum().backward();
  (w * 3).sum().backward();
  EXPECT_EQ(flat.buckets()[0].grads.scalar_type(), at::kFloat);
  EXPECT_TRUE(flat.entry("w").grad.equal(at::full({3}, 5.0f)));  // landed in the flat fp32 buffer
  EXPECT_THROW(flat.grads(), std::logic_error);                  // separate storages: no whole buffer
}

TEST(ResidentStorage, ReleasedBytesComeBackUnderTheSameViews) {
  at::Tensor buffer = at::arange(8, at::kFloat);
  const at::Tensor view = buffer.narrow(0, 2, 3);
  EXPECT_TRUE(atl::parallel::is_resident(buffer));
  atl::parallel::release_storage(buffer);
  EXPECT_FALSE(atl::parallel::is_resident(buffer));
  EXPECT_EQ(buffer.storage().nbytes(), 0u);
  atl::parallel::make_resident(buffer);
  buffer.copy_(at::arange(10, 18, at::kFloat));
  EXPECT_TRUE(view.equal(at::tensor({12.0f, 13.0f, 14.0f})));  // the view reads the new allocation
  EXPECT_THROW(atl::parallel::release_storage(view), std::invalid_argument);
}
