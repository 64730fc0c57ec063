// ProcessGroupNCCL (label gpu), under mpirun: at world size 1 on a one-GPU machine (NCCL
// allows one rank per GPU), and at larger sizes where there are as many GPUs. Skips where no
// GPU is visible or strata was built without NCCL.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "distributed/dist_test_util.h"
#include "gpu/all_to_all_v_gpu_check.h"
#include "strata/tensor/allocator.h"
#include "strata/tensor/cuda.h"

namespace strata {
namespace {

using test::all_dtypes;
using test::error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class Nccl : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!dist::nccl_is_built() || !cuda::is_available()) return;
    if (cuda::device_count() < dist::world().size()) return;  // one rank per GPU
    group_ = dist::new_nccl_group(dist::world()).release();
  }
  static void TearDownTestSuite() {
    delete group_;
    group_ = nullptr;
  }
  void SetUp() override {
    if (!dist::nccl_is_built()) GTEST_SKIP() << "strata was built without NCCL";
    if (!cuda::is_available()) GTEST_SKIP() << "no GPU visible";
    if (group_ == nullptr) GTEST_SKIP() << "fewer GPUs than ranks (NCCL allows one rank per GPU)";
  }
  dist::ProcessGroup& g() { return *group_; }
  Device gpu() const { return Device::cuda(cuda::current_device()); }
  Tensor on_gpu(const std::vector<double>& v, DType d) { return test::make(v, d).to(gpu()); }
  static dist::ProcessGroup* group_;
};
dist::ProcessGroup* Nccl::group_ = nullptr;

TEST_F(Nccl, GroupMirrorsTheWorld) {
  EXPECT_EQ(g().size(), dist::world().size());
  EXPECT_EQ(g().rank(), dist::world().rank());
  EXPECT_EQ(g().name(), "nccl(world)");
}

TEST_F(Nccl, AllReduceEveryDtypeAndOp) {
  const int n = g().size(), r = g().rank();
  const double rank_sum = n * (n - 1) / 2.0;
  for (DType d : all_dtypes()) {
    Tensor t = on_gpu({1.0 + r, 2.0 + r, 3.0 + r}, d);
    g().all_reduce(t)->wait();  // stream-ordered: to_vector's copy runs after the op
    EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{n + rank_sum, 2 * n + rank_sum, 3 * n + rank_sum})) << d;
    Tensor m = on_gpu({1.0 + r, -1.0 * r}, d);
    g().all_reduce(m, dist::ReduceOp::Max)->synchronize();
    EXPECT_EQ(m.to_vector<double>(), (std::vector<double>{1.0 + n - 1, 0.0})) << d;
    Tensor mn = on_gpu({1.0 + r}, d);
    g().all_reduce(mn, dist::ReduceOp::Min)->wait();
    EXPECT_EQ(mn.to_vector<double>()[0], 1.0) << d;
    Tensor p = on_gpu({2.0}, d);
    g().all_reduce(p, dist::ReduceOp::Product)->wait();
    EXPECT_EQ(p.to_vector<double>()[0], std::pow(2.0, n)) << d;
    Tensor a = on_gpu({2.0 * r, 4.0}, d);
    if (is_floating(d)) {
      g().all_reduce(a, dist::ReduceOp::Avg)->wait();
      EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{static_cast<double>(n - 1), 4.0})) << d;
    } else {
      EXPECT_TRUE(contains(error_of([&] { g().all_reduce(a, dist::ReduceOp::Avg); }), "floating dtype")) << d;
    }
  }
}

TEST_F(Nccl, BroadcastEveryDtype) {
  for (DType d : all_dtypes()) {
    Tensor t = on_gpu({g().rank() == 0 ? 5.0 : 0.0, 6.0 * (g().rank() == 0)}, d);
    g().broadcast(t, 0)->wait();
    EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{5, 6})) << d;
  }
}

