// The composed attention (src/ops/attention_composite.h: batched matmul, the
// attention softmax row op, matmul) that CUDA tensors run, checked on the CPU against the
// CPU's fused attention kernel, forward and gradients, in float64: multi-head and
// grouped-query heads, causal with as many or fewer queries than keys (a KV cache), an
// additive mask, and strided q/k/v views of one projection. The new row op gets a
// finite-difference check.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "gradcheck.h"
#include "ops/attention_composite.h"
#include "strata/strata.h"
#include "test_util.h"

namespace strata {
namespace {

using strata::testing::expect_gradients_match;
using strata::testing::leaf64;

struct Case {
  const char* name;
  int64_t batch, heads, kv_heads, tq, tk, dim;
  bool causal, masked;
};

TEST(AttentionComposite, EqualsTheFusedCpuKernelWithGradients) {
  const std::vector<Case> cases{
      {"mha causal", 2, 3, 3, 7, 7, 5, true, false},   {"gqa causal", 2, 4, 2, 6, 6, 8, true, false},
      {"gqa kv cache", 1, 6, 3, 3, 9, 4, true, false}, {"mqa full", 2, 4, 1, 5, 8, 3, false, false},
      {"masked", 2, 2, 2, 4, 6, 5, false, true},       {"masked causal", 1, 4, 2, 5, 5, 6, true, true}};
  for (const Case& c : cases) {
    Generator gen(31);
    const Tensor q = randn({c.batch, c.heads, c.tq, c.dim}, {.dtype = DType::Float64}, &gen);
    const Tensor k = randn({c.batch, c.kv_heads, c.tk, c.dim}, {.dtype = DType::Float64}, &gen);
    const Tensor v = randn({c.batch, c.kv_heads, c.tk, c.dim}, {.dtype = DType::Float64}, &gen);
    const Tensor g = randn({c.batch, c.heads, c.tq, c.dim}, {.dtype = DType::Float64}, &gen);
    const Tensor mask = c.masked ? randn({1, c.heads, c.tq, c.tk}, {.dtype = DType::Float64}, &gen) : Tensor();
    const double scale = 0.37;
    auto leaf = [](const Tensor& t) { return t.detach().set_requires_grad(true); };
    Tensor qf = leaf(q), kf = leaf(k), vf = leaf(v), qc = leaf(q), kc = leaf(k), vc = leaf(v);
    const Tensor fused = attention(qf, kf, vf, {.causal = c.causal, .mask = mask, .scale = scale});
    const Tensor composed = detail::composite_attention(
        qc, kc, vc, c.causal, scale, mask.defined() ? mask.expand({c.batch, c.heads, c.tq, c.tk}) : Tensor());
    EXPECT_LT(max_abs_diff(composed, fused), 1e-13) << c.name;
    fused.backward(g);
    composed.backward(g);
    EXPECT_LT(max_abs_diff(qc.grad(), qf.grad()), 1e-12) << c.name << " dq";
    EXPECT_LT(max_abs_diff(kc.grad(), kf.grad()), 1e-12) << c.name << " dk";
    EXPECT_LT(max_abs_diff(vc.grad(), vf.grad()), 1e-12) << c.name << " dv";
  }
}

// q, k and v as strided views of one fused [B, T, 3, H, D] projection, as GPT's attention
// takes them.
TEST(AttentionComposite, ReadsStridedViewsOfOneProjection) {
  Generator gen(32);
  const int64_t b = 2, t = 5, h = 3, d = 4;
  const Tensor qkv = randn({b, t, 3, h, d}, {.dtype = DType::Float64}, &gen);
  auto part = [&](int64_t i) { return qkv.select(2, i).transpose(1, 2); };  // [B, H, T, D], strided
  const Tensor want = causal_attention(part(0), part(1), part(2));
  const Tensor got = detail::composite_attention(part(0), part(1), part(2), true, 0.5, Tensor());
  EXPECT_LT(max_abs_diff(got, want), 1e-13);
}

TEST(AttentionComposite, SoftmaxRowOpGradientsAndCausalZeros) {
  using V = const std::vector<Tensor>&;
  for (bool causal : {false, true}) {
    expect_gradients_match([causal](V in) { return detail::attention_softmax(in[0], 0.7, causal); },
                           {leaf64({2, 3, 4, 6}, 40)});
  }
  // Causal, 3 queries over 5 keys: query i sees keys 0 .. i + 2.
  const Tensor p = detail::attention_softmax(leaf64({3, 5}, 41).detach(), 1.0, true);
  const std::vector<double> pv = p.to_vector<double>();
  for (int64_t i = 0; i < 3; ++i) {
    double row = 0;
    for (int64_t j = 0; j < 5; ++j) {
      const double x = pv[static_cast<size_t>(i * 5 + j)];
      if (j > i + 2) {
        EXPECT_EQ(x, 0.0) << i << " " << j;
      }
      row += x;
    }
    EXPECT_NEAR(row, 1.0, 1e-15) << "row " << i;
  }
}

}  // namespace
}  // namespace strata
