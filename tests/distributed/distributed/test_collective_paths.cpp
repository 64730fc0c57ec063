// all_reduce, reduce_scatter and all_gather of the MPI backend through whichever algorithm the
// environment sends them to (tests/CMakeLists.txt builds this file into dist_ring, dist_shm
// and dist_hier): the ring (src/distributed/mpi/ring.h; STRATA_MPI_SHM=0, forced for every
// size with small segments, and with the defaults), the shared-memory collectives
// (src/distributed/mpi/shm_collectives.h; every size, 4 KiB slots, direct reads as decided,
// forced on and forced off) and the hierarchical collectives (src/distributed/mpi/hierarchy.h;
// pretend nodes of STRATA_TEST_NODE_SIZE ranks). The public behaviour is the same on every
// path; only the order of the additions differs, and that is checked for the path in use.
#include <cstdlib>
#include <cstring>
#include <random>

#include "distributed/distributed/collective_check_util.h"
#include "distributed/distributed/path_order.h"

namespace strata {
namespace {

using dist::ReduceOp;
using test::all_dtypes;
using test::all_ops;
using test::error_of;
using test::expect_values;
using test::make;
using test::name_of;
using test::reduce_all;
using test::same_bytes;
using test::value;
using Clock = std::chrono::steady_clock;

using test::Path;
using test::path_order_sum;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// Ranks per node: pretend nodes (STRATA_TEST_NODE_SIZE, src/distributed/mpi/topology.h), else
// what mpirun says (OMPI_COMM_WORLD_LOCAL_SIZE: real nodes, as on the namespaced cluster,
// tests/cluster/run_cluster_test.sh, assumed to hold the same number each); 0 when unknown.
int node_size() {
  const int pretend = env_int("STRATA_TEST_NODE_SIZE", 0);
  return pretend > 0 ? pretend : env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 0);
}

// Read as the backend reads it. STRATA_MPI_SHM=0 turns shared memory off and leaves the ring;
// otherwise a group on one node takes shared memory. With pretend nodes, a world over
// several of them with the same number of ranks on each (at least 2) takes the hierarchical
// path unless STRATA_MPI_HIERARCHICAL=0; uneven ones take the ring.
Path path_under_test() {
  const bool shm = env_int("STRATA_MPI_SHM", 1) != 0;
  const int s = node_size(), n = dist::world().size();
  if (s > 0 && s < n) {
    const bool even = n % s == 0 && s >= 2;
    return even && shm && env_int("STRATA_MPI_HIERARCHICAL", -1) != 0 ? Path::Hier : Path::Ring;
  }
  return shm ? Path::Shm : Path::Ring;
}

// The smallest buffer the path takes (ring.cpp: 256 KiB by default, also for the
// hierarchical path unless STRATA_MPI_HIERARCHICAL=1; shm_arena.cpp: 0).
int64_t path_min_bytes() {
  const Path p = path_under_test();
  if (p == Path::Shm) return env_int("STRATA_MPI_SHM_MIN_BYTES", 0);
  if (p == Path::Hier && env_int("STRATA_MPI_HIERARCHICAL", -1) == 1) return 0;
  const char* v = std::getenv("STRATA_MPI_RING_MIN_BYTES");
  return v && *v ? std::atoll(v) : int64_t{256} << 10;
}

// Sizes not divisible by N, zero and smaller than N (empty chunks), spanning many ring
// segments or slot pieces, and one above the ring's default threshold in every dtype
// (16-bit values reduce as float32).
std::vector<int64_t> sizes(int n) { return {0, 1, n - 1, n + 1, 1003, 5000, 70001}; }

TEST(DistCollectivePaths, AllReduceEveryOpDtypeAndSize) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  for (int64_t len : sizes(n)) {
    for (DType d : all_dtypes()) {
      for (ReduceOp op : all_ops()) {
        if (op == ReduceOp::Avg && !is_floating(d)) continue;
        std::vector<double> mine(static_cast<size_t>(len));
        for (int64_t i = 0; i < len; ++i) mine[static_cast<size_t>(i)] = value(me, i);
        Tensor t = make(mine, d);
        world.all_reduce(t, op)->wait();
        expect_values(
            t, 0, [&](int64_t i) { return reduce_all(op, n, i); }, name_of(d, op, len));
      }
    }
  }
}

