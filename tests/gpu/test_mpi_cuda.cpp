// CUDA tensors through the MPI group (label gpu, 2 ranks): host staging lets several ranks
// share one GPU, which NCCL refuses. Skips where no GPU is visible.
#include <gtest/gtest.h>

#include "distributed/dist_test_util.h"
#include "gpu/all_to_all_v_gpu_check.h"
#include "strata/tensor/cuda.h"

namespace strata {
namespace {

using test::all_dtypes;
using test::error_of;

class MpiCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no GPU visible";
  }
  Device gpu() const { return Device::cuda(cuda::current_device()); }
  Tensor on_gpu(const std::vector<double>& v, DType d) { return test::make(v, d).to(gpu()); }
};

TEST_F(MpiCuda, CollectivesEveryDtype) {
  auto& w = dist::world();
  const int n = w.size(), r = w.rank();
  for (DType d : all_dtypes()) {
    Tensor t = on_gpu({1.0 + r, 2.0}, d);
    w.all_reduce(t)->wait();
    EXPECT_EQ(t.device(), gpu());
    EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{n + n * (n - 1) / 2.0, 2.0 * n})) << d;

    Tensor b = on_gpu({r == 1 ? 9.0 : 0.0}, d);
    w.broadcast(b, 1 % n)->wait();
    EXPECT_EQ(b.to_vector<double>()[0], n > 1 ? 9.0 : 0.0) << d;

    const int64_t m = 2 * n + 1;
    Tensor out = zeros({m}, {.dtype = d, .device = gpu()});
    Tensor in = full({w.chunk_size(m, r)}, r + 1, {.dtype = d, .device = gpu()});
    w.all_gather(out, in)->wait();
    std::vector<double> expect;
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < w.chunk_size(m, q); ++i) expect.push_back(q + 1);
    EXPECT_EQ(out.to_vector<double>(), expect) << d;

    Tensor rs_in = ones({m}, {.dtype = d, .device = gpu()});
    Tensor rs_out = zeros({w.chunk_size(m, r)}, {.dtype = d, .device = gpu()});
    w.reduce_scatter(rs_out, rs_in)->wait();
    EXPECT_EQ(rs_out.to_vector<double>(), std::vector<double>(static_cast<size_t>(rs_out.numel()), n)) << d;
  }
}

TEST_F(MpiCuda, AllToAllVAndItsGradient) { test::check_all_to_all_v_on_gpu(dist::world(), gpu()); }

TEST_F(MpiCuda, PointToPointAndBatch) {
  auto& w = dist::world();
  const int n = w.size(), r = w.rank();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  Tensor mine = on_gpu({10.0 + r, 20.0 + r}, DType::Float32);
  Tensor got = zeros({2}, {.device = gpu()});
  std::vector<dist::P2POp> ops{dist::P2POp::send(mine, next), dist::P2POp::recv(got, prev)};
  w.batch_send_recv(ops)->wait();
  EXPECT_EQ(got.to_vector<float>(), (std::vector<float>{10.0f + prev, 20.0f + prev}));
  // A CPU tensor sent into a CUDA receive.
  Tensor host = from_vector<float>({5, 6}, {2});
  Tensor dev = zeros({2}, {.device = gpu()});
  if (r == 0) w.send(host, 1)->wait();
  if (r == 1) {
    dist::WorkPtr wk = w.recv(dev, 0);
    wk->synchronize();
    EXPECT_EQ(dev.to_vector<float>(), (std::vector<float>{5, 6}));
  }
}

TEST_F(MpiCuda, NcclNeedsOneGpuPerRank) {
  if (!dist::nccl_is_built()) GTEST_SKIP() << "strata was built without NCCL";
  auto& w = dist::world();
  if (cuda::device_count() >= w.size()) {
    auto g = dist::new_nccl_group(w);
    Tensor t = ones({3}, {.device = gpu()});
    g->all_reduce(t)->wait();
    EXPECT_EQ(t.to_vector<float>()[0], static_cast<float>(w.size()));
  } else {
    std::string err = error_of([&] { (void)dist::new_nccl_group(w); });
    EXPECT_NE(err.find("one rank per GPU"), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace strata
