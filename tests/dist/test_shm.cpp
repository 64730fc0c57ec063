// The MPI backend's shared-memory collectives (src/dist/mpi/shm_collectives.h) behind
// all_reduce, reduce_scatter and all_gather when every rank of a group is on one node.
// Registered with STRATA_MPI_SHM_MIN_BYTES=0 and 4 KiB slots (every such op of 2+ ranks
// takes shared memory and spans many slot pieces), on 2, 3 and 4 ranks, and with direct
// reads (CMA) forced on and off (tests/CMakeLists.txt).
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
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

const std::vector<ReduceOp>& all_ops() {
  static const std::vector<ReduceOp> v{ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min,
                                       ReduceOp::Product};
  return v;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() &&
         std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.nbytes())) == 0;
}

// Sizes not divisible by N, smaller than N (empty chunks), and spanning many 4 KiB slot
// pieces in every dtype.
std::vector<int64_t> sizes(int n) { return {1, n - 1, n + 1, 1003, 5000, 70001}; }

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

// What every rank computes on its own from the values above.
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

std::string name_of(DType d, ReduceOp op, int64_t m) {
  return std::string(dtype_name(d)) + " " + std::string(dist::reduce_op_name(op)) + " M=" + std::to_string(m);
}

TEST(DistShm, AllReduceEveryOpDtypeAndSize) {
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
        expect_values(t, 0, [&](int64_t i) { return reduce_all(op, n, i); }, name_of(d, op, len));
      }
    }
  }
}

TEST(DistShm, ReduceScatterEveryOpDtypeAndUnevenChunks) {
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
        expect_values(out, begin, [&](int64_t i) { return reduce_all(op, n, i); }, name_of(d, op, m));
        EXPECT_TRUE(same_bytes(in, keep)) << name_of(d, op, m) << ": the input was modified";
      }
    }
  }
}

TEST(DistShm, AllGatherEveryDtypeUnevenChunksAndInPlace) {
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

// The documented order: ((x0 + x1) + x2) + ... in the reduction type T (float for 16-bit).
template <class T>
std::vector<T> rank_order_sum(const std::vector<std::vector<T>>& x, int64_t len) {
  std::vector<T> out(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) {
    T acc = x[0][static_cast<size_t>(i)];
    for (size_t r = 1; r < x.size(); ++r) acc = acc + x[r][static_cast<size_t>(i)];
    out[static_cast<size_t>(i)] = acc;
  }
  return out;
}

TEST(DistShm, ResultIsBitwiseIdenticalOnEveryRankInRankOrder) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  const int64_t len = 100003;
  for (DType d : {DType::Float32, DType::Float64, DType::BFloat16}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
      const std::string what = std::string(dtype_name(d)) + " " + std::string(dist::reduce_op_name(op));
      Tensor t = make(random_values(me, len), d);
      world.all_reduce(t, op)->wait();
      expect_identical_on_every_rank(t, what);
      // reduce_scatter's chunk is the same bits as the all_reduce's.
      Tensor rs = zeros({world.chunk_size(len, me)}, {.dtype = d});
      world.reduce_scatter(rs, make(random_values(me, len), d), op)->wait();
      EXPECT_TRUE(same_bytes(rs, t.narrow(0, world.chunk_begin(len, me), world.chunk_size(len, me)).contiguous()))
          << what << ": reduce_scatter differs from all_reduce";
      // Exactly rank order (on 3+ ranks this tells it from the ring's order).
      Tensor want;
      if (d == DType::Float64) {
        std::vector<std::vector<double>> x;
        for (int r = 0; r < n; ++r) x.push_back(random_values(r, len));
        std::vector<double> s = rank_order_sum(x, len);
        if (op == ReduceOp::Avg)
          for (auto& v : s) v /= static_cast<double>(n);
        want = from_vector(s, {len}).to(DType::Float64);
      } else {
        std::vector<std::vector<float>> x;
        for (int r = 0; r < n; ++r) x.push_back(make(random_values(r, len), d).to(DType::Float32).to_vector<float>());
        std::vector<float> s = rank_order_sum(x, len);
        if (op == ReduceOp::Avg)
          for (auto& v : s) v /= static_cast<float>(n);
        want = from_vector(s, {len}).to(d);
      }
      ASSERT_EQ(want.nbytes(), t.nbytes());
      EXPECT_EQ(std::memcmp(want.raw_data(), t.raw_data(), static_cast<size_t>(t.nbytes())), 0)
          << what << ": not the rank-order sum";
    }
  }
}

TEST(DistShm, ConcurrentOpsOfOneGroupAndUserSendRecv) {
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

TEST(DistShm, ManyOpsInARowReuseTheSlots) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  for (int i = 0; i < 50; ++i) {
    const int64_t len = 1000 + 977 * i;
    Tensor t = full({len}, static_cast<double>(me + i));
    world.all_reduce(t)->wait();
    ASSERT_TRUE(same_bytes(t, full({len}, n * (n - 1) / 2.0 + n * i))) << "op " << i;
  }
}