TEST(DistCollectivePaths, ReduceScatterEveryOpDtypeAndUnevenChunks) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  for (int64_t m : sizes(n)) {
    for (DType d : all_dtypes()) {
      for (ReduceOp op : all_ops()) {
        if (op == ReduceOp::Avg && !is_floating(d)) continue;
        std::vector<double> mine(static_cast<size_t>(m));
        for (int64_t i = 0; i < m; ++i) mine[static_cast<size_t>(i)] = value(me, i);
        Tensor in = make(mine, d);
        Tensor keep = in.clone();
        const int64_t begin = world.chunk_begin(m, me), size = world.chunk_size(m, me);
        Tensor out = zeros({size}, {.dtype = d});
        world.reduce_scatter(out, in, op)->wait();
        expect_values(
            out, begin, [&](int64_t i) { return reduce_all(op, n, i); }, name_of(d, op, m));
        EXPECT_TRUE(same_bytes(in, keep)) << name_of(d, op, m) << ": the input was modified";
      }
    }
  }
}

TEST(DistCollectivePaths, AllGatherEveryDtypeUnevenChunksAndInPlace) {
  auto& world = dist::world();
  const int me = world.rank();
  for (int64_t m : sizes(world.size())) {
    for (DType d : all_dtypes()) {
      const int64_t begin = world.chunk_begin(m, me), size = world.chunk_size(m, me);
      auto want = [](int64_t i) { return value(0, i) + static_cast<double>(i % 50); };
      std::vector<double> mine;
      for (int64_t i = begin; i < begin + size; ++i) mine.push_back(want(i));
      const std::string what = std::string(dtype_name(d)) + " M=" + std::to_string(m);
      Tensor in = make(mine, d), keep = in.clone();
      Tensor out = zeros({m}, {.dtype = d});
      world.all_gather(out, in)->wait();
      expect_values(out, 0, want, what);
      EXPECT_TRUE(same_bytes(in, keep)) << what << ": the input was modified";
      Tensor out2 = zeros({m}, {.dtype = d});
      Tensor view = out2.narrow(0, begin, size);  // ZeRO's layout: the chunk inside `out`
      view.copy_(make(mine, d));
      world.all_gather(out2, view)->wait();
      expect_values(out2, 0, want, what + " in place");
    }
  }
}

// Uniform values in [-1, 1): sums depend on the order of the additions.
std::vector<double> random_values(int rank, int64_t len) {
  std::mt19937_64 gen(1234 + static_cast<uint64_t>(rank));
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(static_cast<size_t>(len));
  for (auto& x : v) x = u(gen);
  return v;
}

// Every rank's result, gathered from every rank, compared as bytes.
void expect_identical_on_every_rank(const Tensor& result, const std::string& what) {
  auto& world = dist::world();
  const int n = world.size();
  const int64_t len = result.numel();
  Tensor all = zeros({len * n}, {.dtype = result.dtype()});
  world.all_gather(all, result)->wait();
  const size_t bytes = static_cast<size_t>(result.nbytes());
  for (int r = 0; r < n; ++r) {
    const auto* theirs = static_cast<const char*>(all.raw_data()) + bytes * static_cast<size_t>(r);
    EXPECT_EQ(std::memcmp(theirs, result.raw_data(), bytes), 0) << what << ": rank " << r << "'s result differs";
  }
}

