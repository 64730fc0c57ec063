// Every op and dtype of the world group against values each rank computes on its own.
// Runs with 2, 3 and 4 ranks (and as a plain process: world size 1).
#include <cstdlib>

#include "distributed/distributed/collective_check_util.h"

namespace strata {
namespace {

using dist::OpType;
using dist::ReduceOp;
using test::all_dtypes;
using test::all_ops;
using test::error_of;
using test::expect_values;
using test::make;
using test::reduce_all;
using test::value;

TEST(DistCollectives, AllReduceEveryOpAndDtype) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  const int64_t len = 7;
  for (DType d : all_dtypes()) {
    for (ReduceOp op : all_ops()) {
      std::vector<double> mine, want;
      for (int64_t i = 0; i < len; ++i) {
        mine.push_back(value(me, i));
        want.push_back(reduce_all(op, n, i));
      }
      Tensor t = make(mine, d);
      std::string what = std::string(dtype_name(d)) + " " + std::string(dist::reduce_op_name(op));
      if (op == ReduceOp::Avg && !is_floating(d)) {
        EXPECT_NE(error_of([&] { world.all_reduce(t, op); }).find("Avg needs a floating dtype"), std::string::npos)
            << what;
        continue;
      }
      world.all_reduce(t, op)->wait();
      expect_values(t, want, what);
    }
  }
}

TEST(DistCollectives, BroadcastFromEveryRoot) {
  auto& world = dist::world();
  for (DType d : all_dtypes()) {
    for (int root = 0; root < world.size(); ++root) {
      std::vector<double> mine, want;
      for (int i = 0; i < 5; ++i) {
        mine.push_back(world.rank() * 10 + i);
        want.push_back(root * 10 + i);
      }
      Tensor t = make(mine, d);
      world.broadcast(t, root)->wait();
      expect_values(t, want, std::string(dtype_name(d)) + " root " + std::to_string(root));
    }
  }
}

// Totals that are not multiples of N, smaller than N (empty chunks) and zero.
std::vector<int64_t> totals(int n) { return {0, 1, static_cast<int64_t>(n) - 1, n, n + 1, 5, 7, 10}; }

TEST(DistCollectives, AllGatherUnevenChunks) {
  auto& world = dist::world();
  for (DType d : all_dtypes()) {
    for (int64_t m : totals(world.size())) {
      int64_t begin = world.chunk_begin(m, world.rank()), size = world.chunk_size(m, world.rank());
      std::vector<double> mine, want;
      for (int64_t i = 0; i < size; ++i) mine.push_back(static_cast<double>(2 * (begin + i) + 1));
      for (int64_t g = 0; g < m; ++g) want.push_back(static_cast<double>(2 * g + 1));
      Tensor in = make(mine, d);
      Tensor out = zeros({m}, {.dtype = d});
      world.all_gather(out, in)->wait();
      expect_values(out, want, std::string(dtype_name(d)) + " M=" + std::to_string(m));
    }
  }
}

TEST(DistCollectives, AllGatherInPlace) {
  auto& world = dist::world();
  const int64_t m = 9;
  Tensor out = zeros({m});
  int64_t begin = world.chunk_begin(m, world.rank()), size = world.chunk_size(m, world.rank());
  Tensor in = out.narrow(0, begin, size);  // the chunk inside `out`, as ZeRO does it
  in.fill_(world.rank() + 1);
  world.all_gather(out, in)->wait();
  std::vector<double> want;
  for (int64_t g = 0; g < m; ++g) {
    int owner = 0;
    while (!(g >= world.chunk_begin(m, owner) && g < world.chunk_begin(m, owner) + world.chunk_size(m, owner))) ++owner;
    want.push_back(owner + 1);
  }
  expect_values(out, want, "in-place all_gather");
}

TEST(DistCollectives, ReduceScatterUnevenChunks) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  for (DType d : all_dtypes()) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg}) {
      if (op == ReduceOp::Avg && !is_floating(d)) continue;
      for (int64_t m : totals(n)) {
        std::vector<double> mine, want;
        for (int64_t g = 0; g < m; ++g) mine.push_back(static_cast<double>(g % 5 + me));
        int64_t begin = world.chunk_begin(m, me), size = world.chunk_size(m, me);
        for (int64_t g = begin; g < begin + size; ++g) {
          double sum = static_cast<double>(n * (g % 5)) + n * (n - 1) / 2.0;
          double max = static_cast<double>(g % 5 + n - 1);
          want.push_back(op == ReduceOp::Sum ? sum : (op == ReduceOp::Max ? max : sum / n));
        }
        Tensor in = make(mine, d);
        Tensor out = zeros({size}, {.dtype = d});
        world.reduce_scatter(out, in, op)->wait();
        expect_values(out, want, test::name_of(d, op, m));
      }
    }
  }
}

TEST(DistCollectives, AllToAll) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  const int k = 3;
  for (DType d : all_dtypes()) {
    std::vector<double> mine, want;
    for (int j = 0; j < n; ++j)
      for (int e = 0; e < k; ++e) {
        mine.push_back(me * 16 + j * 4 + e);  // block j goes to rank j
        want.push_back(j * 16 + me * 4 + e);  // block j comes from rank j
      }
    Tensor in = make(mine, d);
    Tensor out = zeros({n * k}, {.dtype = d});
    world.all_to_all(out, in)->wait();
    expect_values(out, want, std::string(dtype_name(d)));
  }
}