// Sub-groups: a 2 x 2 mesh on 4 ranks (rows and columns, each its own arena), parity
// groups otherwise.
TEST(DistShm, SubGroups) {
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

TEST(DistShm, SkippedOpTimesOutNamingTheMissingRank) {
  auto& world = dist::world();
  const int n = world.size();
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  for (const char* kind : {"all_reduce", "all_gather", "reduce_scatter"}) {
    auto g = world.split(all, std::string("faulty_") + kind);
    g->set_timeout(std::chrono::milliseconds(1500));
    const int64_t m = 1 << 20;
    Tensor t = ones({m}), out = zeros({m}), chunk = ones({g->chunk_size(m, g->rank())});
    if (world.rank() != n - 1) {  // the last rank never calls it
      auto start = Clock::now();
      std::string err = error_of([&] {
        if (std::string(kind) == "all_reduce") g->all_reduce(t)->wait();
        if (std::string(kind) == "all_gather") g->all_gather(out, chunk)->wait();
        if (std::string(kind) == "reduce_scatter") g->reduce_scatter(chunk, t)->wait();
      });
      double secs = std::chrono::duration<double>(Clock::now() - start).count();
      EXPECT_NE(err.find(std::string(kind) + " #0"), std::string::npos) << err;
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
}

// Where the kernel refuses direct reads (here: every rank non-dumpable and without
// CAP_SYS_PTRACE, as under ptrace restrictions), a group made afterwards with CMA forced
// on finds out at creation and uses the slots on every rank; an op reading a peer directly
// would fail with EPERM. The world (made with CMA on) runs no shared-memory op until the
// process is restored.
class RefuseDirectReads {
 public:
  RefuseDirectReads() {
    EXPECT_EQ(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), 0);
    EXPECT_EQ(syscall(SYS_capget, &header_, saved_), 0);
    __user_cap_data_struct caps[2] = {saved_[0], saved_[1]};
    caps[0].effective &= ~(1u << CAP_SYS_PTRACE);
    EXPECT_EQ(syscall(SYS_capset, &header_, caps), 0);
  }
  ~RefuseDirectReads() {
    syscall(SYS_capset, &header_, saved_);
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  }

 private:
  __user_cap_header_struct header_{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct saved_[2] = {};
};

// Whether every rank's read of its right neighbour is refused (pids and addresses through
// all_to_all, which is MPI's own collective).
bool direct_reads_refused() {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  static int64_t probe = 42;
  std::vector<double> mine;
  for (int r = 0; r < n; ++r) {
    mine.push_back(static_cast<double>(getpid()));
    mine.push_back(static_cast<double>(reinterpret_cast<uintptr_t>(&probe)));
  }
  Tensor in = make(mine, DType::Int64), all = zeros({2 * n}, {.dtype = DType::Int64});
  world.all_to_all(all, in)->wait();
  const std::vector<int64_t> v = all.to_vector<int64_t>();
  const int peer = (me + 1) % n;
  int64_t got = 0;
  iovec local{&got, sizeof(got)};
  iovec remote{reinterpret_cast<void*>(v[static_cast<size_t>(2 * peer + 1)]), sizeof(got)};
  const pid_t pid = static_cast<pid_t>(v[static_cast<size_t>(2 * peer)]);
  const bool refused = process_vm_readv(pid, &local, 1, &remote, 1, 0) < 0 && errno == EPERM;
  Tensor flags = full({n}, refused ? 1.0 : 0.0, {.dtype = DType::Int32});
  Tensor every = zeros({n}, {.dtype = DType::Int32});
  world.all_to_all(every, flags)->wait();
  for (int32_t f : every.to_vector<int32_t>())
    if (f == 0) return false;
  return true;
}

TEST(DistShm, DirectReadsRefusedByTheKernelFallBackToSlots) {
  const char* cma = std::getenv("STRATA_MPI_SHM_CMA");
  if (cma == nullptr || std::string(cma) != "1") GTEST_SKIP() << "runs with STRATA_MPI_SHM_CMA=1";
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  bool refused = false;
  {
    RefuseDirectReads refuse;
    refused = direct_reads_refused();
    if (refused) {
      std::vector<int> members;
      for (int r = 0; r < n; ++r) members.push_back(r);
      auto g = world.split(members, "cma_refused");
      const int64_t m = 100003;
      Tensor t = full({m}, me + 1.0);
      g->all_reduce(t)->wait();
      EXPECT_TRUE(same_bytes(t, full({m}, n * (n + 1) / 2.0)));
      Tensor out = zeros({g->chunk_size(m, me)});
      g->reduce_scatter(out, full({m}, 2.0 * me))->wait();
      EXPECT_TRUE(same_bytes(out, full({g->chunk_size(m, me)}, n * (n - 1) * 1.0)));
      Tensor gathered = zeros({m});
      g->all_gather(gathered, full({g->chunk_size(m, me)}, 5.0))->wait();
      EXPECT_TRUE(same_bytes(gathered, full({m}, 5.0)));
    }
    world.barrier()->wait();  // every rank done with the refused state
  }
  world.barrier()->wait();  // every rank restored before the world's next op reads it
  if (!refused) GTEST_SKIP() << "the kernel still allows direct reads here";
}

}  // namespace
}  // namespace strata
