// Attention on a GPU (label gpu): CUDA tensors run the composed attention
// (src/tensor/ops/attention_composite.h: cuBLASLt batched products around the attention
// softmax row kernel), checked against the CPU's fused kernel with gradients: multi-head,
// grouped-query, a KV cache (fewer queries than keys) and an additive mask; float64 to
// 1e-12, float32 to 2e-5 (exact fp32 GEMMs; TF32 stays off by default).
#include <gtest/gtest.h>

#include <vector>

#include "gpu/gpu_test.h"
#include "strata/strata.h"

namespace strata {
namespace {

using AttentionGpu = testing::GpuTest;

TEST_F(AttentionGpu, EqualsTheCpuWithGradients) {
  struct Case {
    const char* name;
    int64_t batch, heads, kv_heads, tq, tk, dim;
    bool causal, masked;
  };
  const std::vector<Case> cases{{"gpt causal", 2, 4, 4, 33, 33, 16, true, false},
                                {"gqa causal", 2, 8, 2, 40, 40, 32, true, false},
                                {"kv cache", 1, 6, 3, 3, 70, 16, true, false},
                                {"masked", 2, 2, 2, 17, 29, 8, false, true}};
  for (DType dtype : {DType::Float64, DType::Float32}) {
    const double tol = dtype == DType::Float64 ? 1e-12 : 2e-5;
    for (const Case& c : cases) {
      Generator gen(51);
      const TensorOptions o{.dtype = dtype};
      const Tensor q = randn({c.batch, c.heads, c.tq, c.dim}, o, &gen);
      const Tensor k = randn({c.batch, c.kv_heads, c.tk, c.dim}, o, &gen);
      const Tensor v = randn({c.batch, c.kv_heads, c.tk, c.dim}, o, &gen);
      const Tensor g = randn({c.batch, c.heads, c.tq, c.dim}, o, &gen);
      const Tensor mask = c.masked ? randn({1, 1, c.tq, c.tk}, o, &gen) : Tensor();
      auto leaf = [](const Tensor& t) { return t.detach().set_requires_grad(true); };
      Tensor qc = leaf(q), kc = leaf(k), vc = leaf(v);
      Tensor qg = leaf(q.to(gpu)), kg = leaf(k.to(gpu)), vg = leaf(v.to(gpu));
      const Tensor want = attention(qc, kc, vc, {.causal = c.causal, .mask = mask});
      const Tensor got =
          attention(qg, kg, vg, {.causal = c.causal, .mask = mask.defined() ? mask.to(gpu) : Tensor()});
      ASSERT_TRUE(got.device().is_cuda()) << c.name;
      EXPECT_LT(max_abs_diff(got.to(Device::cpu()), want), tol) << c.name << " " << dtype;
      want.backward(g);
      got.backward(g.to(gpu));
      EXPECT_LT(max_abs_diff(qg.grad().to(Device::cpu()), qc.grad()), 4 * tol) << c.name << " dq " << dtype;
      EXPECT_LT(max_abs_diff(kg.grad().to(Device::cpu()), kc.grad()), 4 * tol) << c.name << " dk " << dtype;
      EXPECT_LT(max_abs_diff(vg.grad().to(Device::cpu()), vc.grad()), 4 * tol) << c.name << " dv " << dtype;
    }
  }
}

// The causal_attention entry point GPT uses, on strided views of one qkv projection.
TEST_F(AttentionGpu, CausalAttentionOnViewsOfOneProjection) {
  Generator gen(52);
  const Tensor qkv = randn({2, 24, 3, 4, 16}, {}, &gen);
  auto part = [](const Tensor& t, int64_t i) { return t.select(2, i).transpose(1, 2); };
  const Tensor want = causal_attention(part(qkv, 0), part(qkv, 1), part(qkv, 2));
  const Tensor d = qkv.to(gpu);
  const Tensor got = causal_attention(part(d, 0), part(d, 1), part(d, 2));
  EXPECT_LT(max_abs_diff(got.to(Device::cpu()), want), 2e-5);
}

}  // namespace
}  // namespace strata