TEST(DistCollectives, SendRecvRingBothIssuedBeforeWaiting) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  for (DType d : all_dtypes()) {
    // Large enough to need a rendezvous: a blocking, in-order engine would deadlock here.
    const int64_t len = 20000;
    Tensor out = full({len}, me + 1, {.dtype = d});
    Tensor in = zeros({len}, {.dtype = d});
    auto s = world.send(out, (me + 1) % n);
    auto r = world.recv(in, (me + n - 1) % n);
    r->wait();
    s->wait();
    std::vector<double> got = in.to_vector<double>();
    EXPECT_EQ(got.front(), (me + n - 1) % n + 1) << dtype_name(d);
    EXPECT_EQ(got.back(), (me + n - 1) % n + 1) << dtype_name(d);
  }
}

TEST(DistCollectives, AsyncOpsCompleteInAnyWaitOrder) {
  auto& world = dist::world();
  std::vector<Tensor> ts;
  std::vector<dist::WorkPtr> works;
  for (int i = 0; i < 6; ++i) {
    ts.push_back(full({4}, i + world.rank()));
    works.push_back(world.all_reduce(ts.back()));
  }
  for (int i = 5; i >= 0; --i) works[static_cast<size_t>(i)]->synchronize(std::chrono::seconds(20));
  const int n = world.size();
  for (int i = 0; i < 6; ++i) {
    EXPECT_TRUE(works[static_cast<size_t>(i)]->is_completed());
    EXPECT_EQ(ts[static_cast<size_t>(i)].to_vector<double>()[0], n * i + n * (n - 1) / 2.0);
  }
  world.barrier()->wait();
}

TEST(DistCollectives, StatsCountCallsAndBytes) {
  auto& world = dist::world();
  world.barrier()->wait();
  world.reset_stats();
  Tensor a = ones({10});
  world.all_reduce(a)->wait();
  world.all_reduce(a)->wait();
  const int64_t m = 11;
  Tensor in = ones({world.chunk_size(m, world.rank())}, {.dtype = DType::Float64});
  Tensor out = zeros({m}, {.dtype = DType::Float64});
  world.all_gather(out, in)->wait();
  world.barrier()->wait();
  dist::CommStats s = world.stats();
  EXPECT_EQ(s[OpType::AllReduce].calls, 2u);
  EXPECT_EQ(s[OpType::AllReduce].bytes, 80u);
  EXPECT_EQ(s[OpType::AllGather].calls, 1u);
  EXPECT_EQ(s[OpType::AllGather].bytes, static_cast<uint64_t>(8 * world.chunk_size(m, world.rank())));
  EXPECT_EQ(s[OpType::Barrier].calls, 1u);
  world.reset_stats();
  EXPECT_TRUE(world.stats().empty());
}

TEST(DistCollectives, SplitEvenAndOddRanks) {
  auto& world = dist::world();
  std::vector<int> members;
  for (int r = world.rank() % 2; r < world.size(); r += 2) members.push_back(r);
  auto g = world.split(members, "parity");
  EXPECT_EQ(g->size(), static_cast<int>(members.size()));
  EXPECT_EQ(g->global_ranks(), members);
  EXPECT_EQ(g->rank(), world.rank() / 2);
  Tensor t = full({3}, world.rank());
  g->all_reduce(t)->wait();
  double want = 0;
  for (int r : members) want += r;
  EXPECT_EQ(t.to_vector<double>()[2], want);
  // Ranks that disagree about the partition are told so on every rank, before MPI is entered.
  std::vector<int> bad{world.rank()};
  if (world.rank() == 0 && world.size() > 1) bad = {0, 1};
  std::string err = error_of([&] { world.split(bad, "bad"); });
  if (world.size() > 1) {
    EXPECT_NE(err.find("do not form a partition"), std::string::npos) << err;
  }
  world.barrier()->wait();
}

TEST(DistCollectives, BadArgumentsThrowOnTheCallingThread) {
  auto& world = dist::world();
  const int n = world.size();
  Tensor t = ones({4});
  EXPECT_NE(error_of([&] { world.broadcast(t, n); }).find("root " + std::to_string(n) + " is out of range"),
            std::string::npos);
  EXPECT_NE(error_of([&] { world.broadcast(t, -1); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { world.send(t, n); }).find("destination rank"), std::string::npos);
  EXPECT_NE(error_of([&] { world.recv(t, -1); }).find("source rank -1"), std::string::npos);
  Tensor m = ones({3, 4}).transpose(0, 1);
  std::string err = error_of([&] { world.all_reduce(m); });
  EXPECT_NE(err.find("not contiguous"), std::string::npos) << err;
  Tensor out = zeros({10});
  Tensor wrong = zeros({world.chunk_size(10, world.rank()) + 1});
  err = error_of([&] { world.all_gather(out, wrong); });
  EXPECT_NE(err.find("chunk"), std::string::npos) << err;
  err = error_of([&] { world.reduce_scatter(wrong, out); });
  EXPECT_NE(err.find("chunk"), std::string::npos) << err;
  if (n > 1) {
    Tensor odd = zeros({n * 2 + 1});
    err = error_of([&] { world.all_to_all(odd, odd); });
    EXPECT_NE(err.find("equal blocks"), std::string::npos) << err;
  }
  Tensor f64 = zeros({10}, {.dtype = DType::Float64});
  err = error_of([&] { world.all_gather(f64, ones({world.chunk_size(10, world.rank())})); });
  EXPECT_NE(err.find("float64"), std::string::npos) << err;
  // Nothing was enqueued: the group still works.
  world.all_reduce(t)->wait();
  EXPECT_EQ(t.to_vector<double>()[0], n);
}

TEST(DistCollectives, LocalRankMatchesLauncher) {
  int lr = dist::local_rank();
  EXPECT_GE(lr, 0);
  EXPECT_LT(lr, dist::local_size());
  if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
    EXPECT_EQ(lr, std::atoi(v));
  }
  EXPECT_EQ(error_rank(), dist::world().rank());
}

}  // namespace
}  // namespace strata
