// nn::MultiheadAttention (finite-difference gradients in float64, its two attention paths,
// masks, layouts, parameters and errors), LayerNorm's bias/affine switches and Embedding's
// padding_idx. Numerics against torch: tests/reference/test_nn_modules_reference.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::nn;
using strata::testing::error_of;
using strata::testing::expect_error_mentions;
using strata::testing::expect_gradients_match;
using strata::testing::leaf64;
using strata::testing::rand64;
using strata::testing::rel_err;
using V = std::vector<Tensor>;

namespace {

// Float64 parameters drawn from a generator seeded with `seed`. One generator serves every
// module, reseeded for each: a module draws only while it is constructed.
MultiheadAttentionOptions f64(MultiheadAttentionOptions o = {}, uint64_t seed = 7) {
  static Generator gen;
  gen.set_state(seed, 0);
  o.init.dtype = DType::Float64;
  o.init.gen = &gen;
  return o;
}

// A 0/1 -> Bool mask from a list.
Tensor bool_mask(const std::vector<double>& v, const Shape& shape) { return ne(from_vector(v, shape), 0.0); }

// Float64 results agree to rounding: both paths compute the same exact values in a few
// stages of sums of at most 8 terms.
constexpr double kSamePath64 = 1e-13;

}  // namespace

TEST(MultiheadAttention, ParametersAreNamedAndInitialisedAsTorch) {
  MultiheadAttention packed(8, 2, f64());
  std::vector<std::string> names;
  for (const auto& [n, t] : packed.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(packed.in_proj_weight.shape(), Shape({24, 8}));
  // xavier_uniform on [3E, E]: |w| <= sqrt(6 / 4E); out_proj.weight as Linear: <= 1/sqrt(E).
  const auto max_abs = [](const Tensor& t) {
    const auto v = t.to_vector<double>();
    double m = 0;
    for (double x : v) m = std::max(m, std::fabs(x));
    return m;
  };
  EXPECT_LE(max_abs(packed.in_proj_weight), std::sqrt(6.0 / 32.0));
  EXPECT_GT(max_abs(packed.in_proj_weight), 0.5 * std::sqrt(6.0 / 32.0));
  EXPECT_LE(max_abs(packed.out_proj->weight), 1.0 / std::sqrt(8.0));
  EXPECT_EQ(max_abs(packed.in_proj_bias), 0.0);
  EXPECT_EQ(max_abs(packed.out_proj->bias), 0.0);

  MultiheadAttention separate(8, 4, f64({.bias = false, .kdim = 5, .vdim = 3}));
  names.clear();
  for (const auto& [n, t] : separate.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight", "out_proj.weight"}));
  EXPECT_EQ(separate.k_proj_weight.shape(), Shape({8, 5}));
  EXPECT_EQ(separate.v_proj_weight.shape(), Shape({8, 3}));
  EXPECT_FALSE(separate.in_proj_weight.defined());
  EXPECT_FALSE(separate.in_proj_bias.defined());
  EXPECT_FALSE(separate.out_proj->bias.defined());
}

TEST(MultiheadAttention, GradientsMatchFiniteDifferencesOnTheFusedPath) {
  MultiheadAttention mha(6, 2, f64());
  const Tensor kpm = bool_mask({0, 0, 0, 1, 0, 0, 1, 1}, {2, 4});
  const Tensor attn = rand64({3, 4}, 9);  // additive
  expect_gradients_match([&](const V& in) { return mha.forward(in[0], in[1], in[2], kpm, attn).output; },
                         {leaf64({2, 3, 6}, 1), leaf64({2, 4, 6}, 2), leaf64({2, 4, 6}, 3), mha.in_proj_weight,
                          mha.in_proj_bias, mha.out_proj->weight, mha.out_proj->bias});
}

TEST(MultiheadAttention, GradientsMatchFiniteDifferencesWithWeights) {
  // Separate projections (kdim, vdim), sequence first, per-head Bool mask, weights per head.
  MultiheadAttention mha(4, 2, f64({.batch_first = false, .kdim = 3, .vdim = 5}));
  std::vector<double> hidden(2 * 2 * 3 * 4, 0.0);
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = (i % 4 != 0 && i % 3 == 0) ? 1.0 : 0.0;  // key 0 stays
  const Tensor attn = bool_mask(hidden, {4, 3, 4});
  expect_gradients_match(
      [&](const V& in) {
        AttentionOutput r = mha.forward(in[0], in[1], in[2], {}, attn, /*need_weights=*/true,
                                        /*average_attn_weights=*/false);
        return cat({r.output.reshape({-1}), r.weights.reshape({-1})}, 0);
      },
      {leaf64({3, 2, 4}, 4), leaf64({4, 2, 3}, 5), leaf64({4, 2, 5}, 6), mha.q_proj_weight, mha.k_proj_weight,
       mha.v_proj_weight, mha.in_proj_bias, mha.out_proj->weight, mha.out_proj->bias});
}

TEST(MultiheadAttention, SelfAttentionGradientSumsOverItsThreeRoles) {
  MultiheadAttention mha(4, 2, f64());
  expect_gradients_match([&](const V& in) { return mha.forward(in[0], in[0], in[0], {}, {}, true).weights; },
                         {leaf64({2, 3, 4}, 8), mha.in_proj_weight});
}

TEST(MultiheadAttention, FusedAndComposedPathsAgree) {
  MultiheadAttention mha(8, 2, f64());
  const Tensor q = rand64({2, 3, 8}, 1), kv = rand64({2, 5, 8}, 2);
  const Tensor kpm = bool_mask({0, 0, 0, 0, 1, 0, 0, 1, 1, 1}, {2, 5});
  const Tensor attn = bool_mask({0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1}, {3, 5});
  const Tensor fused = mha.forward(q, kv, kv, kpm, attn).output;
  AttentionOutput composed = mha.forward(q, kv, kv, kpm, attn, /*need_weights=*/true);
  EXPECT_LT(rel_err(fused, composed.output), kSamePath64);
  // Averaged weights: [B, L, S], rows sum to 1, zero where a key is masked.
  ASSERT_EQ(composed.weights.shape(), Shape({2, 3, 5}));
  const auto w = composed.weights.to_vector<double>();
  const auto k = kpm.to_vector<int64_t>(), a = attn.to_vector<int64_t>();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 3; ++i) {
      double row = 0;
      for (int64_t j = 0; j < 5; ++j) {
        const double x = w[static_cast<size_t>((b * 3 + i) * 5 + j)];
        row += x;
        if (k[static_cast<size_t>(b * 5 + j)] != 0 || a[static_cast<size_t>(i * 5 + j)] != 0) {
          EXPECT_EQ(x, 0.0);
        }
      }
      EXPECT_NEAR(row, 1.0, 1e-14);
    }
}

TEST(MultiheadAttention, BoolMasksEqualTheirAdditiveForms) {
  MultiheadAttention mha(4, 2, f64());
  const Tensor q = rand64({2, 3, 4}, 3);
  const Tensor kpm = bool_mask({0, 0, 1, 0, 1, 1}, {2, 3});
  const Tensor attn = bool_mask({0, 1, 0, 0, 0, 1, 0, 0, 0}, {3, 3});
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor kpm_add = masked_fill(zeros({2, 3}, {.dtype = DType::Float64}), kpm, -inf);
  const Tensor attn_add = masked_fill(zeros({3, 3}, {.dtype = DType::Float64}), attn, -inf);
  const Tensor with_bool = mha.forward(q, q, q, kpm, attn).output;
  EXPECT_EQ(with_bool.to_vector<double>(), mha.forward(q, q, q, kpm_add, attn_add).output.to_vector<double>());
  EXPECT_EQ(with_bool.to_vector<double>(), mha.forward(q, q, q, kpm, attn_add).output.to_vector<double>());
  // The packed self-attention projection equals three separate ones.
  EXPECT_LT(rel_err(mha.forward(q, q.clone(), q.clone(), kpm, attn).output, with_bool), kSamePath64);
}

TEST(MultiheadAttention, LayoutsAndUnbatchedInputAgree) {
  MultiheadAttention first(4, 2, f64({}, 3)), seq(4, 2, f64({.batch_first = false}, 3));
  const Tensor q = rand64({1, 3, 4}, 4), kv = rand64({1, 5, 4}, 5);
  const Tensor batched = first.forward(q, kv, kv, {}, {}, true).output;
  const Tensor seq_out = seq.forward(q.transpose(0, 1), kv.transpose(0, 1), kv.transpose(0, 1)).output;
  EXPECT_LT(rel_err(seq_out.transpose(0, 1), batched), kSamePath64);
  AttentionOutput single = first.forward(q.squeeze(0), kv.squeeze(0), kv.squeeze(0), {}, {}, true, false);
  EXPECT_EQ(single.output.shape(), Shape({3, 4}));
  EXPECT_EQ(single.weights.shape(), Shape({2, 3, 5}));
  EXPECT_LT(rel_err(single.output, batched.squeeze(0)), kSamePath64);
}

TEST(MultiheadAttention, DropoutActsOnTheWeightsInTrainingOnly) {
  Generator drop(11);
  MultiheadAttention mha(4, 2, f64({.dropout = 0.5, .dropout_generator = &drop}));
  const Tensor q = rand64({2, 3, 4}, 6);
  mha.eval();
  const auto clean = mha.forward(q, q, q, {}, {}, true, false).weights.to_vector<double>();
  EXPECT_LT(rel_err(mha.forward(q, q, q).output, mha.forward(q, q, q, {}, {}, true).output), kSamePath64);
  mha.train();
  const auto dropped = mha.forward(q, q, q, {}, {}, true, false).weights.to_vector<double>();
  int zeros = 0;
  for (size_t i = 0; i < clean.size(); ++i) {
    if (dropped[i] == 0.0) {
      ++zeros;
    } else {
      EXPECT_NEAR(dropped[i], 2.0 * clean[i], 1e-15) << i;  // kept, scaled by 1 / (1 - p)
    }
  }
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, static_cast<int>(clean.size()));
}

