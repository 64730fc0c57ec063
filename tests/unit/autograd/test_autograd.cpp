#include <gtest/gtest.h>

#include "gradcheck.h"
#include "strata/strata.h"

using namespace strata;
using strata::testing::expect_gradients_match;
using strata::testing::leaf64;

TEST(Autograd, AccumulatesIntoLeaves) {
  Tensor x = full({3}, 2.0, {.requires_grad = true});
  Tensor y = mul(x, x);  // dy/dx = 2x = 4
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4, 4, 4}));
  sum(mul(x, 3.0)).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{7, 7, 7}));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward");
}

TEST(Autograd, NoGradGuardStopsRecording) {
  Tensor x = ones({2}, {.requires_grad = true});
  {
    NoGradGuard g;
    Tensor y = mul(x, 2.0);
    EXPECT_FALSE(y.requires_grad());
  }
  EXPECT_TRUE(grad_enabled());
  EXPECT_TRUE(mul(x, 2.0).requires_grad());
}

TEST(Autograd, RetainGraphAndFreedGraphError) {
  Tensor x = ones({2}, {.requires_grad = true});
  Tensor loss = sum(exp(x));
  loss.backward({}, /*retain_graph=*/true);
  loss.backward();
  EXPECT_NEAR(x.grad().to_vector<float>()[0], 2 * std::exp(1.0), 1e-5);
  try {
    loss.backward();
    FAIL() << "backward through a freed graph must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(Autograd, DeepChainDoesNotOverflowTheStack) {
  Tensor x = ones({1}, {.dtype = DType::Float64, .requires_grad = true});
  Tensor y = x;
  for (int i = 0; i < 10000; ++i) y = add(y, 1e-3);
  Tensor z = y;
  for (int i = 0; i < 10000; ++i) z = mul(z, 1.0);
  z.backward();
  EXPECT_EQ(x.grad().item(), 1.0);
  // Dropping a 20k-node graph must not recurse either.
  y = Tensor();
  z = Tensor();
}

TEST(Autograd, DiamondSumsBothPaths) {
  Tensor x = leaf64({3}, 1);
  Tensor a = mul(x, 2.0), b = mul(x, 3.0);
  sum(add(a, b)).backward();
  for (double g : x.grad().to_vector<double>()) EXPECT_DOUBLE_EQ(g, 5.0);
}

TEST(Autograd, GradientShapeErrors) {
  Tensor x = ones({2, 3}, {.requires_grad = true});
  Tensor y = mul(x, 2.0);
  EXPECT_THROW(y.backward(), Error);              // not scalar and no gradient
  EXPECT_THROW(y.backward(ones({3, 2})), Error);  // wrong shape
  EXPECT_THROW(zeros({1}).backward(), Error);     // does not require grad
  // A custom node returning a wrongly shaped gradient is named in the error.
  Tensor out = zeros({2, 3});
  autograd::record("BadBackward", {x}, {out}, {},
                   [](autograd::BackwardContext&) { return std::vector<Tensor>{ones({5})}; });
  try {
    sum(out).backward();
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("BadBackward"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[5]"), std::string::npos) << msg;
  }
}

TEST(Autograd, PostAccumulateHooksAndFinalCallbacks) {
  Tensor w1 = ones({2}, {.requires_grad = true});
  Tensor w2 = ones({2}, {.requires_grad = true});
  std::vector<std::string> events;
  w1.register_post_accumulate_grad_hook([&](Tensor& t) {
    events.push_back("w1:" + std::to_string(t.grad().to_vector<float>()[0]));
    autograd::queue_final_callback([&] { events.push_back("final"); });
  });
  w2.register_post_accumulate_grad_hook([&](Tensor&) { events.push_back("w2"); });
  // w2 is used last in forward, so its gradient is ready first.
  Tensor h = mul(w1, 3.0);
  Tensor loss = sum(mul(h, w2));
  loss.backward();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0], "w2");
  EXPECT_EQ(events[1].substr(0, 5), "w1:3.");
  EXPECT_EQ(events[2], "final");
  EXPECT_FALSE(autograd::in_backward());
  EXPECT_THROW(autograd::queue_final_callback([] {}), Error);
}

TEST(Autograd, GradIsAccumulatedInPlaceIntoAPresetView) {
  // DDP points .grad() at a slice of a flat bucket; accumulation must write through it.
  Tensor bucket = zeros({5});
  Tensor w = ones({3}, {.requires_grad = true});
  w.set_grad(bucket.narrow(0, 1, 3));
  sum(mul(w, 2.0)).backward();
  EXPECT_EQ(bucket.to_vector<float>(), (std::vector<float>{0, 2, 2, 2, 0}));
  EXPECT_THROW(w.set_grad(zeros({4})), Error);
}

