// Attention on a GPU (label gpu): CUDA tensors run the composed attention
// (src/ops/attention_composite.h: cuBLASLt batched products around the attention
// softmax row kernel), checked against the CPU's fused kernel with gradients: multi-head,
// grouped-query, a KV cache (fewer queries than keys) and an additive mask; float64 to
// 1e-12, float32 to 2e-5 (exact fp32 GEMMs; TF32 stays off by default). With
// cuda::set_fused_attention(true), 16-bit attention runs cuDNN's fused engines
// (src/ops/attention_fused.h), checked against the CPU in float32 on the same
// 16-bit-rounded inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
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
      const Tensor got = attention(qg, kg, vg, {.causal = c.causal, .mask = mask.defined() ? mask.to(gpu) : Tensor()});
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

double max_abs(const Tensor& t) {
  const Tensor c = t.to(Device::cpu()).to(DType::Float32);
  return max_abs_diff(c, zeros_like(c));
}

// Switches the fused attention on for one test (it is on by default; the environment may not be).
struct FusedOn {
  bool was = cuda::fused_attention();
  FusedOn() { cuda::set_fused_attention(true); }
  ~FusedOn() { cuda::set_fused_attention(was); }
};

// bf16 and fp16, causal and not, GPT-2's head size and 128, against float32 on the CPU. The
// bound: P is rounded to 16 bits before P V (as in every flash attention), O and the
// gradients are 16-bit; the relative error of a 16-bit rounding is 2^-8 (bf16) or 2^-11
// (fp16), a few of them accumulate.
TEST_F(AttentionGpu, FusedEqualsTheCpuWithinSixteenBitRounding) {
  FusedOn on;
  struct Case {
    int64_t batch, heads, t, dim;
    bool causal;
  };
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    const double tol = dtype == DType::BFloat16 ? 3e-2 : 5e-3;
    for (const Case& c : {Case{2, 4, 128, 64, true}, Case{1, 3, 200, 128, false}, Case{2, 2, 77, 64, true}}) {
      Generator gen(53);
      const Tensor q = randn({c.batch, c.heads, c.t, c.dim}, {}, &gen).to(dtype);
      const Tensor k = randn({c.batch, c.heads, c.t, c.dim}, {}, &gen).to(dtype);
      const Tensor v = randn({c.batch, c.heads, c.t, c.dim}, {}, &gen).to(dtype);
      const Tensor g = randn({c.batch, c.heads, c.t, c.dim}, {}, &gen).to(dtype);
      auto leaf = [](const Tensor& t) { return t.detach().set_requires_grad(true); };
      Tensor qc = leaf(q.to(DType::Float32)), kc = leaf(k.to(DType::Float32)), vc = leaf(v.to(DType::Float32));
      Tensor qg = leaf(q.to(gpu)), kg = leaf(k.to(gpu)), vg = leaf(v.to(gpu));
      const Tensor want = attention(qc, kc, vc, {.causal = c.causal});
      const Tensor got = attention(qg, kg, vg, {.causal = c.causal});
      ASSERT_TRUE(got.grad_fn() != nullptr);
      EXPECT_EQ(got.grad_fn()->name(), "FusedAttentionBackward") << "cuDNN took no plan (see stderr)";
      EXPECT_EQ(got.dtype(), dtype);
      const double scale_o = max_abs(want);
      EXPECT_LT(max_abs_diff(got.to(Device::cpu()).to(DType::Float32), want), tol * scale_o) << dtype << " " << c.t;
      want.backward(g.to(DType::Float32));
      got.backward(g.to(gpu));
      for (auto [gg, gc, name] : {std::tuple{qg.grad(), qc.grad(), "dq"}, std::tuple{kg.grad(), kc.grad(), "dk"},
                                  std::tuple{vg.grad(), vc.grad(), "dv"}}) {
        EXPECT_LT(max_abs_diff(gg.to(Device::cpu()).to(DType::Float32), gc), 2 * tol * max_abs(gc))
            << name << " " << dtype << " " << c.t;
      }
    }
  }
}

// Under a bf16 autocast scope float32 attention runs fused in bf16 and comes back float32.
TEST_F(AttentionGpu, FusedUnderAutocastKeepsFloat32OutsideTheScope) {
  FusedOn on;
  Generator gen(54);
  const Tensor qkv = randn({2, 64, 3, 4, 64}, {}, &gen);
  auto part = [](const Tensor& t, int64_t i) { return t.select(2, i).transpose(1, 2); };
  const Tensor want = causal_attention(part(qkv, 0), part(qkv, 1), part(qkv, 2));
  const Tensor d = qkv.to(gpu).detach().set_requires_grad(true);
  Tensor got;
  {
    autocast::Scope bf16;
    got = causal_attention(part(d, 0), part(d, 1), part(d, 2));
  }
  EXPECT_EQ(got.dtype(), DType::Float32);
  EXPECT_LT(max_abs_diff(got.to(Device::cpu()), want), 3e-2 * max_abs(want));
  sum(got).backward();
  EXPECT_EQ(d.grad().dtype(), DType::Float32);
  EXPECT_TRUE(std::isfinite(max_abs(d.grad().to(Device::cpu()))));
}

}  // namespace
}  // namespace strata
