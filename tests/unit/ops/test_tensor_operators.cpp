// libtorch's operator and method spellings: scalar-left arithmetic, compound assignment
// (in place, versioned, recorded by autograd), comparison operators, math methods.
#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::expect_error_mentions;
using strata::testing::expect_gradients_match;
using strata::testing::leaf64;

namespace {

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
std::vector<int32_t> ints(const Tensor& t) { return t.to_vector<int32_t>(); }
Tensor vec(std::vector<double> v) {
  const auto n = static_cast<int64_t>(v.size());
  return from_vector(v, {n});
}

}  // namespace

TEST(TensorOperators, ScalarLeftArithmeticValues) {
  Tensor x = vec({1, 2, 4, -0.5});
  EXPECT_EQ(vals(1.0 - x), (std::vector<double>{0, -1, -3, 1.5}));
  EXPECT_EQ(vals(1.0 / x), (std::vector<double>{1, 0.5, 0.25, -2}));
  EXPECT_EQ(vals(1.0 + x), (std::vector<double>{2, 3, 5, 0.5}));
  EXPECT_EQ(vals(2.0 * x), (std::vector<double>{2, 4, 8, -1}));
  Tensor i = from_vector(std::vector<int64_t>{1, 2, 3}, {3});
  EXPECT_EQ(i.dtype(), (10.0 - i).dtype());
  EXPECT_EQ((10.0 - i).to_vector<int64_t>(), (std::vector<int64_t>{9, 8, 7}));
}

TEST(TensorOperators, ScalarLeftArithmeticGradients) {
  auto positive = [](uint64_t seed) {
    Tensor x = leaf64({2, 3}, seed).detach();
    return add(abs(x), 0.5).set_requires_grad(true);
  };
  expect_gradients_match([](const std::vector<Tensor>& in) { return 1.0 - in[0]; }, {leaf64({2, 3}, 1)});
  expect_gradients_match([](const std::vector<Tensor>& in) { return 1.0 + in[0]; }, {leaf64({2, 3}, 2)});
  expect_gradients_match([](const std::vector<Tensor>& in) { return 3.0 / in[0]; }, {positive(3)});
  expect_gradients_match([](const std::vector<Tensor>& in) { return 2.0 * in[0]; }, {leaf64({2, 3}, 4)});
}

TEST(TensorOperators, CompoundAssignmentWritesInPlaceAndBumpsVersion) {
  struct Case {
    const char* name;
    std::function<void(Tensor&)> op;
    std::vector<double> want;
  };
  const Tensor other = vec({2, 4, 8});
  const std::vector<Case> cases = {
      {"+= tensor", [&](Tensor& t) { t += other; }, {3, 6, 11}},
      {"-= tensor", [&](Tensor& t) { t -= other; }, {-1, -2, -5}},
      {"*= tensor", [&](Tensor& t) { t *= other; }, {2, 8, 24}},
      {"/= tensor", [&](Tensor& t) { t /= other; }, {0.5, 0.5, 0.375}},
      {"+= scalar", [](Tensor& t) { t += 1.5; }, {2.5, 3.5, 4.5}},
      {"-= scalar", [](Tensor& t) { t -= 1.5; }, {-0.5, 0.5, 1.5}},
      {"*= scalar", [](Tensor& t) { t *= -2.0; }, {-2, -4, -6}},
      {"/= scalar", [](Tensor& t) { t /= 3.0; }, {1.0 / 3, 2.0 / 3, 1}},
  };
  for (const Case& c : cases) {
    Tensor t = vec({1, 2, 3});
    Tensor view = t.narrow(0, 0, 3);  // shares the memory: sees the write
    const void* data = t.data_ptr();
    const uint64_t before = t.version();
    c.op(t);
    EXPECT_EQ(t.version(), before + 1) << c.name;
    EXPECT_EQ(t.data_ptr(), data) << c.name << ": not in place";
    EXPECT_EQ(vals(view), c.want) << c.name;
  }
  Tensor rows = zeros({2, 3}, {.dtype = DType::Float64});
  rows += vec({1, 2, 3});  // broadcast operand
  EXPECT_EQ(vals(rows), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  Tensor small = vec({1, 2, 3});
  expect_error_mentions(
      [&] {
        small += zeros({2, 3}, {.dtype = DType::Float64});
      },
      {"add_", "[2, 3]", "[3]", "cannot change its shape"});
}

TEST(TensorOperators, CompoundAssignmentOnSavedTensorIsRefusedByBackward) {
  Tensor w = leaf64({3}, 5);
  Tensor x = vec({1, 2, 3});
  Tensor y = mul(w, x);  // saves x for w's gradient
  x += 1.0;              // not recorded (x needs no grad) but versioned
  expect_error_mentions([&] { sum(y).backward(); }, {"modified by an inplace operation", "[3]", "MulBackward"});
  // The same write before the op is fine.
  Tensor x2 = vec({1, 2, 3});
  x2 *= 2.0;
  Tensor y2 = mul(w, x2);
  sum(y2).backward();
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{2, 4, 6}));
}

