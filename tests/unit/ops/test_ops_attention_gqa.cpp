// attention: grouped-query heads, causal (aligned to the end for Tq < Tk) and additive masks,
// against a composition of matmul and softmax in float64; gradchecks; float32 vs float64;
// errors.
#include <gtest/gtest.h>

#pragma GCC diagnostic error "-Wmissing-field-initializers"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"
#include "unit/ops/attention_error_bounds.h"

using namespace strata;
using strata::testing::expect_error_mentions;
using strata::testing::expect_gradients_match;
using strata::testing::expect_near_vec;
using strata::testing::leaf64;
using strata::testing::rand64;
using strata::testing::rel_err;
using V = const std::vector<Tensor>&;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// [Tq, Tk]: 0 where query i (at position Tk - Tq + i) may see key j, else -inf.
Tensor causal_mask(int64_t tq, int64_t tk) {
  std::vector<double> m(static_cast<size_t>(tq * tk));
  for (int64_t i = 0; i < tq; ++i)
    for (int64_t j = 0; j < tk; ++j) m[static_cast<size_t>(i * tk + j)] = j <= tk - tq + i ? 0.0 : -kInf;
  return from_vector(m, {tq, tk});
}

// Each kv head repeated for the query heads that share it: [B, Hkv, T, D] -> [B, H, T, D].
Tensor repeat_kv(const Tensor& t, int64_t heads) {
  const Shape& s = t.shape();
  const int64_t group = heads / s[1];
  return t.unsqueeze(2).expand({s[0], s[1], group, s[2], s[3]}).reshape({s[0], heads, s[2], s[3]});
}

// softmax(q k^T * scale + mask) v with the kv heads repeated: the textbook composition.
Tensor attention_composed(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  const int64_t heads = q.size(1);
  const double scale = o.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(3))));
  Tensor scores = mul(matmul(q, repeat_kv(k, heads).transpose(2, 3)), scale);
  if (o.causal) scores = add(scores, causal_mask(q.size(2), k.size(2)));
  if (o.mask.defined()) scores = add(scores, o.mask);
  return matmul(softmax(scores, -1), repeat_kv(v, heads));
}

struct Case {
  Shape q, kv;
  bool causal;
};

// GQA (H = 4 over 2 and 1 kv heads), MHA, Tq < Tk, Tq == 1 (one decoding step), several
// internal row blocks (Tq 130).
const std::vector<Case> kCases = {
    {{2, 4, 5, 3}, {2, 2, 5, 3}, true}, {{1, 4, 3, 4}, {1, 1, 7, 4}, true},   {{2, 4, 6, 2}, {2, 4, 6, 2}, false},
    {{1, 2, 1, 8}, {1, 1, 9, 8}, true}, {{1, 4, 4, 3}, {1, 2, 10, 3}, false}, {{1, 2, 130, 4}, {1, 1, 140, 4}, true},
};

}  // namespace

TEST(Attention, MatchesComposition) {
  uint64_t seed = 1;
  for (const Case& c : kCases) {
    Tensor q = rand64(c.q, seed++), k = rand64(c.kv, seed++), v = rand64(c.kv, seed++);
    const AttentionOptions plain{.causal = c.causal};
    Tensor y = attention(q, k, v, plain);
    ASSERT_EQ(y.shape(), c.q);
    expect_near_vec(y.to_vector<double>(), attention_composed(q, k, v, plain).to_vector<double>(), 1e-12);
    // Masks of several broadcast shapes, -inf entries included; a custom scale.
    Tensor padding = rand64({c.q[0], 1, 1, c.kv[2]}, seed++);
    padding.data<double>()[c.kv[2] - 1] = -kInf;  // batch 0's last key hidden (every query sees another)
    for (const Tensor& mask :
         {rand64({c.q[2], c.kv[2]}, seed++), rand64({1, c.q[1], c.q[2], c.kv[2]}, seed++), padding}) {
      const AttentionOptions masked{.causal = c.causal, .mask = mask, .scale = 0.3};
      expect_near_vec(attention(q, k, v, masked).to_vector<double>(),
                      attention_composed(q, k, v, masked).to_vector<double>(), 1e-12);
    }
  }
}

TEST(Attention, BoolMaskEqualsItsAdditiveForm) {
  Tensor q = rand64({2, 4, 3, 4}, 15), k = rand64({2, 2, 5, 4}, 16), v = rand64({2, 2, 5, 4}, 17);
  Tensor additive = zeros({2, 1, 1, 5}, {.dtype = DType::Float64});
  additive.data<double>()[1] = -kInf;  // batch 0 ignores key 1, batch 1 key 3
  additive.data<double>()[8] = -kInf;
  Tensor keep = eq(additive, 0.0);
  ASSERT_EQ(keep.dtype(), DType::Bool);
  for (bool causal : {false, true}) {
    EXPECT_EQ(max_abs_diff(attention(q, k, v, {.causal = causal, .mask = keep}),
                           attention(q, k, v, {.causal = causal, .mask = additive})),
              0.0);
  }
}

