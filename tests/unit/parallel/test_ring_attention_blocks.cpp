// Ring attention's fused block steps on the CPU (src/parallel/ring_attention_blocks.h, which
// runs strata_kernels/common/attention_block.h as the CUDA kernels do) against the same math
// composed of tensor ops in float64: the block softmax and its log-sum-exp (full and diagonal
// blocks), the probabilities recomputed from a log-sum-exp, and the scores' gradient.
// tests/dist (dist_context_parallel) checks the whole attention against one process.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "parallel/ring_attention_blocks.h"
#include "strata/strata.h"

namespace strata {
namespace {

// Two heads of 3 query chunk rows per head against 3 keys: rows [2, 6, 3], row r's query at
// offset r % 3 of its chunk.
constexpr int64_t kChunk = 3;
const Shape kScores{2, 2 * kChunk, kChunk};

Tensor scores(DType dtype, uint64_t seed) {
  Generator g(seed);
  return mul(randn(kScores, {.dtype = DType::Float64}, &g), 3.0).to(dtype);
}

// 0 where row r may see key j (always, or j <= r % c on a diagonal block), -inf elsewhere.
Tensor causal_mask(bool diagonal) {
  std::vector<double> m(static_cast<size_t>(2 * kChunk * kChunk), 0.0);
  for (int64_t r = 0; r < 2 * kChunk; ++r)
    for (int64_t j = 0; j < kChunk; ++j)
      if (diagonal && j > r % kChunk) m[static_cast<size_t>(r * kChunk + j)] = -std::numeric_limits<double>::infinity();
  return from_vector(m, {2 * kChunk, kChunk});
}

// |got - want| <= bound * max(1, |want|) elementwise.
void expect_close(const Tensor& got, const Tensor& want, double bound, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LE(std::fabs(a[i] - b[i]), bound * std::max(1.0, std::fabs(b[i]))) << what << " at " << i;
}

// float64: a few roundings of exp and a 3-term sum. float32: exp of values up to ~20 in
// magnitude (fast_exp's few ulps) and the same sums, 1e-5 relative with a wide margin.
double bound_for(DType dtype) { return dtype == DType::Float64 ? 1e-13 : 1e-5; }

TEST(RingAttentionBlocks, SoftmaxAndLogSumExpEqualComposedOps) {
  const double scale = 0.7;
  for (DType dtype : {DType::Float64, DType::Float32})
    for (bool diagonal : {false, true}) {
      const Tensor s = scores(dtype, 1);
      const parallel::RingBlockSoftmax got = parallel::ring_cpu::ring_block_softmax(s, scale, diagonal);
      const Tensor masked = add(mul(s.to(DType::Float64), scale), causal_mask(diagonal));
      const std::string what = std::string(diagonal ? "diagonal" : "full") + " " + std::string(dtype_name(dtype));
      expect_close(got.probs, softmax(masked, -1), bound_for(dtype), "probs, " + what);
      expect_close(got.lse, logsumexp(masked, {2}, true), bound_for(dtype), "lse, " + what);
      EXPECT_EQ(got.lse.shape(), (Shape{2, 2 * kChunk, 1}));
    }
}

TEST(RingAttentionBlocks, ProbabilitiesFromALogSumExpAndTheScoreGradient) {
  const double scale = 0.7;
  for (DType dtype : {DType::Float64, DType::Float32})
    for (bool diagonal : {false, true}) {
      const Tensor s = scores(dtype, 2);
      // A log-sum-exp larger than the block's own, as when other blocks hold more keys.
      const Tensor lse = add(logsumexp(add(mul(s.to(DType::Float64), scale), causal_mask(diagonal)), {2}, true), 0.5);
      const Tensor p = parallel::ring_cpu::ring_block_probs(s, lse.to(dtype), scale, diagonal);
      const Tensor want_p = exp(sub(add(mul(s.to(DType::Float64), scale), causal_mask(diagonal)), lse));
      const std::string what = std::string(diagonal ? "diagonal" : "full") + " " + std::string(dtype_name(dtype));
      expect_close(p, want_p, bound_for(dtype), "probs, " + what);

      const Tensor dp = scores(dtype, 3), delta = sum(scores(dtype, 4), {2}, true).contiguous();
      const Tensor want_ds = mul(mul(want_p, sub(dp.to(DType::Float64), delta.to(DType::Float64))), scale);
      Tensor ds = parallel::ring_cpu::ring_block_score_grad(dp.clone(), p, delta, scale);
      expect_close(ds, want_ds, 10 * bound_for(dtype), "score gradient, " + what);
    }
}

}  // namespace
}  // namespace strata
