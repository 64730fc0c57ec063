// autograd::DetectAnomaly: a nan or inf made in forward is refused at the op that made it, one
// made in backward at the node that returned it, each named with the index and shape; with
// the mode off (the default) nothing is checked and results are unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "backend/dispatch/non_finite.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::error_of;
using strata::testing::expect_contains;

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor leaf(const std::vector<float>& values, const Shape& shape) {
  return from_vector(values, shape).set_requires_grad(true);
}

// x * 1 forward; a backward whose gradient for x is nan everywhere (a broken hand-written
// backward, the case anomaly mode exists for).
struct NanGradient : autograd::Function<NanGradient> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return mul(x, 1.0); }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> grads) {
    return {full(grads[0].shape(), kNan)};
  }
};

TEST(AnomalyMode, OffByDefaultAndTheGuardRestoresTheOuterSetting) {
  EXPECT_FALSE(autograd::anomaly_mode_enabled());
  {
    autograd::DetectAnomaly on;
    EXPECT_TRUE(autograd::anomaly_mode_enabled());
    {
      autograd::DetectAnomaly off(false);
      EXPECT_FALSE(autograd::anomaly_mode_enabled());
    }
    EXPECT_TRUE(autograd::anomaly_mode_enabled());
    bool other_thread = true;
    std::thread([&] { other_thread = autograd::anomaly_mode_enabled(); }).join();
    EXPECT_FALSE(other_thread) << "the flag is per thread, like grad mode";
  }
  EXPECT_FALSE(autograd::anomaly_mode_enabled());
}

TEST(AnomalyMode, NanMadeInForwardNamesTheOpTheOutputAndItsShape) {
  Tensor x = leaf({1, 2, -1, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(std::isnan(log(x).to_vector<float>()[2])) << "off: the nan passes unchecked";
  autograd::DetectAnomaly anomaly;
  const std::string msg = error_of([&] { (void)log(x); });
  expect_contains(msg, "anomaly detected");
  expect_contains(msg, "in forward, output 0 of LogBackward");
  expect_contains(msg, "1 nan and 0 +inf of its 6 elements");
  expect_contains(msg, "[2, 3]");
  expect_contains(msg, "the first at element 2");
}

TEST(AnomalyMode, InfMadeInForwardIsCountedAsInf) {
  Tensor a = leaf({1, 2, 3}, {3});
  Tensor b = from_vector(std::vector<float>{1, 0, 0}, {3});
  autograd::DetectAnomaly anomaly;
  const std::string msg = error_of([&] { (void)div(a, b); });
  expect_contains(msg, "output 0 of DivBackward");
  expect_contains(msg, "0 nan and 2 +inf of its 3 elements");
  expect_contains(msg, "the first at element 1");
}

// -inf is a value forward passes make on purpose (attention's additive masks), so forward lets
// it pass; an infinite gradient never is.
TEST(AnomalyMode, ForwardAllowsMinusInfBackwardRefusesAnyInf) {
  Tensor x = leaf({1, 0, 2}, {3});
  autograd::DetectAnomaly anomaly;
  Tensor y = log(x);  // [0, -inf, log 2]: no error
  EXPECT_TRUE(std::isinf(y.to_vector<float>()[1]));
  const Tensor keep = gt(from_vector(std::vector<float>{1, 0, 1, 1, 1, 0}, {2, 3}), 0.5);  // bool [Tq, Tk]
  Tensor q = ones({1, 1, 2, 4}).set_requires_grad(true);
  Tensor masked = attention(q, ones({1, 1, 3, 4}), ones({1, 1, 3, 4}), {.mask = keep});  // scores + (0 or -inf)
  EXPECT_EQ(masked.shape(), Shape({1, 1, 2, 4}));
  const std::string msg = error_of([&] { sum(y).backward(); });  // d log(x) / dx = 1 / 0 at x = 0
  expect_contains(msg, "in backward, the gradient for input 0 of LogBackward holds 0 nan and 1 inf of its 3");
  expect_contains(msg, "the first at element 1");
}

TEST(AnomalyMode, NanMadeInBackwardNamesTheNodeAndTheInput) {
  Tensor w = leaf({1, 2, 3, 4}, {2, 2});
  Tensor x = leaf({1, 1, 1, 1}, {2, 2});
  {  // off: the nan reaches the leaves' gradients
    Tensor loss = sum(mul(NanGradient::apply(x), w));
    loss.backward();
    EXPECT_TRUE(std::isnan(x.grad().to_vector<float>()[0]));
  }
  x.set_grad(Tensor());
  autograd::DetectAnomaly anomaly;
  Tensor loss = sum(mul(NanGradient::apply(x), w));  // finite forward: no error yet
  const std::string msg = error_of([&] { loss.backward(); });
  expect_contains(msg, "in backward, the gradient for input 0 of ");
  expect_contains(msg, "NanGradient");
  expect_contains(msg, "4 nan and 0 inf of its 4 elements");
  expect_contains(msg, "[2, 2]");
  EXPECT_FALSE(x.grad().defined()) << "the nan never reached the leaf";
}

TEST(AnomalyMode, ATinyGptTrainsBitForBitTheSameWithTheModeOn) {
  const nn::GPTConfig config{.vocab_size = 11, .context = 6, .n_layer = 1, .n_head = 2, .n_embd = 8, .seed = 3};
  const Tensor tokens = from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1}, {2, 6});
  const Tensor targets = from_vector(std::vector<int64_t>{2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1, 2}, {2, 6});
  auto run = [&](bool anomaly) {
    nn::GPT model(config);
    autograd::DetectAnomaly mode(anomaly);
    Tensor loss = model.loss(tokens, targets);
    loss.backward();
    std::vector<float> out = loss.to_vector<float>();
    for (const Tensor& p : model.parameters()) {
      const std::vector<float> g = p.grad().to_vector<float>();
      out.insert(out.end(), g.begin(), g.end());
    }
    return out;
  };
  const std::vector<float> off = run(false);
  const std::vector<float> on = run(true);
  ASSERT_EQ(on.size(), off.size());
  for (size_t i = 0; i < on.size(); ++i) ASSERT_EQ(on[i], off[i]) << "entry " << i;
}

TEST(NonFiniteCount, CountsEveryFloatingDtypeAndStridedViews) {
  const Tensor t = from_vector(std::vector<double>{1, kNan, 3, kInf, -kInf, 6}, {2, 3});
  for (DType dtype : {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16}) {
    const backend::NonFiniteCount c = backend::count_non_finite(t.to(dtype));
    EXPECT_EQ(c.nan, 1) << dtype;
    EXPECT_EQ(c.inf, 2) << dtype;
    EXPECT_EQ(c.first, 1) << dtype;
  }
  const backend::NonFiniteCount column =
      backend::count_non_finite(t.transpose(0, 1));  // [[1, inf], [nan, -inf], [3, 6]]
  EXPECT_EQ(column.nan, 1);
  EXPECT_EQ(column.inf, 2);
  EXPECT_EQ(column.first, 1);
  const backend::NonFiniteCount no_minus = backend::count_non_finite(t, /*negative_inf=*/false);
  EXPECT_EQ(no_minus.inf, 1);
  EXPECT_EQ(no_minus.first, 1);
  EXPECT_FALSE(backend::count_non_finite(full({2}, -kInf), false).any());
  EXPECT_FALSE(backend::count_non_finite(from_vector(std::vector<int64_t>{1, 2}, {2})).any());
  EXPECT_FALSE(backend::count_non_finite(full({3}, 1e300, {.dtype = DType::Float64})).any());
}

}  // namespace