TEST(Autograd, DetachAndLeafRules) {
  Tensor x = ones({2}, {.requires_grad = true});
  Tensor y = mul(x, 2.0);
  EXPECT_FALSE(y.detach().requires_grad());
  EXPECT_THROW(y.set_requires_grad(false), Error);
  EXPECT_THROW(ones({2}, {.dtype = DType::Int64}).set_requires_grad(true), Error);
  EXPECT_THROW(x.fill_(1), Error);  // in-place on a leaf that requires grad
}

TEST(Gradcheck, Elementwise) {
  using V = const std::vector<Tensor>&;
  expect_gradients_match([](V in) { return add(in[0], in[1]); }, {leaf64({3, 4}, 1), leaf64({4}, 2)});
  expect_gradients_match([](V in) { return sub(in[0], in[1]); }, {leaf64({2, 1, 3}, 3), leaf64({4, 1}, 4)});
  expect_gradients_match([](V in) { return mul(in[0], in[1]); }, {leaf64({3, 4}, 5), leaf64({3, 1}, 6)});
  expect_gradients_match([](V in) { return div(in[0], add(mul(in[1], in[1]), 1.0)); },
                         {leaf64({2, 3}, 7), leaf64({2, 3}, 8)});
  expect_gradients_match([](V in) { return exp(in[0]); }, {leaf64({5}, 9)});
  expect_gradients_match([](V in) { return log(add(mul(in[0], in[0]), 0.5)); }, {leaf64({5}, 10)});
  expect_gradients_match([](V in) { return sqrt(add(mul(in[0], in[0]), 0.5)); }, {leaf64({5}, 11)});
  expect_gradients_match([](V in) { return tanh(in[0]); }, {leaf64({2, 3}, 12)});
  expect_gradients_match([](V in) { return pow(add(mul(in[0], in[0]), 1.0), 1.5); }, {leaf64({4}, 13)});
  expect_gradients_match([](V in) { return neg(mul(in[0], -2.5)); }, {leaf64({4}, 14)});
}

TEST(Gradcheck, ViewsAndReductions) {
  using V = const std::vector<Tensor>&;
  expect_gradients_match([](V in) { return in[0].transpose(0, 1).contiguous().view({-1}); }, {leaf64({3, 4}, 1)});
  expect_gradients_match([](V in) { return in[0].permute({2, 0, 1}); }, {leaf64({2, 3, 4}, 2)});
  expect_gradients_match([](V in) { return in[0].narrow(1, 1, 2); }, {leaf64({2, 4}, 3)});
  expect_gradients_match([](V in) { return in[0].select(0, 1); }, {leaf64({3, 2}, 4)});
  expect_gradients_match([](V in) { return in[0].unsqueeze(1).expand({3, 4, 2}); }, {leaf64({3, 2}, 5)});
  expect_gradients_match([](V in) { return in[0].reshape({6}); }, {leaf64({2, 3}, 6)});
  expect_gradients_match([](V in) { return sum(in[0]); }, {leaf64({2, 3}, 7)});
  expect_gradients_match([](V in) { return sum(in[0], {0, 2}); }, {leaf64({2, 3, 4}, 8)});
  expect_gradients_match([](V in) { return sum(in[0], {1}, true); }, {leaf64({2, 3, 4}, 9)});
  expect_gradients_match([](V in) { return mean(in[0], {-1}); }, {leaf64({3, 5}, 10)});
  expect_gradients_match([](V in) { return mean(in[0]); }, {leaf64({3, 5}, 11)});
  expect_gradients_match([](V in) { return max(in[0], 1); }, {leaf64({3, 5}, 12)});
  expect_gradients_match([](V in) { return sum_to(in[0], {1, 4}); }, {leaf64({3, 2, 4}, 13)});
  expect_gradients_match([](V in) { return in[0].to(DType::Float32).to(DType::Float64); }, {leaf64({3}, 14)}, 1e-2,
                         1e-4, 1e-3);  // float32 round trip: only float precision
}

TEST(Reduce, Values) {
  Tensor x = arange(0, 6, 1, {.dtype = DType::Float32}).view({2, 3});
  EXPECT_EQ(sum(x).item(), 15.0);
  EXPECT_EQ(sum(x, {0}).to_vector<float>(), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(sum(x, {1}).to_vector<float>(), (std::vector<float>{3, 12}));
  EXPECT_EQ(sum(x, {1}, true).shape(), Shape({2, 1}));
  EXPECT_EQ(mean(x, {0}).to_vector<float>(), (std::vector<float>{1.5, 2.5, 3.5}));
  EXPECT_EQ(max(x, 1).to_vector<float>(), (std::vector<float>{2, 5}));
  EXPECT_EQ(argmax(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(sum(x, {1}).dtype(), DType::Float32);
  EXPECT_THROW(sum(x, {2}), Error);
  EXPECT_THROW(sum(x, {0, 0}), Error);
  EXPECT_THROW(add(x, ones({4})), Error);
  EXPECT_THROW(add(x, ones({3}, {.dtype = DType::Float64})), Error);
}
