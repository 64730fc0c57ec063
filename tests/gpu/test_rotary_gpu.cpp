// Rotary position embedding on a GPU against the CPU (label gpu): both run
// strata_kernels/common/rotary.h's functors, so forward and backward are equal bit for bit.
// Outputs are poisoned first; mixed devices fail naming the inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gpu/gpu_test.h"
#include "strata/strata.h"
#include "test_util.h"

namespace strata {
namespace {

using RotaryGpu = testing::GpuTest;
using testing::poison;
using testing::same_bits;

TEST_F(RotaryGpu, ForwardAndBackwardEqualTheCpuBitForBit) {
  // [B, H, T, D]; the last has 2^24 + 2^17 elements, T * D / 2 not a multiple of the block.
  const std::vector<Shape> shapes = {{2, 3, 5, 8}, {1, 4, 37, 6}, {3, 2, 129, 64}, {2, 1, 4225, 2000}};
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& s : shapes) {
      if (dtype == DType::Float64 && s.numel() > (int64_t{1} << 22)) continue;
      Generator gen(31);
      const RotaryTables tab = rotary_tables(s[2], s[3], 10000.0, 3, dtype);
      Tensor x = randn(s, {.dtype = dtype}, &gen);
      const Tensor g = randn(s, {.dtype = dtype}, &gen);
      x.set_requires_grad(true);
      Tensor xg = x.detach().to(gpu);
      xg.set_requires_grad(true);
      const Tensor want = rotary_embedding(x, tab.cos, tab.sin);
      poison(want.numel(), dtype);
      const Tensor got = rotary_embedding(xg, tab.cos.to(gpu), tab.sin.to(gpu));
      EXPECT_TRUE(same_bits(got.to(Device::cpu()), want)) << s << " " << dtype;
      sum(mul(want, g)).backward();
      poison(want.numel(), dtype);
      sum(mul(got, g.to(gpu))).backward();
      EXPECT_TRUE(same_bits(xg.grad().to(Device::cpu()), x.grad())) << s << " " << dtype;
    }
  }
}

TEST_F(RotaryGpu, MixedDevices) {
  const RotaryTables tab = rotary_tables(4, 8);
  const Tensor x = randn({1, 1, 4, 8}).to(gpu);
  testing::expect_error_mentions([&] { (void)rotary_embedding(x, tab.cos, tab.sin); },
                                 {"rotary_embedding", "cos", "cuda:0", "cpu"});
}

}  // namespace
}  // namespace strata
