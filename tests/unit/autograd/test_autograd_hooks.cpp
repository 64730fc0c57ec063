// Tensor::register_hook: gradient hooks on intermediate tensors, roots and leaves.
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::expect_error_mentions;
using strata::testing::leaf64;

namespace {
Tensor f64(const Shape& shape, double value) { return full(shape, value, {.dtype = DType::Float64}); }
}  // namespace

TEST(GradHook, DoublingAnIntermediateDoublesWhatFlowsThroughIt) {
  Tensor x = leaf64({3}, 1), y = leaf64({3}, 2);
  Tensor h = mul(x, y);
  // loss = sum(3h) + sum(x): only the path through h is doubled.
  h.register_hook([](const Tensor& g) { return mul(g, 2.0); });
  add(sum(mul(h, 3.0)), sum(x)).backward();
  EXPECT_TRUE(allclose(x.grad(), add(mul(y.detach(), 6.0), 1.0), 1e-12, 1e-12));
  EXPECT_TRUE(allclose(y.grad(), mul(x.detach(), 6.0), 1e-12, 1e-12));
}

TEST(GradHook, SeesTheGradientAndAnUndefinedReturnKeepsIt) {
  Tensor x = leaf64({2}, 3);
  Tensor h = mul(x, 4.0);
  Tensor seen;
  h.register_hook([&](const Tensor& g) {
    seen = g.clone();
    return Tensor();
  });
  sum(mul(h, 5.0)).backward();
  ASSERT_TRUE(seen.defined());
  EXPECT_EQ(max_abs_diff(seen, f64({2}, 5.0)), 0.0);
  EXPECT_EQ(max_abs_diff(x.grad(), f64({2}, 20.0)), 0.0);
}

TEST(GradHook, RunsInRegistrationOrderAndOutlivesTheHandle) {
  Tensor x = leaf64({2}, 4);
  Tensor loss;
  {
    Tensor h = mul(x, 1.0);  // the handle goes out of scope before backward
    h.register_hook([](const Tensor& g) { return add(g, 1.0); });
    h.register_hook([](const Tensor& g) { return mul(g, 2.0); });
    loss = sum(h);
  }
  loss.backward();
  EXPECT_EQ(max_abs_diff(x.grad(), f64({2}, 4.0)), 0.0);  // (1 + 1) * 2
}

TEST(GradHook, OnTheRootSeesTheSeed) {
  Tensor x = leaf64({2}, 5);
  Tensor loss = sum(mul(x, 3.0));
  loss.register_hook([](const Tensor& g) { return mul(g, 10.0); });
  loss.backward();
  EXPECT_EQ(max_abs_diff(x.grad(), f64({2}, 30.0)), 0.0);
}

TEST(GradHook, OnALeafRunsBeforeAccumulation) {
  Tensor x = leaf64({2}, 6);
  x.register_hook([](const Tensor& g) { return mul(g, 10.0); });
  Tensor after_accumulation;
  x.register_post_accumulate_grad_hook([&](Tensor& leaf) { after_accumulation = leaf.grad().clone(); });
  sum(mul(x, 2.0)).backward();
  EXPECT_EQ(max_abs_diff(x.grad(), f64({2}, 20.0)), 0.0);
  EXPECT_EQ(max_abs_diff(after_accumulation, f64({2}, 20.0)), 0.0);
  // A second pass: the hook scales only the new gradient (20 + 20), not the sum (10 * 40).
  sum(mul(x, 2.0)).backward();
  EXPECT_EQ(max_abs_diff(x.grad(), f64({2}, 40.0)), 0.0);
}

TEST(GradHook, RemovedHooksNoLongerRun) {
  Tensor x = leaf64({2}, 7);
  GradHookHandle on_leaf = x.register_hook([](const Tensor& g) { return mul(g, 10.0); });
  Tensor h = mul(x, 1.0);
  GradHookHandle on_h = h.register_hook([](const Tensor& g) { return mul(g, 3.0); });
  sum(h).backward(Tensor(), /*retain_graph=*/true);
  EXPECT_EQ(max_abs_diff(x.grad(), f64({2}, 30.0)), 0.0);
  on_leaf.remove();
  on_h.remove();
  on_h.remove();  // twice: nothing
  x.set_grad(Tensor());
  sum(h).backward();
  EXPECT_EQ(max_abs_diff(x.grad(), f64({2}, 1.0)), 0.0);
}

TEST(GradHook, AReplacementMustKeepShapeAndDtype) {
  Tensor x = leaf64({3}, 8);
  Tensor h = mul(x, 1.0);
  h.register_hook([](const Tensor&) { return zeros({2}, {.dtype = DType::Float64}); });
  expect_error_mentions([&] { sum(h).backward(); }, {"gradient hook", "[2]", "[3]"});
}

TEST(GradHook, RefusedOnATensorWithoutGrad) {
  Tensor c = f64({2}, 1.0);
  expect_error_mentions([&] { c.register_hook([](const Tensor& g) { return g; }); }, {"does not require grad"});
}

TEST(GradHook, AStaleHandleCannotRemoveANewerHook) {
  Tensor x = leaf64({2}, 9);
  GradHookHandle first = x.register_hook([](const Tensor& g) { return mul(g, 10.0); });
  GradHookHandle copy = first;
  first.remove();
  x.register_hook([](const Tensor& g) { return mul(g, 3.0); });
  copy.remove();  // its hook is gone already; the newer one must stay
  sum(x).backward();
  EXPECT_EQ(max_abs_diff(x.grad(), f64({2}, 3.0)), 0.0);
}
