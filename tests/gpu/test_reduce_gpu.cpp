// The sum over dimensions on a GPU against the CPU sum (label gpu): both run
// strata_kernels/common/dim_reduce.h's order, so results are equal bit for bit, on every plan and
// kernel (rows: a warp per output; columns: 32 lane threads or one thread per output; split
// dimensions: a permuted copy), sizes not a multiple of the lanes or the block, and once above 2^24 elements. The
// output's memory is poisoned with NaN before each launch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gpu/gpu_test.h"
#include "strata/strata.h"
#include "test_util.h"

namespace strata {
namespace {

using ReduceGpu = testing::GpuTest;
using testing::poison;
using testing::same_bits;

// Values of very different magnitudes: any other order would round differently.
Tensor spread(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  Tensor a = randn(shape, {.dtype = DType::Float64}, &gen);
  Tensor b = randn(shape, {.dtype = DType::Float64}, &gen);
  return mul(a, exp(mul(b, 6.0))).to(dtype);
}

struct Case {
  Shape shape;
  std::vector<int64_t> dims;
};

TEST_F(ReduceGpu, SumEqualsTheCpuBitForBit) {
  const std::vector<Case> cases = {
      {{1000, 96}, {0}},         {{1024, 768}, {0}},     {{7, 133}, {1}},
      {{3, 77, 5}, {1}},         {{4, 6, 5, 3}, {1, 2}}, {{4, 6, 5}, {0, 2}},
      {{2, 1, 9, 1}, {1, 2, 3}}, {{5, 3}, {0}},          {{40000}, {0}},
      {{257, 259}, {0, 1}},      {{2, 3}, {}},           {{0, 4}, {0}},
      {{70, 10, 1000}, {1}},     {{3, 45, 33}, {1}},  // columns: a thread per output; 32 lanes per column
  };
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Case& c : cases) {
      const Tensor x = spread(c.shape, dtype, 11);
      const Tensor want = sum(x, c.dims, true);
      poison(want.numel(), dtype);
      const Tensor got = sum(x.to(gpu), c.dims, true);
      EXPECT_EQ(got.device(), gpu);
      EXPECT_TRUE(same_bits(got.to(Device::cpu()), want)) << c.shape << " dtype " << dtype;
    }
  }
  const Tensor ints = arange(0, 3 * 70 * 4, 1, {.dtype = DType::Int64}).view({3, 70, 4});
  EXPECT_TRUE(same_bits(sum(ints.to(gpu), {1}).to(Device::cpu()), sum(ints, {1})));
  EXPECT_TRUE(
      same_bits(sum(ints.to(DType::Int32).to(gpu), {0, 2}).to(Device::cpu()), sum(ints.to(DType::Int32), {0, 2})));
}

TEST_F(ReduceGpu, TransposedInputAndAbove2To24Elements) {
  const Tensor x = spread({300, 50}, DType::Float32, 12);
  const Tensor xt = x.to(gpu).transpose(0, 1);  // strided on the device
  EXPECT_TRUE(same_bits(sum(xt, {0}).to(Device::cpu()), sum(x.transpose(0, 1), {0})));
  // (2^24 + 3) elements: one long row, and as [rows, 5] columns.
  const int64_t big = (int64_t{1} << 24) + 5 * 7;
  const Tensor y = spread({big / 5, 5}, DType::Float32, 13);
  const Tensor yg = y.to(gpu);
  poison(5, DType::Float32);
  EXPECT_TRUE(same_bits(sum(yg, {0}).to(Device::cpu()), sum(y, {0})));
  EXPECT_TRUE(same_bits(sum(yg).to(Device::cpu()), sum(y)));
  EXPECT_TRUE(same_bits(mean(yg, {1}).to(Device::cpu()), mean(y, {1})));
}

TEST_F(ReduceGpu, MeanSumToAndGradientsEqualTheCpu) {
  const Tensor x = spread({8, 33, 20}, DType::Float64, 14);
  EXPECT_TRUE(same_bits(mean(x.to(gpu), {0, 1}).to(Device::cpu()), mean(x, {0, 1})));
  EXPECT_TRUE(same_bits(sum_to(x.to(gpu), {33, 1}).to(Device::cpu()), sum_to(x, {33, 1})));
  // A broadcast add's backward reduces the bias gradient with the sum.
  Tensor a = x.detach(), b = spread({20}, DType::Float64, 15);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  Tensor ga = x.to(gpu), gb = b.detach().to(gpu);
  ga.set_requires_grad(true);
  gb.set_requires_grad(true);
  sum(mul(add(a, b), a)).backward();
  sum(mul(add(ga, gb), ga)).backward();
  EXPECT_TRUE(same_bits(gb.grad().to(Device::cpu()), b.grad()));
  EXPECT_TRUE(same_bits(ga.grad().to(Device::cpu()), a.grad()));
}

TEST_F(ReduceGpu, BadInputs) {
  testing::expect_error_mentions([&] { (void)sum(zeros({4}, {.dtype = DType::BFloat16}).to(gpu)); },
                                 {"sum", "bfloat16", "CUDA"});
}

}  // namespace
}  // namespace strata
