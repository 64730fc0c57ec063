// autograd::Function: custom ops with a hand-written backward, checked against float64
// finite differences on functions strata has no op for (sin, cos).
#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::autograd::AutogradContext;
using strata::testing::expect_error_mentions;
using strata::testing::expect_gradients_match;
using strata::testing::leaf64;

namespace {

// f applied to every element of a float64 tensor, as a new contiguous tensor (no autograd).
Tensor map64(const Tensor& t, double (*f)(double)) {
  std::vector<double> v = t.to_vector<double>();
  for (double& x : v) x = f(x);
  return from_vector(v, t.shape());
}
double sin_of(double x) { return std::sin(x); }
double cos_of(double x) { return std::cos(x); }

// scale * x * sin(y), saving its inputs and the scale.
struct ScaledXSinY : autograd::Function<ScaledXSinY> {
  static inline std::vector<bool> seen_needs;  // needs_input_grad as forward saw it

  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& y, double scale) {
    seen_needs = {ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)};
    ctx->save_for_backward({x, y});
    ctx->saved_data["scale"] = scale;
    return mul(mul(x, map64(y, sin_of)), scale);
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    const auto& saved = ctx->get_saved_variables();
    const double scale = std::get<double>(ctx->saved_data.at("scale"));
    Tensor g = mul(grads[0], scale);
    Tensor gx = ctx->needs_input_grad(0) ? mul(g, map64(saved[1], sin_of)) : Tensor();
    Tensor gy = ctx->needs_input_grad(1) ? mul(mul(g, saved[0]), map64(saved[1], cos_of)) : Tensor();
    return {gx, gy, Tensor()};
  }
};

// Two outputs: sin(x) and cos(x).
struct SinCos : autograd::Function<SinCos> {
  static std::vector<Tensor> forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return {map64(x, sin_of), map64(x, cos_of)};
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    Tensor x = ctx->get_saved_variables()[0];
    return {sub(mul(grads[0], map64(x, cos_of)), mul(grads[1], map64(x, sin_of)))};
  }
};

// 2x and a 0/1 mask of x > 0 marked non-differentiable; records the mask's incoming gradient.
struct DoubleWithMask : autograd::Function<DoubleWithMask> {
  static inline Tensor mask_grad_seen;
  static std::vector<Tensor> forward(AutogradContext* ctx, const Tensor& x) {
    Tensor mask = map64(x, [](double v) { return v > 0 ? 1.0 : 0.0; });
    ctx->mark_non_differentiable({mask});
    return {mul(x, 2.0), mask};
  }
  static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> grads) {
    mask_grad_seen = grads[1];
    return {mul(grads[0], 2.0)};
  }
};

// Returns its input unchanged; backward doubles (so the test sees it ran).
struct PassThrough : autograd::Function<PassThrough> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x; }
  static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> grads) { return {mul(grads[0], 2.0)}; }
};

// The example in custom_function.h's header comment, as written there.
struct ScaledTanh : autograd::Function<ScaledTanh> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, double scale) {
    Tensor y = mul(tanh(x), scale);
    ctx->save_for_backward({y});
    ctx->saved_data["scale"] = scale;
    return y;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
    Tensor y = ctx->get_saved_variables()[0];
    double s = std::get<double>(ctx->saved_data["scale"]);
    // d/dx s tanh(x) = s (1 - tanh^2) = s - y^2 / s
    return {mul(grads[0], add(mul(mul(y, y), -1.0 / s), s)), Tensor()};  // one per argument
  }
};

// Returns one tensor twice, as two outputs.
struct Twice : autograd::Function<Twice> {
  static std::vector<Tensor> forward(AutogradContext*, const Tensor& x) {
    Tensor y = mul(x, 3.0);
    return {y, y};
  }
  static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> grads) {
    return {mul(add(grads[0], grads[1]), 3.0)};
  }
};

// backward returns too few gradients.
struct WrongCount : autograd::Function<WrongCount> {
  static Tensor forward(AutogradContext*, const Tensor& x, const Tensor& y) { return add(x, y); }
  static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> grads) { return {grads[0]}; }
};

}  // namespace

TEST(AutogradFunction, GradientsMatchFiniteDifferences) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ScaledXSinY::apply(in[0], in[1], 1.5); },
                         {leaf64({3, 4}, 1), leaf64({3, 4}, 2)});
}