TEST_F(Nccl, AllGatherEvenAndUneven) {
  const int n = g().size(), r = g().rank();
  for (DType d : all_dtypes()) {
    for (int64_t m : {int64_t{2} * n, int64_t{2} * n + 1, int64_t{0}}) {
      Tensor out = zeros({m}, {.dtype = d, .device = gpu()});
      Tensor in = full({g().chunk_size(m, r)}, r + 1, {.dtype = d, .device = gpu()});
      g().all_gather(out, in)->wait();
      std::vector<double> expect;
      for (int q = 0; q < n; ++q)
        for (int64_t i = 0; i < g().chunk_size(m, q); ++i) expect.push_back(q + 1);
      EXPECT_EQ(out.to_vector<double>(), expect) << d << " M=" << m;
    }
  }
  // In place: `in` is this rank's chunk of `out`.
  Tensor out = zeros({2 * n}, {.device = gpu()});
  Tensor mine = out.narrow(0, 2 * r, 2);
  mine.fill_(r + 1);
  g().all_gather(out, mine)->wait();
  EXPECT_EQ(out.to_vector<double>()[static_cast<size_t>(2 * n - 1)], n);
}

TEST_F(Nccl, ReduceScatterEvenAndUneven) {
  const int n = g().size(), r = g().rank();
  for (DType d : all_dtypes()) {
    for (int64_t m : {int64_t{3} * n, int64_t{3} * n + 2}) {
      std::vector<double> v(static_cast<size_t>(m));
      std::iota(v.begin(), v.end(), 1.0);
      Tensor in = on_gpu(v, d);
      Tensor out = zeros({g().chunk_size(m, r)}, {.dtype = d, .device = gpu()});
      g().reduce_scatter(out, in)->wait();
      std::vector<double> expect;
      for (int64_t i = 0; i < out.numel(); ++i) expect.push_back(n * v[static_cast<size_t>(g().chunk_begin(m, r) + i)]);
      EXPECT_EQ(out.to_vector<double>(), expect) << d << " M=" << m;
    }
  }
}

TEST_F(Nccl, AllToAll) {
  const int n = g().size(), r = g().rank();
  std::vector<double> v;
  for (int q = 0; q < n; ++q) v.insert(v.end(), {100.0 * r + q, 100.0 * r + q});
  for (DType d : {DType::Float32, DType::Int64, DType::BFloat16}) {
    Tensor in = on_gpu(v, d);
    Tensor out = zeros({2 * n}, {.dtype = d, .device = gpu()});
    g().all_to_all(out, in)->wait();
    std::vector<double> expect;
    for (int q = 0; q < n; ++q) expect.insert(expect.end(), {100.0 * q + r, 100.0 * q + r});
    EXPECT_EQ(out.to_vector<double>(), expect) << d;
  }
}

TEST_F(Nccl, AllToAllVAndItsGradient) { test::check_all_to_all_v_on_gpu(g(), gpu()); }

TEST_F(Nccl, SendRecvAndBatch) {
  const int n = g().size(), r = g().rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (DType d : all_dtypes()) {
    Tensor mine = on_gpu({1.0 + r, 2.0 + r}, d);
    Tensor got = zeros({2}, {.dtype = d, .device = gpu()});
    // Every rank sends first: only a batch (one NCCL group call) can do this without deadlock.
    std::vector<dist::P2POp> ops{dist::P2POp::send(mine, next), dist::P2POp::recv(got, prev)};
    g().batch_send_recv(ops)->synchronize();
    EXPECT_EQ(got.to_vector<double>(), (std::vector<double>{1.0 + prev, 2.0 + prev})) << d;
  }
  if (n >= 2) {
    Tensor t = on_gpu({7, 8}, DType::Float32);
    if (r == 0) g().send(t, 1)->wait();
    if (r == 1) {
      Tensor u = zeros({2}, {.device = gpu()});
      g().recv(u, 0)->wait();
      EXPECT_EQ(u.to_vector<float>(), (std::vector<float>{7, 8}));
    }
  }
}

TEST_F(Nccl, BarrierSynchronizeAndCompletion) {
  dist::WorkPtr w = g().barrier();
  w->synchronize(std::chrono::seconds(20));
  EXPECT_TRUE(w->is_completed());
  Tensor t = ones({1 << 20}, {.device = gpu()});
  dist::WorkPtr a = g().all_reduce(t);
  a->synchronize();
  EXPECT_TRUE(a->is_completed());
  EXPECT_EQ(t.to_vector<float>()[12345], static_cast<float>(g().size()));
}

