// The MPI backend's own ring (src/dist/mpi/ring.h) behind all_reduce, reduce_scatter and
// all_gather.
// Registered twice per rank count: with STRATA_MPI_RING_MIN_BYTES=0 and small segments
// (every reduction of 2+ ranks takes the ring, buffers span many segments), and with the
// defaults (only buffers from 256 KiB take it).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "dist_test_util.h"

namespace strata {
namespace {

using dist::ReduceOp;
using test::all_dtypes;
using test::error_of;
using test::make;
using Clock = std::chrono::steady_clock;

constexpr int64_t kDefaultRingMinBytes = 256 << 10;  // ring.cpp's default

int64_t ring_min_bytes() {
  const char* v = std::getenv("STRATA_MPI_RING_MIN_BYTES");
  return v && *v ? std::atoll(v) : kDefaultRingMinBytes;
}

const std::vector<ReduceOp>& all_ops() {
  static const std::vector<ReduceOp> v{ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min,
                                       ReduceOp::Product};
  return v;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() &&
         std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.nbytes())) == 0;
}

// Sizes not divisible by N, smaller than N (empty chunks), spanning several segments, and
// one above the default threshold for every dtype (16-bit values reduce as float32).
std::vector<int64_t> sizes(int n) { return {0, 1, n - 1, n + 1, 1003, 5000, 70001}; }

double tolerance(DType d) {
  switch (d) {
    case DType::BFloat16: return 1e-2;
    case DType::Float16: return 1e-3;
    case DType::Float32: return 1e-6;
    default: return 1e-12;
  }
}

// Rank r's value at index i: small integers, exact in every dtype, products stay small.
double value(int r, int64_t i) { return static_cast<double>(r + 1 + (i * 7 + r) % 3); }

double reduce_all(ReduceOp op, int n, int64_t i) {
  double acc = value(0, i);
  for (int r = 1; r < n; ++r) {
    double v = value(r, i);
    if (op == ReduceOp::Sum || op == ReduceOp::Avg) acc += v;
    if (op == ReduceOp::Max) acc = std::max(acc, v);
    if (op == ReduceOp::Min) acc = std::min(acc, v);
    if (op == ReduceOp::Product) acc *= v;
  }
  return op == ReduceOp::Avg ? acc / n : acc;
}

// Checks got[i] against want(begin + i); stops at the first few mismatches.
template <class F>
void expect_values(const Tensor& t, int64_t begin, F want, const std::string& what) {
  std::vector<double> got = t.to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    double w = want(begin + static_cast<int64_t>(i));
    if (std::abs(got[i] - w) > tolerance(t.dtype()) * std::max(1.0, std::abs(w))) {
      ADD_FAILURE() << what << " element " << begin + static_cast<int64_t>(i) << ": got " << got[i] << ", want " << w;
      ++bad;
    }
  }
}

TEST(DistRing, AllReduceEveryOpDtypeAndSize) {
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
        expect_values(t, 0, [&](int64_t i) { return reduce_all(op, n, i); },
                      std::string(dtype_name(d)) + " " + std::string(dist::reduce_op_name(op)) + " M=" +
                          std::to_string(len));
      }
    }
  }
}

TEST(DistRing, ReduceScatterEveryOpDtypeAndUnevenChunks) {
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
        const std::string what = std::string(dtype_name(d)) + " " + std::string(dist::reduce_op_name(op)) +
                                 " M=" + std::to_string(m);
        expect_values(out, begin, [&](int64_t i) { return reduce_all(op, n, i); }, what);
        EXPECT_TRUE(same_bytes(in, keep)) << what << ": the input was modified";
      }
    }
  }
}