TEST(DistCollectivePaths, ResultIsBitwiseIdenticalOnEveryRankInThePathsOrder) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  const Path path = path_under_test();
  const int64_t len = 100003;  // above the ring's default threshold in every dtype
  for (DType d : {DType::Float32, DType::Float64, DType::BFloat16}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
      const std::string what = std::string(dtype_name(d)) + " " + std::string(dist::reduce_op_name(op));
      Tensor t = make(random_values(me, len), d);
      world.all_reduce(t, op)->wait();
      expect_identical_on_every_rank(t, what);
      // reduce_scatter's chunk is the same bits as the all_reduce's (the hierarchical path
      // adds in another order for each; checked below against its own).
      Tensor rs = zeros({world.chunk_size(len, me)}, {.dtype = d});
      world.reduce_scatter(rs, make(random_values(me, len), d), op)->wait();
      if (path != Path::Hier) {
        EXPECT_TRUE(same_bytes(rs, t.narrow(0, world.chunk_begin(len, me), world.chunk_size(len, me)).contiguous()))
            << what << ": reduce_scatter differs from all_reduce";
      }
      // Exactly the path's order (on 3+ ranks the orders give different bits): proves the
      // path ran and that its order is the fixed one.
      for (bool scatter : {false, true}) {
        Tensor want;
        if (d == DType::Float64) {
          std::vector<std::vector<double>> x;
          for (int r = 0; r < n; ++r) x.push_back(random_values(r, len));
          std::vector<double> s = path_order_sum(path, x, len, node_size(), scatter);
          if (op == ReduceOp::Avg)
            for (auto& v : s) v /= static_cast<double>(n);
          want = from_vector(s, {len}).to(DType::Float64);
        } else {
          std::vector<std::vector<float>> x;
          for (int r = 0; r < n; ++r) x.push_back(make(random_values(r, len), d).to(DType::Float32).to_vector<float>());
          std::vector<float> s = path_order_sum(path, x, len, node_size(), scatter);
          if (op == ReduceOp::Avg)
            for (auto& v : s) v /= static_cast<float>(n);
          want = from_vector(s, {len}).to(d);
        }
        ASSERT_EQ(want.nbytes(), t.nbytes());
        const Tensor got = scatter ? rs : t;
        const Tensor expected =
            scatter ? want.narrow(0, world.chunk_begin(len, me), world.chunk_size(len, me)).contiguous() : want;
        EXPECT_TRUE(same_bytes(expected, got)) << what << (scatter ? " reduce_scatter" : " all_reduce") << ": not the "
                                               << (path == Path::Ring  ? "ring"
                                                   : path == Path::Shm ? "rank"
                                                                       : "hierarchical")
                                               << "-order sum";
      }
    }
  }
}

TEST(DistCollectivePaths, ConcurrentOpsOfOneGroupAndUserSendRecvDoNotMix) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  const int64_t len = 300007;
  Tensor a = full({len}, me + 1.0), b = full({len}, 10.0 * (me + 1), {.dtype = DType::Float64});
  Tensor to_send = full({len}, 100.0 + me), got = zeros({len});
  Tensor rs_in = full({len}, me + 2.0), rs_out = zeros({world.chunk_size(len, me)});
  Tensor ag_out = zeros({len}), ag_in = full({world.chunk_size(len, me)}, 7.0);
  std::vector<dist::WorkPtr> works;
  works.push_back(world.all_reduce(a));
  works.push_back(world.send(to_send, (me + 1) % n));
  works.push_back(world.all_reduce(b, ReduceOp::Max));
  works.push_back(world.all_gather(ag_out, ag_in));
  works.push_back(world.recv(got, (me + n - 1) % n));
  works.push_back(world.reduce_scatter(rs_out, rs_in));
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
  const double sum_ranks = n * (n + 1) / 2.0;
  EXPECT_TRUE(same_bytes(a, full({len}, sum_ranks)));
  EXPECT_TRUE(same_bytes(b, full({len}, 10.0 * n, {.dtype = DType::Float64})));
  EXPECT_TRUE(same_bytes(got, full({len}, 100.0 + (me + n - 1) % n)));
  EXPECT_TRUE(same_bytes(rs_out, full({world.chunk_size(len, me)}, sum_ranks + n)));
  EXPECT_TRUE(same_bytes(ag_out, full({len}, 7.0)));
}