TEST(MultiheadAttention, BadInputsAreNamed) {
  expect_error_mentions([] { MultiheadAttention(10, 3); }, {"embed_dim 10", "num_heads 3"});
  expect_error_mentions([] { MultiheadAttention(8, 2, {.dropout = 1.0}); }, {"dropout", "[0, 1)"});
  MultiheadAttention mha(8, 2, f64());
  const Tensor q = rand64({2, 3, 8}, 1), kv = rand64({2, 5, 8}, 2);
  expect_error_mentions(
      [&] {
        mha.forward(q, kv, kv, bool_mask(std::vector<double>(6, 0), {2, 3}));
      },
      {"key_padding_mask", "[2, 3]", "[2, 5]"});
  expect_error_mentions(
      [&] {
        mha.forward(q, kv, kv, {}, zeros({5, 3}, {.dtype = DType::Float64}));
      },
      {"attn_mask", "[5, 3]", "[3, 5]", "[4, 3, 5]"});
  expect_error_mentions(
      [&] {
        mha.forward(q, kv, kv, {}, zeros({3, 5}, {.dtype = DType::Int64}));
      },
      {"attn_mask", "int64", "Bool"});
  expect_error_mentions([&] { mha.forward(q, rand64({2, 5, 6}, 3), kv); }, {"kdim 8", "[2, 5, 6]"});
  expect_error_mentions([&] { mha.forward(q, kv, rand64({2, 4, 8}, 3)); }, {"source length", "[2, 4, 8]"});
  expect_error_mentions([&] { mha.forward(q, kv, kv, {}, leaf64({3, 5}, 4)); }, {"attn_mask requires grad"});
}