TEST(TensorOperators, CompoundAssignmentRefusesLeafThatRequiresGrad) {
  Tensor p = leaf64({3}, 6);
  expect_error_mentions([&] { p += 1.0; }, {"add_", "leaf tensor that requires grad", "in-place", "NoGradGuard"});
  expect_error_mentions([&] { p *= vec({1, 2, 3}); }, {"mul_", "leaf"});
  {
    NoGradGuard no_grad;  // an optimizer's update
    const uint64_t v = p.version();
    p -= 1.0;
    EXPECT_EQ(p.version(), v + 1);
    EXPECT_TRUE(p.is_leaf());
  }
}

TEST(TensorOperators, CompoundAssignmentOnSharedMemoryIsRefusedWhenRecorded) {
  Tensor w = leaf64({2, 3}, 7);
  Tensor h = mul(w, 2.0);
  Tensor row = h.select(0, 1);
  expect_error_mentions([&] { row += 1.0; }, {"add_", "shares", "clone()"});
  expect_error_mentions([&] { h *= 3.0; }, {"mul_", "shares"});
  Tensor buffer = zeros({2, 3}, {.dtype = DType::Float64});
  Tensor view = buffer.narrow(0, 0, 1);
  expect_error_mentions([&] { view += w.narrow(0, 0, 1); }, {"add_", "shares"});
}

// Recorded compound ops: the gradient of f by finite differences, where f applies each op to
// a non-leaf (so autograd records it, rebasing the tensor's history) and to a buffer that
// needs no grad, with an operand that does.
TEST(TensorOperators, CompoundAssignmentGradients) {
  auto positive = [](uint64_t seed) {
    Tensor x = leaf64({2, 3}, seed).detach();
    return add(abs(x), 0.5).set_requires_grad(true);
  };
  expect_gradients_match(
      [](const std::vector<Tensor>& in) {
        Tensor h = mul(in[0], 1.5);
        h += in[1];
        h *= in[1];
        h -= in[0];
        h /= in[2];
        h *= 3.0;
        h /= 2.0;
        h += 0.25;
        h -= 1.0;
        return h;
      },
      {leaf64({2, 3}, 8), leaf64({3}, 9), positive(10)});
  expect_gradients_match(
      [](const std::vector<Tensor>& in) {
        Tensor buf = ones({2, 3}, {.dtype = DType::Float64});
        buf *= in[0];  // buf needs no grad, the operand does: buf takes its history
        buf /= in[0];
        buf += in[0];
        return buf;
      },
      {positive(11)});
  Tensor a = leaf64({3}, 12);
  Tensor h = mul(a, 1.0);
  h *= h;  // self as operand: reads the old values
  EXPECT_EQ(std::string(h.grad_fn()->name()), "MulBackward");
  sum(h).backward();
  Tensor want = mul(a.detach(), 2.0);
  EXPECT_EQ(vals(a.grad()), vals(want));
}

