// causal_attention: values against the textbook formula, gradchecks (several T and D,
// B*H > 1, strided inputs, more than one internal row block), float32 vs float64.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"
#include "unit/ops/attention_error_bounds.h"

using namespace strata;
using strata::testing::expect_gradients_match;
using strata::testing::expect_near_vec;
using strata::testing::leaf64;
using strata::testing::rand64;
using strata::testing::rel_err;
using V = const std::vector<Tensor>&;

namespace {

// softmax_j<=i(q_i . k_j / sqrt(D)) v_j per (b, h), in double.
std::vector<double> attention_ref(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t bh = q.size(0) * q.size(1), t = q.size(2), d = q.size(3);
  std::vector<double> vq = q.to_vector<double>(), vk = k.to_vector<double>(), vv = v.to_vector<double>();
  std::vector<double> out(vq.size(), 0.0), s(t);
  for (int64_t h = 0; h < bh; ++h) {
    const double* Q = &vq[h * t * d];
    const double* K = &vk[h * t * d];
    const double* Vv = &vv[h * t * d];
    for (int64_t i = 0; i < t; ++i) {
      double m = -INFINITY, z = 0;
      for (int64_t j = 0; j <= i; ++j) {
        s[j] = 0;
        for (int64_t c = 0; c < d; ++c) s[j] += Q[i * d + c] * K[j * d + c];
        s[j] /= std::sqrt(static_cast<double>(d));
        m = std::max(m, s[j]);
      }
      for (int64_t j = 0; j <= i; ++j) z += std::exp(s[j] - m);
      for (int64_t j = 0; j <= i; ++j)
        for (int64_t c = 0; c < d; ++c) out[(h * t + i) * d + c] += std::exp(s[j] - m) / z * Vv[j * d + c];
    }
  }
  return out;
}

}  // namespace

TEST(CausalAttention, MatchesFormula) {
  // T = 150 and 130 span several internal row blocks; T = 1 is a single key.
  const std::vector<Shape> shapes = {{1, 1, 1, 4}, {2, 3, 5, 8}, {1, 2, 130, 16}, {2, 2, 150, 4}, {1, 1, 64, 64}};
  uint64_t seed = 1;
  for (const Shape& s : shapes) {
    Tensor q = rand64(s, seed++), k = rand64(s, seed++), v = rand64(s, seed++);
    Tensor y = causal_attention(q, k, v);
    ASSERT_EQ(y.shape(), s);
    expect_near_vec(y.to_vector<double>(), attention_ref(q, k, v), 1e-12);
  }
  // The first query sees only the first key: out[.., 0, :] == v[.., 0, :].
  Tensor q = rand64({1, 1, 3, 2}, 50), v = rand64({1, 1, 3, 2}, 51);
  Tensor y = causal_attention(q, rand64({1, 1, 3, 2}, 52), v);
  EXPECT_EQ(max_abs_diff(y.narrow(2, 0, 1), v.narrow(2, 0, 1)), 0.0);
}

TEST(CausalAttention, OutputMergesHeadsWithoutACopy) {
  Tensor q = rand64({2, 3, 4, 5}, 60);
  Tensor y = causal_attention(q, q, q);
  EXPECT_TRUE(y.transpose(1, 2).is_contiguous());
  // The usual head merge works and gives the formula's values.
  Tensor merged = y.transpose(1, 2).contiguous().view({2, 4, 15});
  EXPECT_EQ(merged.shape(), Shape({2, 4, 15}));
  EXPECT_EQ(max_abs_diff(y.contiguous(), y), 0.0);
}

TEST(CausalAttention, Gradcheck) {
  auto f = [](V in) { return causal_attention(in[0], in[1], in[2]); };
  const std::vector<Shape> shapes = {{1, 2, 5, 3}, {2, 1, 7, 4}, {1, 1, 1, 2}, {2, 2, 3, 1}};
  uint64_t seed = 10;
  for (const Shape& s : shapes) {
    expect_gradients_match(f, {leaf64(s, seed), leaf64(s, seed + 1), leaf64(s, seed + 2)});
    seed += 3;
  }
  // Three internal row blocks.
  expect_gradients_match(f, {leaf64({1, 1, 130, 1}, 20), leaf64({1, 1, 130, 1}, 21), leaf64({1, 1, 130, 1}, 22)});
  // Only some inputs require grad.
  expect_gradients_match(
      [](V in) {
        return causal_attention(in[0], in[1], rand64({1, 2, 4, 3}, 23));
      },
      {leaf64({1, 2, 4, 3}, 24), rand64({1, 2, 4, 3}, 25)});
}

TEST(CausalAttention, GradcheckStridedViewsOfOneProjection) {
  // q, k, v as GPT-2 makes them: one [B, T, 3, H, D] projection, split and permuted, so
  // each is a strided [B, H, T, D] view, and the heads are merged back afterwards.
  const int64_t B = 2, T = 5, H = 2, D = 3;
  auto f = [=](V in) {
    Tensor qkv = in[0];
    Tensor q = qkv.select(2, 0).transpose(1, 2), k = qkv.select(2, 1).transpose(1, 2),
           v = qkv.select(2, 2).transpose(1, 2);
    return causal_attention(q, k, v).transpose(1, 2).contiguous().view({B, T, H * D});
  };
  expect_gradients_match(f, {leaf64({B, T, 3, H, D}, 30)});
  // Fully general strides (time-major with a transposed D is not BLAS-ready: copied).
  expect_gradients_match(
      [](V in) {
        return causal_attention(in[0].permute({0, 2, 1, 3}), in[1].transpose(2, 3), in[2]);
      },
      {leaf64({1, 4, 2, 3}, 31), leaf64({1, 2, 3, 4}, 32), leaf64({1, 2, 4, 3}, 33)});
}

