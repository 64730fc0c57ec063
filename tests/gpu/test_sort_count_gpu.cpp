// sort / argsort / nonzero / bincount / einsum on CUDA against the CPU: sort and nonzero
// bit for bit (both sort common/sort_key.h's keys stably; nonzero counts with the same
// is_nonzero), integer bincount exactly, weighted bincount (atomic adds in any order) within
// gamma(n) of the float64 sums, einsum and broadcast matmul within the GEMM bound the other
// matmul GPU tests use (float64: 1e-12 relative).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gpu/gpu_test.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::rel_err;

namespace {

void expect_identical(const Tensor& gpu, const Tensor& cpu, const char* what) {
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  ASSERT_EQ(gpu.dtype(), cpu.dtype()) << what;
  const std::vector<double> g = gpu.to(Device::cpu()).to_vector<double>(), c = cpu.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    const bool same =
        (std::isnan(g[i]) && std::isnan(c[i])) || (g[i] == c[i] && std::signbit(g[i]) == std::signbit(c[i]));
    EXPECT_TRUE(same) << what << " element " << i << ": " << g[i] << " vs " << c[i];
  }
}

class SortCountGpuTest : public strata::testing::GpuTest {};

}  // namespace

TEST_F(SortCountGpuTest, SortMatchesCpuBitForBit) {
  Generator gen(3);
  Tensor x = randint(0, 5, {37, 129}, {.dtype = DType::Int64}, &gen).to(DType::Float32);  // many ties
  std::vector<float> v = x.to_vector<float>();
  v[3] = std::numeric_limits<float>::quiet_NaN();
  v[7] = -0.0f;
  v[200] = -std::numeric_limits<float>::infinity();
  x = from_vector(v, x.shape());
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    const Tensor c = dt == DType::Float32 || dt == DType::Float64 ? x.to(dt) : x.narrow(0, 1, 36).to(dt);
    const Tensor g = c.to(Device::cuda(0));
    for (int64_t dim : {0, 1}) {
      for (bool desc : {false, true}) {
        const ValuesIndices rc = sort(c, dim, desc), rg = sort(g, dim, desc);
        expect_identical(rg.values, rc.values, "values");
        expect_identical(rg.indices, rc.indices, "indices");
      }
    }
  }
  expect_identical(argsort(x.to(Device::cuda(0)), 1, true), argsort(x, 1, true), "argsort");
  EXPECT_EQ(sort(zeros({4, 0}, {.device = Device::cuda(0)})).values.shape(), Shape({4, 0}));
}

TEST_F(SortCountGpuTest, SortGradientMatchesCpu) {
  Generator gen(4);
  const Tensor x = randint(0, 3, {6, 9}, {.dtype = DType::Int64}, &gen).to(DType::Float64);
  const Tensor w = randn({6, 9}, {.dtype = DType::Float64}, &gen);
  Tensor xc = x.clone().set_requires_grad(true), xg = x.to(Device::cuda(0)).set_requires_grad(true);
  sum(mul(sort(xc, 1).values, w)).backward();
  sum(mul(sort(xg, 1).values, w.to(Device::cuda(0)))).backward();
  expect_identical(xg.grad(), xc.grad(), "sort gradient");
}

TEST_F(SortCountGpuTest, NonzeroMatchesCpu) {
  Generator gen(5);
  const Tensor x = randint(0, 3, {7, 5, 33}, {.dtype = DType::Int64}, &gen);
  expect_identical(nonzero(x.to(Device::cuda(0))), nonzero(x), "int64");
  expect_identical(nonzero(x.to(DType::Float32).to(Device::cuda(0))), nonzero(x.to(DType::Float32)), "float32");
  const Tensor b = gt(x, 1.0);
  expect_identical(nonzero(b.to(Device::cuda(0))), nonzero(b), "bool");
  EXPECT_EQ(nonzero(zeros({3, 4}, {.device = Device::cuda(0)})).shape(), Shape({0, 2}));
}

TEST_F(SortCountGpuTest, BincountMatchesCpu) {
  Generator gen(6);
  const Tensor x = randint(0, 50, {5000}, {.dtype = DType::Int64}, &gen);
  expect_identical(bincount(x.to(Device::cuda(0)), {}, 64), bincount(x, {}, 64), "counts");
  const Tensor w = rand({5000}, {.dtype = DType::Float64}, &gen);
  const Tensor wg = w.to(Device::cuda(0)).set_requires_grad(true);
  const Tensor sg = bincount(x.to(Device::cuda(0)), wg);
  // Non-negative terms summed in any order: within gamma_n relative of each bin (n <= 5000).
  EXPECT_LT(rel_err(sg.to(Device::cpu()), bincount(x, w)), 5000 * std::ldexp(1.0, -53) * 1.01);
  sum(mul(sg, sg.detach())).backward();
  expect_identical(wg.grad(), index_select(sg.detach().to(Device::cpu()), 0, x), "weights gradient");
  EXPECT_THROW(bincount(from_vector(std::vector<int64_t>{0, -1}, {2}).to(Device::cuda(0))), Error);
}

TEST_F(SortCountGpuTest, EinsumMatchesCpu) {
  Generator gen(7);
  const Tensor q = randn({2, 3, 4, 8}, {.dtype = DType::Float64}, &gen),
               k = randn({2, 3, 5, 8}, {.dtype = DType::Float64}, &gen);
  const Tensor c = einsum("bhqd,bhkd->bhqk", {q, k});
  const Tensor g = einsum("bhqd,bhkd->bhqk", {q.to(Device::cuda(0)), k.to(Device::cuda(0))});
  EXPECT_LT(rel_err(g.to(Device::cpu()), c), 1e-12);
  const Tensor a = randn({2, 1, 3, 4}, {.dtype = DType::Float64}, &gen),
               b = randn({5, 4, 6}, {.dtype = DType::Float64}, &gen);
  EXPECT_LT(rel_err(matmul(a.to(Device::cuda(0)), b.to(Device::cuda(0))).to(Device::cpu()), matmul(a, b)), 1e-12);
}