TEST(AutogradFunction, TheHeaderExampleIsRight) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ScaledTanh::apply(in[0], 2.0); },
                         {leaf64({5}, 14)});
}

TEST(AutogradFunction, NeedsInputGradFollowsTheInputs) {
  Tensor x = leaf64({5}, 3);
  Tensor y = strata::testing::rand64({5}, 4);  // constant
  Tensor z = ScaledXSinY::apply(x, y, 2.0);
  EXPECT_EQ(ScaledXSinY::seen_needs, (std::vector<bool>{true, false, false}));
  ASSERT_TRUE(z.requires_grad());
  EXPECT_EQ(z.grad_fn()->name().find("ScaledXSinY") != std::string_view::npos, true) << z.grad_fn()->name();
  sum(z).backward();
  EXPECT_TRUE(allclose(x.grad(), mul(map64(y, sin_of), 2.0), 1e-12, 1e-12));
  EXPECT_FALSE(y.grad().defined());
}

TEST(AutogradFunction, NoNodeWithoutGradMode) {
  Tensor x = leaf64({2}, 5);
  NoGradGuard no_grad;
  Tensor z = ScaledXSinY::apply(x, x, 1.0);
  EXPECT_FALSE(z.requires_grad());
  EXPECT_EQ(ScaledXSinY::seen_needs, (std::vector<bool>{false, false, false}));
}

TEST(AutogradFunction, MultipleOutputsMatchFiniteDifferences) {
  expect_gradients_match(
      [](const std::vector<Tensor>& in) {
        std::vector<Tensor> sc = SinCos::apply(in[0]);
        return add(sc[0], mul(sc[1], 3.0));
      },
      {leaf64({6}, 6)});
}

TEST(AutogradFunction, AnUnusedOutputGetsZeroGradient) {
  Tensor x = leaf64({4}, 7);
  std::vector<Tensor> sc = SinCos::apply(x);
  sum(sc[1]).backward();  // only cos used: d/dx = -sin(x)
  EXPECT_TRUE(allclose(x.grad(), neg(map64(x.detach(), sin_of)), 1e-12, 1e-12));
}

TEST(AutogradFunction, NonDifferentiableOutputs) {
  Tensor x = leaf64({4}, 8);
  std::vector<Tensor> out = DoubleWithMask::apply(x);
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[1].requires_grad());
  sum(out[0]).backward();
  EXPECT_TRUE(allclose(x.grad(), full({4}, 2.0, {.dtype = DType::Float64})));
  ASSERT_TRUE(DoubleWithMask::mask_grad_seen.defined());
  EXPECT_EQ(max_abs_diff(DoubleWithMask::mask_grad_seen, zeros({4}, {.dtype = DType::Float64})), 0.0);
}

TEST(AutogradFunction, ReturningAnInputGivesANewHandle) {
  Tensor x = leaf64({3}, 9);
  Tensor y = PassThrough::apply(x);
  EXPECT_FALSE(y.is_same(x));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(y.is_leaf());
  sum(y).backward();
  EXPECT_TRUE(allclose(x.grad(), full({3}, 2.0, {.dtype = DType::Float64})));
}

TEST(AutogradFunction, OneTensorReturnedTwiceIsTwoOutputs) {
  Tensor x = leaf64({2}, 13);
  std::vector<Tensor> out = Twice::apply(x);
  EXPECT_FALSE(out[0].is_same(out[1]));
  add(sum(out[0]), sum(mul(out[1], 2.0))).backward();
  EXPECT_TRUE(allclose(x.grad(), full({2}, 9.0, {.dtype = DType::Float64})));
}

TEST(AutogradFunction, WrongGradientCountIsNamed) {
  Tensor x = leaf64({2}, 10), y = leaf64({2}, 11);
  Tensor z = WrongCount::apply(x, y);
  expect_error_mentions([&] { sum(z).backward(); }, {"WrongCount", "returned 1 gradients", "(2)"});
}

TEST(AutogradFunction, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf64({1}, 12);
  Tensor z = ScaledXSinY::apply(x, x, 1.0);  // one element: the custom node is the root
  z.backward(Tensor(), /*retain_graph=*/true);
  Tensor first = x.grad().clone();
  z.backward();  // the saved tensors are still there
  EXPECT_TRUE(allclose(x.grad(), mul(first, 2.0), 1e-12, 1e-12));
  expect_error_mentions([&] { z.backward(); }, {"ScaledXSinY", "retain_graph"});
}
