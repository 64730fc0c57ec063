// Ring attention's block steps on CUDA (src/parallel/ring_attention_blocks_cuda.cpp) against
// the CPU's (tests/unit/parallel/test_ring_attention_blocks.cpp checks those against composed
// ops). Both run strata_kernels/common/attention_block.h in the same order (one warp per row
// replays CpuRow's lanes); exp is fast_exp on both and log of the double sum the platform's
// (glibc's or CUDA's, which may differ by an ulp): bounds of a few ulps of the dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu/gpu_test.h"
#include "parallel/ring_attention_blocks.h"
#include "strata/strata.h"

namespace strata {
namespace {

using RingAttentionBlocksGpu = testing::GpuTest;

void expect_ulps(const Tensor& gpu, const Tensor& cpu, DType dtype, const std::string& what) {
  const double ulp = dtype == DType::Float64 ? 0x1p-52 : 0x1p-23;
  const std::vector<double> a = gpu.to(Device::cpu()).to_vector<double>(), b = cpu.to_vector<double>();
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LE(std::fabs(a[i] - b[i]), 8 * ulp * std::max(1.0, std::fabs(b[i]))) << what << " at " << i;
}

TEST_F(RingAttentionBlocksGpu, EveryStepMatchesTheCpu) {
  const int64_t c = 67;  // rows longer than a warp, not a multiple of 32
  for (DType dtype : {DType::Float32, DType::Float64})
    for (bool diagonal : {false, true}) {
      Generator g(5);
      const Tensor s = mul(randn({2, 3 * c, c}, {.dtype = dtype}, &g), 2.0);
      const Tensor dp = randn({2, 3 * c, c}, {.dtype = dtype}, &g);
      const std::string what = std::string(diagonal ? "diagonal " : "full ") + std::string(dtype_name(dtype));
      const auto on_cpu = parallel::ring_cpu::ring_block_softmax(s, 0.3, diagonal);
      const auto on_gpu = parallel::ring_cuda::ring_block_softmax(s.to(gpu), 0.3, diagonal);
      expect_ulps(on_gpu.probs, on_cpu.probs, dtype, "softmax probs, " + what);
      expect_ulps(on_gpu.lse, on_cpu.lse, dtype, "lse, " + what);
      const Tensor lse = add(on_cpu.lse, 0.25).contiguous();
      const Tensor p_cpu = parallel::ring_cpu::ring_block_probs(s, lse, 0.3, diagonal);
      const Tensor p_gpu = parallel::ring_cuda::ring_block_probs(s.to(gpu), lse.to(gpu), 0.3, diagonal);
      expect_ulps(p_gpu, p_cpu, dtype, "probs, " + what);
      const Tensor delta = sum(dp, {2}, true).contiguous();
      const Tensor ds_cpu = parallel::ring_cpu::ring_block_score_grad(dp.clone(), p_cpu, delta, 0.3);
      const Tensor ds_gpu = parallel::ring_cuda::ring_block_score_grad(dp.to(gpu), p_cpu.to(gpu), delta.to(gpu), 0.3);
      expect_ulps(ds_gpu, ds_cpu, dtype, "score gradient, " + what);
    }
}

}  // namespace
}  // namespace strata