TEST(Attention, CausalAttentionIsTheCausalCase) {
  Tensor q = rand64({2, 3, 70, 8}, 20), k = rand64({2, 3, 70, 8}, 21), v = rand64({2, 3, 70, 8}, 22);
  EXPECT_EQ(max_abs_diff(causal_attention(q, k, v), attention(q, k, v, {.causal = true})), 0.0);
}

TEST(Attention, KvCacheStepEqualsTheFullSequence) {
  // The last query against all keys, causal, equals the last row of the full causal pass.
  Tensor q = rand64({1, 4, 6, 4}, 30), k = rand64({1, 2, 6, 4}, 31), v = rand64({1, 2, 6, 4}, 32);
  Tensor full = attention(q, k, v, {.causal = true});
  Tensor step = attention(q.narrow(2, 5, 1), k, v, {.causal = true});
  EXPECT_LT(max_abs_diff(step, full.narrow(2, 5, 1)), 1e-15);
}

TEST(Attention, Gradcheck) {
  uint64_t seed = 40;
  for (const Case& c : kCases) {
    if (c.q[2] > 10) continue;  // finite differences over every element: small cases only
    for (bool masked : {false, true}) {
      Tensor mask = masked ? rand64({c.q[2], c.kv[2]}, seed++) : Tensor();
      auto f = [&](V in) { return attention(in[0], in[1], in[2], {.causal = c.causal, .mask = mask}); };
      expect_gradients_match(f, {leaf64(c.q, seed), leaf64(c.kv, seed + 1), leaf64(c.kv, seed + 2)});
      seed += 3;
    }
  }
  // Several row blocks with kv heads shared, one feature per head.
  auto f = [](V in) { return attention(in[0], in[1], in[2], {.causal = true}); };
  expect_gradients_match(f, {leaf64({1, 2, 130, 1}, 60), leaf64({1, 1, 135, 1}, 61), leaf64({1, 1, 135, 1}, 62)});
  // Only k requires grad; strided time-major q.
  expect_gradients_match(
      [](V in) {
        return attention(in[0].transpose(1, 2), in[1], rand64({1, 1, 5, 3}, 63), {.causal = true});
      },
      {rand64({1, 4, 2, 3}, 64), leaf64({1, 1, 5, 3}, 65)});
}

TEST(Attention, Float32WithinDerivedErrorBound) {
  // Grouped heads, causal with more keys than queries, an additive mask: the float32 inputs
  // in float64 give the exact values, attention_error_bounds.h the float32 error's bound.
  const Shape sq{2, 8, 100, 32}, skv{2, 2, 120, 32};
  std::vector<Tensor> in32, in64;
  std::vector<std::vector<double>> values;
  uint64_t seed = 70;
  for (const Shape& s : {sq, skv, skv}) {
    Tensor x = rand64(s, seed++).to(DType::Float32);
    in32.push_back(x.detach().set_requires_grad(true));
    in64.push_back(x.to(DType::Float64).set_requires_grad(true));
    values.push_back(x.to_vector<double>());
  }
  Tensor mask = rand64({1, 1, 100, 120}, seed++).to(DType::Float32);
  Tensor y32 = attention(in32[0], in32[1], in32[2], {.causal = true, .mask = mask});
  Tensor y64 = attention(in64[0], in64[1], in64[2], {.causal = true, .mask = mask.to(DType::Float64)});
  Tensor g = rand64(sq, seed).to(DType::Float32);
  y32.backward(g);
  y64.backward(g.to(DType::Float64));
  const strata::test::AttentionBounds b = strata::test::attention_bounds(
      values[0], values[1], values[2], mask.to_vector<double>(), g.to_vector<double>(), {2, 8, 2, 100, 120, 32, true});
  const std::vector<const std::vector<strata::test::Bounded>*> grads = {&b.dq, &b.dk, &b.dv};
  EXPECT_TRUE(strata::test::within_error_bounds(y32.to_vector<double>(), b.out, "gqa attention"));
  EXPECT_TRUE(strata::test::within_error_bounds(y64.to_vector<double>(), b.out, "gqa attention float64"));
  for (int i = 0; i < 3; ++i) {
    const std::string what = "gqa attention gradient of input " + std::to_string(i);
    EXPECT_TRUE(strata::test::within_error_bounds(in32[i].grad().to_vector<double>(), *grads[i], what));
    EXPECT_TRUE(strata::test::within_error_bounds(in64[i].grad().to_vector<double>(), *grads[i], what + " float64"));
  }
  // The bound is a real check: attention without the 1 / sqrt(D) scale, or without the mask,
  // lies far outside it.
  Tensor unscaled =
      attention(in64[0], in64[1], in64[2], {.causal = true, .mask = mask.to(DType::Float64), .scale = 1.0});
  EXPECT_FALSE(
      strata::test::within_error_bounds(unscaled.to_vector<double>(), b.out, "gqa attention without the scale"));
  Tensor unmasked = attention(in64[0], in64[1], in64[2], {.causal = true});
  EXPECT_FALSE(
      strata::test::within_error_bounds(unmasked.to_vector<double>(), b.out, "gqa attention without the mask"));
}