TEST(LayerNormModule, BiasAndAffineSwitches) {
  LayerNorm plain(5, {.bias = false, .dtype = DType::Float64});
  ASSERT_EQ(plain.named_parameters().size(), 1U);
  EXPECT_EQ(plain.named_parameters()[0].first, "weight");
  LayerNorm bare(5, {.elementwise_affine = false, .dtype = DType::Float64});
  EXPECT_TRUE(bare.named_parameters().empty());
  LayerNorm full(5, 1e-5, DType::Float64);
  EXPECT_EQ(full.named_parameters().size(), 2U);
  const Tensor x = rand64({3, 5}, 1);
  {
    NoGradGuard no_grad;
    plain.weight.copy_(rand64({5}, 2));
  }
  EXPECT_EQ(plain.forward(x).to_vector<double>(), layer_norm(x, plain.weight, {}, 1e-5).to_vector<double>());
  EXPECT_EQ(bare.forward(x).to_vector<double>(), layer_norm(x, {}, {}, 1e-5).to_vector<double>());
  expect_gradients_match([&](const V& in) { return plain.forward(in[0]); }, {leaf64({3, 5}, 3), plain.weight});
}

TEST(EmbeddingModule, PaddingRowStartsAtZeroAndLearnsNothing) {
  Generator a(5), b(5);
  Embedding plain(6, 3, {.dtype = DType::Float64, .gen = &a});
  Embedding padded(6, 3, {.dtype = DType::Float64, .gen = &b}, -2);  // row 4
  ASSERT_EQ(padded.padding_idx, 4);
  const auto w = padded.weight.to_vector<double>(), p = plain.weight.to_vector<double>();
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(w[i], i / 3 == 4 ? 0.0 : p[i]) << i;  // other rows as drawn
  const Tensor idx = from_vector(std::vector<int64_t>{4, 1, 4, 0}, {2, 2});
  sum(mul(padded.forward(idx), rand64({2, 2, 3}, 9))).backward();
  const auto g = padded.weight.grad().to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    const bool looked_up = i / 3 < 2;  // rows 0 and 1; row 4 is the padding row
    EXPECT_EQ(g[i] != 0.0, looked_up) << i;
  }
  // The gradient is the plain lookup's with the padding row zeroed (not the finite
  // difference there, by design: torch's padding_idx).
  const Tensor table = rand64({6, 3}, 4).set_requires_grad(true);
  const Tensor w_plain = table.detach().clone().set_requires_grad(true);
  const Tensor g_out = rand64({2, 2, 3}, 10);
  sum(mul(embedding(idx, table, 4), g_out)).backward();
  sum(mul(embedding(idx, w_plain), g_out)).backward();
  const auto got = table.grad().to_vector<double>(), plain_grad = w_plain.grad().to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], i / 3 == 4 ? 0.0 : plain_grad[i]) << i;
  EXPECT_NE(plain_grad[12], 0.0);
}

TEST(EmbeddingModule, PaddingRowStaysZeroWhenDrawnByName) {
  Embedding e(5, 2, {.by_name = true}, 0);
  e.init_parameters(3);
  const auto w = e.weight.to_vector<float>();
  EXPECT_EQ(w[0], 0.0F);
  EXPECT_EQ(w[1], 0.0F);
  EXPECT_NE(w[2], 0.0F);
}

TEST(EmbeddingModule, PaddingIndexOutOfRangeIsNamed) {
  expect_error_mentions([] { Embedding(6, 3, {}, 6); }, {"padding_idx 6", "[-6, 6)"});
  expect_error_mentions([] { Embedding(6, 3, {}, -7); }, {"padding_idx -7"});
  const Tensor idx = from_vector(std::vector<int64_t>{0}, {1});
  expect_error_mentions([&] { embedding(idx, zeros({4, 2}), 4); }, {"padding_idx 4", "[4, 2]"});
}
