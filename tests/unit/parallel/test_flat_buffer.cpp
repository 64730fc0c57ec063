// FlatBuffer layout (padding, shards, pieces) and Storage release / reallocate.
#include <gtest/gtest.h>

#include "strata/parallel/flat_buffer.h"
#include "test_util.h"

namespace strata::parallel {
namespace {

TEST(FlatBuffer, PadsToAMultipleOfTheShardCount) {
  FlatBuffer fb(DType::Float32, {{"a", {2, 3}}, {"b", {5}}}, 4, 100);
  EXPECT_EQ(fb.used_numel(), 11);
  EXPECT_EQ(fb.numel(), 12);
  EXPECT_EQ(fb.padding(), 1);
  EXPECT_EQ(fb.shard_numel(), 3);
  EXPECT_EQ(fb.shard_begin(2), 6);
  EXPECT_EQ(fb.global_offset(), 100);
  EXPECT_EQ(fb.entries()[1].offset, 6);
  EXPECT_EQ(fb.nbytes(), 48u);
  // Never an empty shard, even for a tiny buffer.
  FlatBuffer tiny(DType::Float64, {{"x", {1}}}, 3);
  EXPECT_EQ(tiny.numel(), 3);
  EXPECT_EQ(tiny.shard_numel(), 1);
  FlatBuffer exact(DType::Float32, {{"x", {8}}}, 4);
  EXPECT_EQ(exact.padding(), 0);
  testing::expect_error_mentions([] { FlatBuffer bad(DType::Float32, {}, 0); }, {"num_shards", "0"});
}

TEST(FlatBuffer, PiecesCoverEachShardsEntries) {
  FlatBuffer fb(DType::Float32, {{"a", {2, 3}}, {"b", {5}}}, 4);
  // shards: [0,3) [3,6) [6,9) [9,12); a = [0,6), b = [6,11), padding 11.
  auto p1 = fb.pieces(1);
  ASSERT_EQ(p1.size(), 1u);
  EXPECT_EQ(p1[0].entry, 0u);
  EXPECT_EQ(p1[0].entry_offset, 3);
  EXPECT_EQ(p1[0].numel, 3);
  auto p3 = fb.pieces(3);
  ASSERT_EQ(p3.size(), 1u);
  EXPECT_EQ(p3[0].entry, 1u);
  EXPECT_EQ(p3[0].entry_offset, 3);
  EXPECT_EQ(p3[0].shard_offset, 0);
  EXPECT_EQ(p3[0].numel, 2);  // the last element of shard 3 is padding
  FlatBuffer two(DType::Float32, {{"a", {3}}, {"b", {3}}}, 2);
  auto q = two.pieces(0);  // [0,3) = a; [3,6) = b
  ASSERT_EQ(q.size(), 1u);
  FlatBuffer straddle(DType::Float32, {{"a", {2}}, {"b", {3}}}, 1);
  EXPECT_EQ(straddle.pieces(0).size(), 2u);
  int64_t total = 0;
  for (int r = 0; r < 4; ++r)
    for (auto& p : fb.pieces(r)) total += p.numel;
  EXPECT_EQ(total, fb.used_numel());
}

TEST(FlatBuffer, ViewsShareTheMemoryAndSurviveRelease) {
  FlatBuffer fb(DType::Float32, {{"a", {2, 2}}, {"b", {3}}}, 2);
  testing::expect_error_mentions([&] { (void)fb.data(); }, {"allocate()"});
  fb.allocate();
  Tensor a = fb.view(0);
  Tensor b = fb.view(1);
  EXPECT_EQ(a.shape(), Shape({2, 2}));
  a.fill_(1.0);
  b.fill_(2.0);
  EXPECT_EQ(fb.data().to_vector<float>(), (std::vector<float>{1, 1, 1, 1, 2, 2, 2, 0}));
  EXPECT_EQ(fb.shard(1).to_vector<float>(), (std::vector<float>{2, 2, 2, 0}));
  fb.release();
  EXPECT_TRUE(fb.released());
  testing::expect_error_mentions([&] { (void)b.to_vector<float>(); }, {"released"});
  fb.reallocate();
  EXPECT_FALSE(fb.released());
  b.fill_(3.0);  // the old view sees the new memory
  EXPECT_EQ(fb.flat_view(1).to_vector<float>(), (std::vector<float>{3, 3, 3}));
}

}  // namespace
}  // namespace strata::parallel