TEST(Attention, NoGradPathMatches) {
  Tensor q = leaf64({1, 4, 70, 8}, 80), k = leaf64({1, 2, 90, 8}, 81), v = leaf64({1, 2, 90, 8}, 82);
  Tensor with_grad = attention(q, k, v, {.causal = true});
  NoGradGuard no_grad;
  EXPECT_EQ(max_abs_diff(with_grad, attention(q, k, v, {.causal = true})), 0.0);
}

TEST(Attention, RowWithEveryKeyMaskedIsNaN) {
  // As in torch: a query that may see no key has no defined output; the others are unaffected.
  Tensor q = rand64({1, 2, 3, 4}, 83), kv = rand64({1, 1, 3, 4}, 84);
  Tensor mask = zeros({3, 3}, {.dtype = DType::Float64});
  mask.data<double>()[0] = -kInf;  // query 0 sees only key 0 when causal
  std::vector<double> y = attention(q, kv, kv, {.causal = true, .mask = mask}).to_vector<double>();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(std::isnan(y[i]), (i / 4) % 3 == 0) << "element " << i;
}

TEST(Attention, NoQueriesGiveZeroKeyGradients) {
  Tensor q = leaf64({1, 2, 0, 3}, 85), k = leaf64({1, 1, 4, 3}, 86), v = leaf64({1, 1, 4, 3}, 87);
  sum(attention(q, k, v, {.causal = true})).backward();
  EXPECT_EQ(max_abs_diff(k.grad(), zeros_like(k)), 0.0);
  EXPECT_EQ(max_abs_diff(v.grad(), zeros_like(v)), 0.0);
}

TEST(Attention, Errors) {
  Tensor q = ones({1, 4, 3, 8}), kv = ones({1, 3, 3, 8});
  expect_error_mentions([&] { attention(q, kv, kv); }, {"attention", "4 heads", "3", "[1, 4, 3, 8]", "[1, 3, 3, 8]"});
  expect_error_mentions(
      [&] {
        attention(q, ones({1, 2, 3, 4}), ones({1, 2, 3, 4}));
      },
      {"attention", "k has shape [1, 2, 3, 4]", "q has shape [1, 4, 3, 8]"});
  expect_error_mentions(
      [&] {
        attention(q, ones({1, 2, 3, 8}), ones({1, 2, 4, 8}));
      },
      {"attention", "v has shape [1, 2, 4, 8]"});
  expect_error_mentions(
      [&] {
        attention(q, ones({1, 2, 2, 8}), ones({1, 2, 2, 8}), {.causal = true});
      },
      {"attention", "causal", "3", "2"});
  expect_error_mentions(
      [&] {
        attention(q, ones({1, 2, 3, 8}), ones({1, 2, 3, 8}), {.mask = ones({2, 3})});
      },
      {"attention", "mask of shape [2, 3]", "[1, 4, 3, 3]"});
  expect_error_mentions(
      [&] {
        attention(q, ones({1, 2, 3, 8}), ones({1, 2, 3, 8}), {.mask = ones({2, 1, 1, 1, 3})});
      },
      {"attention", "mask"});
  expect_error_mentions(
      [&] {
        attention(q, ones({1, 2, 3, 8}), ones({1, 2, 3, 8}), {.mask = ones({3, 3}, {.dtype = DType::Int32})});
      },
      {"attention", "mask has dtype int32", "Bool"});
  Tensor learned = ones({3, 3}).set_requires_grad(true);
  expect_error_mentions(
      [&] {
        attention(q, ones({1, 2, 3, 8}), ones({1, 2, 3, 8}), {.mask = learned});
      },
      {"attention", "mask", "requires grad"});
  expect_error_mentions(
      [&] {
        attention(ones({4, 3, 8}), ones({4, 3, 8}), ones({4, 3, 8}));
      },
      {"attention", "q must be [B, heads, T, D]"});
}
