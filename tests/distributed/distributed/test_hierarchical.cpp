// The algorithm choice for groups over several (pretend) nodes, on sub-groups of 4 or 6
// ranks with STRATA_TEST_NODE_SIZE=2 (src/distributed/mpi/topology.h): a group with 2 ranks
// on each of 2 nodes takes the hierarchical path (its results are the hierarchical order's
// bits), one with 2 + 1 ranks (uneven) the flat ring (the ring's bits), one inside a node
// shared memory (rank order). Built into dist_hier beside test_collective_paths.cpp.
#include <cstdlib>
#include <random>

#include "distributed/distributed/collective_check_util.h"
#include "distributed/distributed/path_order.h"

namespace strata {
namespace {

using test::Path;
using test::same_bytes;

std::vector<float> random_floats(int world_rank, int64_t len) {
  std::mt19937_64 gen(99 + static_cast<uint64_t>(world_rank));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(len));
  for (auto& x : v) x = u(gen);
  return v;
}

struct Layout {
  std::vector<int> members;  // world ranks of this rank's group
  Path path;                 // what the group must take
};

// This rank's group in a partition of the world into groups of each kind.
Layout layout_for(int n, int me) {
  if (n == 6) {
    // {0,1 | 4,5}: 2 nodes x 2 ranks; {2,3}: one node.
    if (me == 2 || me == 3) return {{2, 3}, Path::Shm};
    return {{0, 1, 4, 5}, Path::Hier};
  }
  // n == 4: {0,1 | 2}: nodes of 2 and 1 ranks (uneven); {3} alone.
  if (me == 3) return {{3}, Path::Shm};
  return {{0, 1, 2}, Path::Ring};
}

TEST(DistHierarchical, EvenGroupsTakeTheHierarchicalPathUnevenOnesTheRing) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  if (n != 4 && n != 6) GTEST_SKIP() << "the layouts need 4 or 6 ranks";
  const char* node = std::getenv("STRATA_TEST_NODE_SIZE");
  ASSERT_TRUE(node != nullptr && std::string(node) == "2") << "run with STRATA_TEST_NODE_SIZE=2";
  const Layout lay = layout_for(n, me);
  auto group = world.split(lay.members, "layout");
  const int gn = group->size(), gr = group->rank();
  if (gn == 1) {
    world.barrier()->wait();
    return;
  }
  const int64_t len = 300001;  // above the ring's threshold, uneven chunks
  std::vector<std::vector<float>> x;
  for (int w : lay.members) x.push_back(random_floats(w, len));
  Tensor t = from_vector(x[static_cast<size_t>(gr)], {len});
  group->all_reduce(t)->wait();
  const std::vector<float> want = test::path_order_sum(lay.path, x, len, 2, false);
  EXPECT_TRUE(same_bytes(t, from_vector(want, {len}))) << "all_reduce is not the expected path's sum";

  Tensor rs = zeros({group->chunk_size(len, gr)});
  group->reduce_scatter(rs, from_vector(x[static_cast<size_t>(gr)], {len}))->wait();
  const std::vector<float> want_rs = test::path_order_sum(lay.path, x, len, 2, true);
  EXPECT_TRUE(
      same_bytes(rs, from_vector(want_rs, {len}).narrow(0, group->chunk_begin(len, gr), rs.numel()).contiguous()))
      << "reduce_scatter is not the expected path's sum";

  // all_gather of int64 chunks that name their owner and position: any misplaced element shows.
  const int64_t m = 100003;
  std::vector<double> mine;
  for (int64_t i = group->chunk_begin(m, gr); i < group->chunk_begin(m, gr) + group->chunk_size(m, gr); ++i)
    mine.push_back(static_cast<double>(i * 8 + gr));
  Tensor out = zeros({m}, {.dtype = DType::Int64});
  group->all_gather(out, test::make(mine, DType::Int64))->wait();
  std::vector<int64_t> got = out.to_vector<int64_t>();
  int bad = 0;
  for (int64_t i = 0; i < m && bad < 5; ++i) {
    const int owner = static_cast<int>(i / ((m + gn - 1) / gn));
    if (got[static_cast<size_t>(i)] != i * 8 + owner) {
      ADD_FAILURE() << "all_gather element " << i << ": got " << got[static_cast<size_t>(i)];
      ++bad;
    }
  }
  world.barrier()->wait();
}

}  // namespace
}  // namespace strata