TEST(TensorOperators, ComparisonOperatorsReturnBool) {
  Tensor a = vec({1, 2, 3});
  Tensor b = vec({3, 2, 1});
  EXPECT_EQ((a < b).dtype(), DType::Bool);
  EXPECT_EQ(ints(a < b), (std::vector<int32_t>{1, 0, 0}));
  EXPECT_EQ(ints(a <= b), (std::vector<int32_t>{1, 1, 0}));
  EXPECT_EQ(ints(a > b), (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(ints(a >= b), (std::vector<int32_t>{0, 1, 1}));
  EXPECT_EQ(ints(a == b), (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ(ints(a != b), (std::vector<int32_t>{1, 0, 1}));
  EXPECT_EQ(ints(a < 2.0), (std::vector<int32_t>{1, 0, 0}));
  EXPECT_EQ(ints(a <= 2.0), (std::vector<int32_t>{1, 1, 0}));
  EXPECT_EQ(ints(a > 2.0), (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(ints(a >= 2.0), (std::vector<int32_t>{0, 1, 1}));
  EXPECT_EQ(ints(a == 2.0), (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ(ints(a != 2.0), (std::vector<int32_t>{1, 0, 1}));
  EXPECT_EQ(ints(2.0 < a), (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(ints(2.0 >= a), (std::vector<int32_t>{1, 1, 0}));
  EXPECT_EQ(ints(2.0 == a), (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ((a < zeros({2, 1}, {.dtype = DType::Float64})).shape(), Shape({2, 3}));  // broadcasts
  Tensor same = a;
  EXPECT_TRUE(same.is_same(a));  // identity stays is_same
}

TEST(TensorOperators, MathMethodsMatchTheOps) {
  Tensor x = from_vector(std::vector<double>{1, -2, 3, 4, 0.5, -6}, {2, 3});
  EXPECT_EQ(vals(x.sum()), vals(sum(x)));
  EXPECT_EQ(vals(x.sum({1}, true)), vals(sum(x, {1}, true)));
  EXPECT_EQ(x.sum({1}, true).shape(), Shape({2, 1}));
  EXPECT_EQ(vals(x.mean()), vals(mean(x)));
  EXPECT_EQ(vals(x.mean({0})), vals(mean(x, {0})));
  auto [values, indices] = x.max(1);
  EXPECT_EQ(vals(values), (std::vector<double>{3, 4}));
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(x.argmax(0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(vals(x.abs()), vals(abs(x)));
  EXPECT_EQ(vals(x.abs().sqrt()), vals(sqrt(abs(x))));
  EXPECT_EQ(vals(x.abs().rsqrt()), vals(rsqrt(abs(x))));
  EXPECT_EQ(vals(x.exp()), vals(exp(x)));
  EXPECT_EQ(vals(x.abs().log()), vals(log(abs(x))));
  EXPECT_EQ(vals(x.pow(2.0)), vals(pow(x, 2.0)));
  EXPECT_EQ(vals(x.abs().pow(x)), vals(pow(abs(x), x)));
  EXPECT_EQ(vals(x.neg()), vals(neg(x)));
  EXPECT_EQ(vals(x.tanh()), vals(tanh(x)));
  EXPECT_EQ(vals(x.sigmoid()), vals(sigmoid(x)));
  EXPECT_EQ(vals(x.relu()), vals(relu(x)));
  EXPECT_EQ(vals(x.clamp(-1.0, 2.0)), vals(clamp(x, -1.0, 2.0)));
  EXPECT_EQ(vals(x.matmul(x.transpose(0, 1))), vals(matmul(x, x.transpose(0, 1))));
  EXPECT_EQ(vals(x.softmax(1)), vals(softmax(x, 1)));
  EXPECT_EQ(vals(x.log_softmax(0)), vals(log_softmax(x, 0)));
  Tensor w = leaf64({2, 3}, 13);
  w.exp().sum().backward();  // methods are differentiable
  EXPECT_EQ(vals(w.grad()), vals(exp(w.detach())));
}
