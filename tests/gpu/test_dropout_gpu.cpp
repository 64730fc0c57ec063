// Dropout on a GPU against the CPU (label gpu): both draw strata_kernels/common/dropout.h's mask
// from (seed, offset) and scale alike, so forward and backward are equal bit for bit,
// including sizes that are not a multiple of 4 (a Philox block) or of the thread block,
// and one above 2^24 elements. Outputs are poisoned first.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gpu/gpu_test.h"
#include "strata/strata.h"

namespace strata {
namespace {

using DropoutGpu = testing::GpuTest;
using testing::poison;
using testing::same_bits;

TEST_F(DropoutGpu, SameMaskAndValuesAsTheCpu) {
  const std::vector<Shape> shapes = {{1}, {3}, {7, 5}, {1025, 3}, {(int64_t{1} << 24) + 3}};
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& s : shapes) {
      for (double p : {0.1, 0.5}) {
        Generator data(41);
        Tensor x = randn(s, {.dtype = dtype}, &data);
        x.set_requires_grad(true);
        Tensor xg = x.detach().to(gpu);
        xg.set_requires_grad(true);
        Generator cpu_gen(7, 3), gpu_gen(7, 3);  // the same (seed, offset) on both
        const Tensor want = dropout(x, p, true, &cpu_gen);
        poison(want.numel(), dtype);
        const Tensor got = dropout(xg, p, true, &gpu_gen);
        EXPECT_TRUE(same_bits(got.to(Device::cpu()), want)) << s << " " << dtype << " p " << p;
        const Tensor g = randn(s, {.dtype = dtype}, &data);
        sum(mul(want, g)).backward();
        poison(want.numel(), dtype);
        sum(mul(got, g.to(gpu))).backward();
        EXPECT_TRUE(same_bits(xg.grad().to(Device::cpu()), x.grad())) << s << " " << dtype << " p " << p;
      }
    }
  }
}

}  // namespace
}  // namespace strata
