// autocast's weight cache (strata/ops/autocast.h): within one scope a float32 parameter used
// by several products is cast to the 16-bit dtype once and the cast reused; an in-place
// update (a new version) or the scope's end drops it; backward casts no parameter again,
// and the results are the same bits as with the cache off (torch's cache_enabled=False).
#include <gtest/gtest.h>

#include <vector>

#include "strata/strata.h"
#include "test_util.h"

namespace strata {
namespace {

struct TwiceResult {
  Tensor out, dx, dw, db;
  autocast::Counters forward, after_backward;
};

// y = lin(gelu(lin(x))): one weight and one bias used by two products.
TwiceResult layer_called_twice(bool cache) {
  Generator gen(11);
  nn::Linear lin(24, 24);
  {
    NoGradGuard no_grad;  // the same parameters for both runs
    lin.weight.copy_(mul(randn({24, 24}, {}, &gen), 0.2));
    lin.bias.copy_(randn({24}, {}, &gen));
  }
  Tensor x = randn({5, 24}, {}, &gen).set_requires_grad(true);
  const Tensor g = randn({5, 24}, {}, &gen);
  TwiceResult r;
  autocast::reset_counters();
  {
    autocast::Scope scope(DType::BFloat16, {.weight_cache = cache});
    r.out = lin.forward(gelu(lin.forward(x)));
  }
  r.forward = autocast::counters();
  r.out.backward(g);
  r.after_backward = autocast::counters();
  r.dx = x.grad();
  r.dw = lin.weight.grad();
  r.db = lin.bias.grad();
  return r;
}

void expect_same_bits(const Tensor& a, const Tensor& b, const char* what) {
  ASSERT_EQ(a.to_vector<float>(), b.to_vector<float>()) << what;
}

TEST(AutocastWeightCache, ALayerCalledTwiceCastsItsParametersOnce) {
  const TwiceResult cached = layer_called_twice(true), uncached = layer_called_twice(false);
  // Weight and bias: one cast each, then two hits; without the cache, one cast per use.
  EXPECT_EQ(cached.forward.parameter_casts, 2);
  EXPECT_EQ(cached.forward.cache_hits, 2);
  EXPECT_EQ(uncached.forward.parameter_casts, 4);
  EXPECT_EQ(uncached.forward.cache_hits, 0);
  // Backward reuses the 16-bit operands its products saved: no parameter is cast again.
  EXPECT_EQ(cached.after_backward.parameter_casts, cached.forward.parameter_casts);
  EXPECT_EQ(uncached.after_backward.parameter_casts, uncached.forward.parameter_casts);
  // Same bits with and without the cache; the gradients reach the float32 parameters.
  EXPECT_EQ(cached.dw.dtype(), DType::Float32);
  EXPECT_EQ(cached.db.dtype(), DType::Float32);
  expect_same_bits(cached.out, uncached.out, "output");
  expect_same_bits(cached.dx, uncached.dx, "dx");
  expect_same_bits(cached.dw, uncached.dw, "dweight");
  expect_same_bits(cached.db, uncached.db, "dbias");
}

TEST(AutocastWeightCache, AnUpdateOrANewScopeCastsAgain) {
  Generator gen(12);
  nn::Linear lin(8, 8, /*bias=*/false);
  const Tensor x = randn({3, 8}, {}, &gen);
  autocast::reset_counters();
  Tensor before, after;
  {
    autocast::Scope scope;
    before = lin.forward(x);
    {
      NoGradGuard no_grad;
      mul_(lin.weight, 2.0);  // an optimizer-like in-place step: a new version
    }
    after = lin.forward(x);
    EXPECT_EQ(autocast::counters().parameter_casts, 2);
    EXPECT_EQ(autocast::counters().cache_hits, 0);
    lin.forward(x);  // same version: a hit
    EXPECT_EQ(autocast::counters().cache_hits, 1);
  }
  // Doubling is exact in bfloat16, so the stale cast would have given `before` again.
  expect_same_bits(after, mul(before, 2.0), "after the update");
  {
    autocast::Scope next_step;
    lin.forward(x);
  }
  EXPECT_EQ(autocast::counters().parameter_casts, 3) << "the cache outlived its scope";
}

TEST(AutocastWeightCache, OnlyParametersAreCached) {
  Generator gen(13);
  const Tensor a = randn({4, 6}, {}, &gen), b = randn({6, 4}, {}, &gen);  // no grad: not parameters
  autocast::reset_counters();
  autocast::Scope scope;
  matmul(a, b);
  matmul(a, b);
  EXPECT_EQ(autocast::counters().parameter_casts, 0);
  EXPECT_EQ(autocast::counters().cache_hits, 0);
  // Two operands cast and one float32 result per product.
  EXPECT_EQ(autocast::counters().conversions, 6);
}

}  // namespace
}  // namespace strata
