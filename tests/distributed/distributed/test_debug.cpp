// STRATA_DEBUG_COLLECTIVES=1 (set by CMake for this test): mismatched collectives are named.
#include "distributed/dist_test_util.h"

namespace strata {
namespace {

using test::error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(DistDebug, SizeMismatchNamesRanksAndSignatures) {
  auto& world = dist::world();
  ASSERT_EQ(world.size(), 2);
  Tensor t = ones({world.rank() == 0 ? 4 : 6});
  std::string err = error_of([&] { world.all_reduce(t)->wait(); });
  EXPECT_TRUE(contains(err, "collective mismatch")) << err;
  EXPECT_TRUE(contains(err, "ranks 0 and 1")) << err;
  EXPECT_TRUE(contains(err, "all_reduce(sum, float32, 4 elements)")) << err;
  EXPECT_TRUE(contains(err, "all_reduce(sum, float32, 6 elements)")) << err;
  EXPECT_EQ(t.to_vector<double>()[0], 1.0);  // not touched
  // Every rank skipped the op alike: the group is still usable.
  Tensor ok = ones({3});
  world.all_reduce(ok)->wait();
  EXPECT_EQ(ok.to_vector<double>()[2], 2.0);
}

TEST(DistDebug, DifferentOpsAndDtypesAreNamed) {
  auto& world = dist::world();
  Tensor t = ones({4});
  std::string err = error_of([&] {
    if (world.rank() == 0) world.all_reduce(t)->wait();
    else world.broadcast(t, 0)->wait();
  });
  EXPECT_TRUE(contains(err, "all_reduce(sum, float32, 4 elements)")) << err;
  EXPECT_TRUE(contains(err, "broadcast(float32, 4 elements, root 0)")) << err;
  Tensor u = ones({4}, {.dtype = world.rank() == 0 ? DType::Float32 : DType::BFloat16});
  err = error_of([&] { world.all_reduce(u, dist::ReduceOp::Max)->wait(); });
  EXPECT_TRUE(contains(err, "bfloat16")) << err;
  Tensor v = ones({4});
  err = error_of([&] { world.broadcast(v, world.rank())->wait(); });
  EXPECT_TRUE(contains(err, "root 0")) << err;
  EXPECT_TRUE(contains(err, "root 1")) << err;
}

// all_to_all_v's splits differ per rank; its rows may not: rows of 2 against rows of 3.
TEST(DistDebug, AllToAllVRowsOfDifferentSizesAreNamed) {
  auto& world = dist::world();
  const int64_t row = world.rank() == 0 ? 2 : 3;
  const std::vector<int64_t> splits{1, 1};
  Tensor in = ones({2, row});
  Tensor out = zeros({2, row});
  std::string err = error_of([&] { world.all_to_all_v(out, in, splits, splits)->wait(); });
  EXPECT_TRUE(contains(err, "all_to_all_v(float32, 2 elements per row)")) << err;
  EXPECT_TRUE(contains(err, "all_to_all_v(float32, 3 elements per row)")) << err;
  EXPECT_EQ(out.to_vector<double>()[0], 0.0);  // not touched
}

TEST(DistDebug, MatchingOpsStillWork) {
  auto& world = dist::world();
  Tensor out = zeros({3});
  Tensor in = full({world.chunk_size(3, world.rank())}, world.rank() + 1);
  world.all_gather(out, in)->wait();
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{1, 1, 2}));
  auto g = world.split(std::vector<int>{world.rank()}, "self");
  EXPECT_EQ(g->size(), 1);
  world.barrier()->wait();
}

}  // namespace
}  // namespace strata