TEST(DistRing, AllGatherEveryDtypeUnevenChunksAndInPlace) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  for (int64_t m : sizes(n)) {
    for (DType d : all_dtypes()) {
      const int64_t begin = world.chunk_begin(m, me), size = world.chunk_size(m, me);
      std::vector<double> mine;
      for (int64_t i = begin; i < begin + size; ++i) mine.push_back(value(0, i) + static_cast<double>(i % 50));
      auto want = [](int64_t i) { return value(0, i) + static_cast<double>(i % 50); };
      const std::string what = std::string(dtype_name(d)) + " M=" + std::to_string(m);
      Tensor out = zeros({m}, {.dtype = d});
      world.all_gather(out, make(mine, d))->wait();
      expect_values(out, 0, want, what);
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

// The ring's documented order for chunk j: rank j+1's value, plus rank j+2's, ..., plus
// rank j's, each addition in the reduction type T (float for 16-bit dtypes).
template <class T>
std::vector<T> ring_order_sum(const std::vector<std::vector<T>>& x, int n, int64_t len) {
  const int64_t c = (len + n - 1) / n;
  std::vector<T> out(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) {
    const int j = static_cast<int>(i / c);
    T acc = x[static_cast<size_t>((j + 1) % n)][static_cast<size_t>(i)];
    for (int k = 2; k <= n; ++k) acc = acc + x[static_cast<size_t>((j + k) % n)][static_cast<size_t>(i)];
    out[static_cast<size_t>(i)] = acc;
  }
  return out;
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

TEST(DistRing, ResultIsBitwiseIdenticalOnEveryRankInRingOrder) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  const int64_t len = 100003;  // above the default threshold in every dtype
  for (DType d : {DType::Float32, DType::Float64, DType::BFloat16}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
      const std::string what = std::string(dtype_name(d)) + " " + std::string(dist::reduce_op_name(op));
      Tensor t = make(random_values(me, len), d);
      world.all_reduce(t, op)->wait();
      expect_identical_on_every_rank(t, what);
      // Exactly the ring's order: proves the ring ran and that its order is the fixed one.
      Tensor want;
      if (d == DType::Float64) {
        std::vector<std::vector<double>> x;
        for (int r = 0; r < n; ++r) x.push_back(random_values(r, len));
        std::vector<double> s = ring_order_sum(x, n, len);
        if (op == ReduceOp::Avg)
          for (auto& v : s) v /= static_cast<double>(n);
        want = from_vector(s, {len}).to(DType::Float64);
      } else {
        std::vector<std::vector<float>> x;
        for (int r = 0; r < n; ++r) x.push_back(make(random_values(r, len), d).to(DType::Float32).to_vector<float>());
        std::vector<float> s = ring_order_sum(x, n, len);
        if (op == ReduceOp::Avg)
          for (auto& v : s) v /= static_cast<float>(n);
        want = from_vector(s, {len}).to(d);
      }
      ASSERT_EQ(want.nbytes(), t.nbytes());
      EXPECT_EQ(std::memcmp(want.raw_data(), t.raw_data(), static_cast<size_t>(t.nbytes())), 0)
          << what << ": not the ring-order sum";
    }
  }
}

TEST(DistRing, ConcurrentRingOpsAndUserSendRecvDoNotMix) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  const int64_t len = 300007;
  Tensor a = full({len}, me + 1.0), b = full({len}, 10.0 * (me + 1), {.dtype = DType::Float64});
  Tensor to_send = full({len}, 100.0 + me), got = zeros({len});
  Tensor rs_in = full({len}, me + 2.0), rs_out = zeros({world.chunk_size(len, me)});
  std::vector<dist::WorkPtr> works;
  works.push_back(world.all_reduce(a));
  works.push_back(world.send(to_send, (me + 1) % n));
  works.push_back(world.all_reduce(b, ReduceOp::Max));
  works.push_back(world.recv(got, (me + n - 1) % n));
  works.push_back(world.reduce_scatter(rs_out, rs_in));
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
  const double sum_ranks = n * (n + 1) / 2.0;
  EXPECT_TRUE(same_bytes(a, full({len}, sum_ranks)));
  EXPECT_TRUE(same_bytes(b, full({len}, 10.0 * n, {.dtype = DType::Float64})));
  EXPECT_TRUE(same_bytes(got, full({len}, 100.0 + (me + n - 1) % n)));
  EXPECT_TRUE(same_bytes(rs_out, full({world.chunk_size(len, me)}, sum_ranks + n)));
}

TEST(DistRing, SubGroups) {
  auto& world = dist::world();
  std::vector<int> members;
  for (int r = world.rank() % 2; r < world.size(); r += 2) members.push_back(r);
  auto g = world.split(members, "parity");
  Tensor t = full({200001}, world.rank());
  g->all_reduce(t)->wait();
  double want = 0;
  for (int r : members) want += r;
  EXPECT_TRUE(same_bytes(t, full({200001}, want)));
  world.barrier()->wait();
}

TEST(DistRing, SkippedRingAllReduceTimesOutNamingTheMissingRank) {
  auto& world = dist::world();
  const int n = world.size();
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  auto g = world.split(all, "faulty");
  g->set_timeout(std::chrono::milliseconds(1500));
  Tensor t = ones({1 << 20});  // 4 MiB: the ring with the default threshold too
  ASSERT_GE(t.nbytes(), ring_min_bytes());
  if (world.rank() != n - 1) {  // the last rank never calls it
    auto start = Clock::now();
    std::string err = error_of([&] { g->all_reduce(t)->wait(); });
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_NE(err.find("all_reduce #0"), std::string::npos) << err;
    EXPECT_NE(err.find("timed out after 1500 ms"), std::string::npos) << err;
    const std::string missing = "ranks " + std::to_string(n - 1) + " of " + std::to_string(n) + " had not reached it";
    EXPECT_NE(err.find(missing), std::string::npos) << err;
    EXPECT_GE(secs, 1.4);
    EXPECT_LT(secs, 4.0);
    err = error_of([&] { g->barrier(); });
    EXPECT_NE(err.find("unusable after an earlier failure"), std::string::npos) << err;
  }
  world.barrier()->wait();
}

}  // namespace
}  // namespace strata