// Sub-groups: a 2 x 2 mesh on 4 ranks (rows and columns, each its own ring or arena),
// parity groups otherwise.
TEST(DistCollectivePaths, SubGroups) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  std::vector<std::vector<int>> layouts;
  if (n == 4) {
    layouts.push_back(me < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3});
    layouts.push_back(me % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3});
  } else {
    std::vector<int> members;
    for (int r = me % 2; r < n; r += 2) members.push_back(r);
    layouts.push_back(members);
  }
  std::vector<std::unique_ptr<dist::ProcessGroup>> groups;
  for (auto& members : layouts) groups.push_back(world.split(members, "sub"));
  for (size_t k = 0; k < groups.size(); ++k) {
    auto& g = *groups[k];
    const auto& members = layouts[k];
    Tensor t = full({200001}, me);
    g.all_reduce(t)->wait();
    double want = 0;
    for (int r : members) want += r;
    EXPECT_TRUE(same_bytes(t, full({200001}, want)));
    const int64_t m = 50001;
    Tensor out = zeros({m});
    Tensor in = full({g.chunk_size(m, g.rank())}, me);
    g.all_gather(out, in)->wait();
    for (int j = 0; j < g.size(); ++j)
      EXPECT_TRUE(same_bytes(out.narrow(0, g.chunk_begin(m, j), g.chunk_size(m, j)).contiguous(),
                             full({g.chunk_size(m, j)}, members[static_cast<size_t>(j)])));
  }
  world.barrier()->wait();
}

// One op of each kind skipped by the last rank, each on its own group, all in flight at
// once (they expire side by side, so this costs one timeout, not three).
TEST(DistCollectivePaths, SkippedOpTimesOutNamingTheMissingRank) {
  auto& world = dist::world();
  const int n = world.size();
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  const std::vector<std::string> kinds{"all_reduce", "all_gather", "reduce_scatter"};
  std::vector<std::unique_ptr<dist::ProcessGroup>> groups;
  for (const auto& kind : kinds) {
    groups.push_back(world.split(all, "faulty_" + kind));
    groups.back()->set_timeout(std::chrono::milliseconds(1500));
  }
  const int64_t m = 1 << 20;
  ASSERT_GE(m * 4, path_min_bytes()) << "4 MiB should take the path under test";
  Tensor t = ones({m}), out = zeros({m}), chunk = ones({world.chunk_size(m, world.rank())});
  Tensor rs_out = zeros({world.chunk_size(m, world.rank())});
  if (world.rank() != n - 1) {  // the last rank never calls them
    const auto start = Clock::now();
    std::vector<dist::WorkPtr> works;
    works.push_back(groups[0]->all_reduce(t));
    works.push_back(groups[1]->all_gather(out, chunk));
    works.push_back(groups[2]->reduce_scatter(rs_out, t));
    for (size_t k = 0; k < kinds.size(); ++k) {
      std::string err = error_of([&] { works[k]->wait(); });
      const double secs = std::chrono::duration<double>(Clock::now() - start).count();
      EXPECT_NE(err.find(kinds[k] + " #0"), std::string::npos) << err;
      EXPECT_NE(err.find("timed out after 1500 ms"), std::string::npos) << err;
      const std::string missing = "ranks " + std::to_string(n - 1) + " of " + std::to_string(n) + " had not reached it";
      EXPECT_NE(err.find(missing), std::string::npos) << err;
      EXPECT_GE(secs, 1.4) << kinds[k];
      EXPECT_LT(secs, 4.0) << kinds[k];
      err = error_of([&] { groups[k]->barrier(); });
      EXPECT_NE(err.find("unusable after an earlier failure"), std::string::npos) << err;
    }
  }
  world.barrier()->wait();
}

}  // namespace
}  // namespace strata