TEST(CausalAttention, Float32WithinDerivedErrorBound) {
  // The float32 inputs in float64 give the exact values; attention_error_bounds.h bounds the
  // float32 error through both GEMMs and the softmax, for any GEMM kernel and ISA version.
  for (const Shape& s : {Shape{2, 3, 100, 32}, Shape{1, 2, 200, 64}}) {
    std::vector<Tensor> in32, in64;
    std::vector<std::vector<double>> values;
    for (uint64_t i = 0; i < 3; ++i) {
      Tensor x = rand64(s, 40 + i).to(DType::Float32);
      in32.push_back(x.detach().set_requires_grad(true));
      in64.push_back(x.to(DType::Float64).set_requires_grad(true));
      values.push_back(x.to_vector<double>());
    }
    Tensor y32 = causal_attention(in32[0], in32[1], in32[2]), y64 = causal_attention(in64[0], in64[1], in64[2]);
    EXPECT_EQ(y32.dtype(), DType::Float32);
    Tensor g = rand64(s, 49).to(DType::Float32);
    y32.backward(g);
    y64.backward(g.to(DType::Float64));
    const auto n = [&](int64_t d) { return static_cast<size_t>(s[static_cast<size_t>(d)]); };
    const strata::test::AttentionBounds b = strata::test::attention_bounds(
        values[0], values[1], values[2], {}, g.to_vector<double>(), {n(0), n(1), n(1), n(2), n(2), n(3), true});
    const std::vector<const std::vector<strata::test::Bounded>*> grads = {&b.dq, &b.dk, &b.dv};
    const std::string shape = "[" + std::to_string(n(0)) + "," + std::to_string(n(1)) + "," + std::to_string(n(2)) +
                              "," + std::to_string(n(3)) + "]";
    EXPECT_TRUE(strata::test::within_error_bounds(y32.to_vector<double>(), b.out, "causal attention " + shape));
    EXPECT_TRUE(strata::test::within_error_bounds(y64.to_vector<double>(), b.out, "causal attention float64"));
    for (int i = 0; i < 3; ++i) {
      const std::string what = "causal attention " + shape + " gradient of input " + std::to_string(i);
      EXPECT_TRUE(strata::test::within_error_bounds(in32[i].grad().to_vector<double>(), *grads[i], what));
      EXPECT_TRUE(strata::test::within_error_bounds(in64[i].grad().to_vector<double>(), *grads[i], what + " float64"));
    }
  }
}

TEST(CausalAttention, NoGradPathMatches) {
  Tensor q = leaf64({2, 2, 70, 8}, 70), k = leaf64({2, 2, 70, 8}, 71), v = leaf64({2, 2, 70, 8}, 72);
  Tensor with_grad = causal_attention(q, k, v);
  NoGradGuard no_grad;
  Tensor without = causal_attention(q, k, v);
  EXPECT_FALSE(without.requires_grad());
  EXPECT_EQ(max_abs_diff(with_grad, without), 0.0);
}

TEST(CausalAttention, Errors) {
  Tensor q = ones({1, 2, 3, 4});
  EXPECT_THROW(causal_attention(ones({2, 3, 4}), ones({2, 3, 4}), ones({2, 3, 4})), Error);
  EXPECT_THROW(causal_attention(q, ones({1, 2, 4, 4}), q), Error);
  EXPECT_THROW(causal_attention(q, q, ones({1, 2, 3, 4}, {.dtype = DType::Float64})), Error);
  EXPECT_THROW(causal_attention(q, q, Tensor()), Error);
  Tensor i = ones({1, 2, 3, 4}, {.dtype = DType::Int32});
  EXPECT_THROW(causal_attention(i, i, i), Error);
  try {
    causal_attention(q, ones({1, 2, 3, 5}), q);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("k has shape [1, 2, 3, 5]"), std::string::npos) << e.what();
  }
}

// bfloat16/float16 q, k, v (where no fused kernel takes them: always on the CPU) run the
// float32 attention of the widened inputs and round the output once: bit for bit that
// composition, with the gradient reaching the 16-bit leaves through the conversions.
TEST(CausalAttention, SixteenBitInputsAreTheFloat32AttentionRoundedOnce) {
  Generator gen(5);
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    for (bool causal : {true, false}) {
      const Tensor q = randn({2, 3, 5, 8}, {}, &gen).to(dtype), k = randn({2, 3, 5, 8}, {}, &gen).to(dtype),
                   v = randn({2, 3, 5, 8}, {}, &gen).to(dtype);
      const Tensor mask = causal ? Tensor() : randn({5, 5}, {}, &gen).to(dtype);  // additive
      const Tensor wide_mask = causal ? Tensor() : mask.to(DType::Float32);
      const Tensor want = attention(q.to(DType::Float32), k.to(DType::Float32), v.to(DType::Float32),
                                    {.causal = causal, .mask = wide_mask})
                              .to(dtype);
      Tensor q16 = q.detach().set_requires_grad(true);
      const Tensor got = causal ? causal_attention(q16, k, v) : attention(q16, k, v, {.mask = mask});
      EXPECT_EQ(got.dtype(), dtype);
      EXPECT_EQ(got.to(DType::Float32).to_vector<float>(), want.to(DType::Float32).to_vector<float>()) << dtype;
      got.to(DType::Float32).sum().backward();
      ASSERT_TRUE(q16.grad().defined());
      EXPECT_EQ(q16.grad().dtype(), dtype);
    }
  }
  const Tensor b = ones({1, 1, 2, 8}, {.dtype = DType::BFloat16});
  strata::testing::expect_error_mentions(
      [&] {
        (void)causal_attention(b, b, ones({1, 1, 2, 8}));
      },
      {"causal_attention", "v has dtype float32", "q has bfloat16"});
}