TEST_F(Nccl, StatsCountCallsAndBytes) {
  g().reset_stats();
  Tensor t = zeros({4}, {.device = gpu()});
  g().all_reduce(t)->wait();
  g().all_reduce(t)->wait();
  Tensor big = zeros({2 * g().size()}, {.dtype = DType::Float64, .device = gpu()});
  g().all_gather(big, zeros({2}, {.dtype = DType::Float64, .device = gpu()}))->wait();
  dist::CommStats s = g().stats();
  EXPECT_EQ(s[dist::OpType::AllReduce].calls, 2u);
  EXPECT_EQ(s[dist::OpType::AllReduce].bytes, 32u);
  EXPECT_EQ(s[dist::OpType::AllGather].calls, 1u);
  EXPECT_EQ(s[dist::OpType::AllGather].bytes, 16u);
  const int r = g().rank(), n = g().size();
  Tensor a = zeros({3}, {.device = gpu()}), b = zeros({3}, {.device = gpu()});
  std::vector<dist::P2POp> ops{dist::P2POp::send(a, (r + 1) % n), dist::P2POp::recv(b, (r + n - 1) % n)};
  g().batch_send_recv(ops)->wait();
  s = g().stats();
  EXPECT_EQ(s[dist::OpType::Send].calls, 1u);
  EXPECT_EQ(s[dist::OpType::Recv].bytes, 12u);
}

TEST_F(Nccl, SplitIntoSubGroups) {
  const int n = g().size(), r = g().rank();
  std::vector<int> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  auto sub = g().split(all, "nccl-copy");
  EXPECT_EQ(sub->size(), n);
  EXPECT_EQ(sub->name(), "nccl-copy");
  Tensor t = full({2}, r + 1, {.device = gpu()});
  sub->all_reduce(t)->wait();
  EXPECT_EQ(t.to_vector<double>()[0], n * (n + 1) / 2.0);
  // Singletons: every rank its own group.
  std::vector<int> me{r};
  auto alone = g().split(me, "");
  EXPECT_EQ(alone->size(), 1);
  Tensor u = full({1}, 3, {.device = gpu()});
  alone->all_reduce(u)->wait();
  EXPECT_EQ(u.to_vector<double>()[0], 3.0);
}

// Every tensor an op uses has the comm stream recorded (the caching allocator protects its
// block too); destroying the group retires the stream. A tensor that outlives its group
// therefore goes back to the cache once freed: not stuck pending on a destroyed stream.
TEST_F(Nccl, TensorOutlivingItsGroupReturnsToTheCache) {
  std::vector<int> all(static_cast<size_t>(g().size()));
  std::iota(all.begin(), all.end(), 0);
  const int device = cuda::current_device();
  cuda::synchronize();
  const size_t pending_before = cuda_allocator::stats(device).pending_bytes;
  Tensor t = full({1000}, 1.0, {.device = gpu()});
  void* block = t.storage()->data();
  {
    auto sub = g().split(all, "nccl-short-lived");
    sub->all_reduce(t)->synchronize();
  }
  t = Tensor();
  cuda::synchronize();
  EXPECT_EQ(cuda_allocator::stats(device).pending_bytes, pending_before);
  Tensor u = empty({1000}, {.device = gpu()});
  EXPECT_EQ(u.storage()->data(), block);
}

TEST_F(Nccl, BadInputIsNamed) {
  Tensor cpu = ones({4});
  std::string err = error_of([&] { g().all_reduce(cpu); });
  EXPECT_TRUE(contains(err, "is on cpu")) << err;
  EXPECT_TRUE(contains(err, "nccl(world)")) << err;
  Tensor m = zeros({4, 4}, {.device = gpu()});
  Tensor col = m.narrow(1, 0, 1);
  EXPECT_TRUE(contains(error_of([&] { g().all_reduce(col); }), "not contiguous"));
  Tensor out = zeros({8 * g().size()}, {.device = gpu()});
  Tensor wrong = zeros({3}, {.device = gpu()});
  EXPECT_TRUE(contains(error_of([&] { g().all_gather(out, wrong); }), "chunk"));
  EXPECT_TRUE(contains(error_of([&] { g().broadcast(m, g().size()); }), "out of range"));
  // The group is still usable.
  Tensor ok = ones({2}, {.device = gpu()});
  g().all_reduce(ok)->wait();
  EXPECT_EQ(ok.to_vector<float>()[0], static_cast<float>(g().size()));
}

}  // namespace
}  // namespace strata
