// softmax, log_softmax and cross_entropy.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"
#include "unit/ops/row_kernel_error_bounds.h"

using namespace strata;
using strata::testing::error_of;
using strata::testing::expect_contains;
using strata::testing::expect_gradients_match;
using strata::testing::expect_near_vec;
using strata::testing::leaf64;
using strata::testing::rand64;
using strata::testing::rel_err;
using V = const std::vector<Tensor>&;

namespace {

// Softmax (or log-softmax) of x along dim, by the textbook formula, in double.
std::vector<double> softmax_ref(const Tensor& x, int64_t dim, bool log) {
  const Shape& s = x.shape();
  dim = normalize_dim(dim, x.dim(), "ref");
  int64_t outer = 1, inner = 1;
  const int64_t n = s[static_cast<size_t>(dim)];
  for (int64_t d = 0; d < dim; ++d) outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(dim) + 1; d < s.size(); ++d) inner *= s[d];
  std::vector<double> v = x.to_vector<double>(), out(v.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < inner; ++c) {
      auto at = [&](int64_t j) { return (o * n + j) * inner + c; };
      double m = -INFINITY, z = 0;
      for (int64_t j = 0; j < n; ++j) m = std::max(m, v[at(j)]);
      for (int64_t j = 0; j < n; ++j) z += std::exp(v[at(j)] - m);
      for (int64_t j = 0; j < n; ++j) out[at(j)] = log ? v[at(j)] - m - std::log(z) : std::exp(v[at(j)] - m) / z;
    }
  return out;
}

}  // namespace

TEST(Softmax, MatchesFormulaAlongEveryDim) {
  Tensor x = mul(rand64({3, 4, 5}, 1), 3.0);
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    expect_near_vec(softmax(x, dim).to_vector<double>(), softmax_ref(x, dim, false), 1e-14);
    expect_near_vec(log_softmax(x, dim).to_vector<double>(), softmax_ref(x, dim, true), 1e-14);
  }
  // Wider than one column chunk (64) and large enough for threads: dim 1 of [4, 70, 80].
  Tensor big = rand64({4, 70, 80}, 2);
  expect_near_vec(softmax(big, 1).to_vector<double>(), softmax_ref(big, 1, false), 1e-13);
  expect_near_vec(log_softmax(big, 0).to_vector<double>(), softmax_ref(big, 0, true), 1e-13);
  expect_near_vec(softmax(big, -1).to_vector<double>(), softmax_ref(big, -1, false), 1e-13);
}

TEST(Softmax, StableForLargeInputsAndRowsSumToOne) {
  Tensor x = from_vector<float>({1000, 1001, 1002, -1000, -1001, -1002}, {2, 3});
  Tensor y = softmax(x, 1);
  std::vector<float> v = y.to_vector<float>();
  for (float e : v) EXPECT_TRUE(std::isfinite(e));
  EXPECT_NEAR(v[0] + v[1] + v[2], 1.0f, 1e-6f);
  EXPECT_NEAR(v[2], 0.66524096f, 1e-6f);
  EXPECT_NEAR(v[3], 0.66524096f, 1e-6f);
  std::vector<float> l = log_softmax(x, 1).to_vector<float>();
  EXPECT_NEAR(l[2], -0.40760596f, 1e-6f);
  // A non-contiguous input gives the same values as its contiguous copy.
  Tensor t = rand64({5, 6}, 3).transpose(0, 1);
  EXPECT_EQ(max_abs_diff(softmax(t, 1), softmax(t.contiguous(), 1)), 0.0);
}

TEST(Softmax, Gradcheck) {
  for (int64_t dim : {0, 1, -1}) {
    expect_gradients_match([dim](V in) { return softmax(in[0], dim); }, {leaf64({3, 4, 5}, 4)});
    expect_gradients_match([dim](V in) { return log_softmax(in[0], dim); }, {leaf64({3, 4, 5}, 5)});
  }
  expect_gradients_match([](V in) { return softmax(in[0].transpose(0, 1), 1); }, {leaf64({4, 3}, 6)});
}

TEST(Softmax, Float32WithinDerivedErrorBound) {
  // The same float32 inputs in float64 give the exact values; the float32 kernel's error is
  // bounded stage by stage (row_kernel_error_bounds.h), whatever its ISA version.
  Tensor x32 = mul(rand64({16, 1000}, 7), 4.0).to(DType::Float32);
  Tensor g32 = rand64({16, 1000}, 8).to(DType::Float32);
  const std::vector<double> x = x32.to_vector<double>(), g = g32.to_vector<double>();
  for (bool log : {false, true}) {
    const std::string what = log ? "log_softmax" : "softmax";
    Tensor a32 = x32.detach().set_requires_grad(true), a64 = x32.to(DType::Float64).set_requires_grad(true);
    Tensor y32 = log ? log_softmax(a32, -1) : softmax(a32, -1), y64 = log ? log_softmax(a64, -1) : softmax(a64, -1);
    const std::vector<strata::test::Bounded> yb = strata::test::softmax_bounds(x, 1000, log);
    EXPECT_TRUE(strata::test::within_error_bounds(y32.to_vector<double>(), yb, what));
    EXPECT_TRUE(strata::test::within_error_bounds(y64.to_vector<double>(), yb, what + " float64"));
    y32.backward(g32);
    y64.backward(g32.to(DType::Float64));
    const auto db = strata::test::softmax_backward_bounds(g, yb, 1000, log);
    EXPECT_TRUE(strata::test::within_error_bounds(a32.grad().to_vector<double>(), db, what + " gradient"));
    EXPECT_TRUE(strata::test::within_error_bounds(a64.grad().to_vector<double>(), db, what + " gradient float64"));
  }
}

TEST(Softmax, Errors) {
  expect_contains(error_of([] { softmax(ones({2, 3}), 2); }), "softmax");
  EXPECT_THROW(log_softmax(ones({2, 3}), -3), Error);
  EXPECT_THROW(softmax(scalar_tensor(1.0), 0), Error);
  expect_contains(error_of([] { softmax(ones({3}, {.dtype = DType::Int64}), 0); }), "softmax: input has dtype int64");
}

// ---------------------------------------------------------------- cross_entropy

namespace {

// Mean over non-ignored rows of logsumexp(row) - row[target], in double.
double cross_entropy_ref(const Tensor& logits, const std::vector<int64_t>& targets, int64_t ignore) {
  const int64_t n = logits.size(0), c = logits.size(1);
  std::vector<double> v = logits.to_vector<double>();
  double total = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] == ignore) continue;
    double m = -INFINITY, z = 0;
    for (int64_t j = 0; j < c; ++j) m = std::max(m, v[i * c + j]);
    for (int64_t j = 0; j < c; ++j) z += std::exp(v[i * c + j] - m);
    total += m + std::log(z) - v[i * c + targets[i]];
    ++count;
  }
  return total / count;
}

}  // namespace

TEST(CrossEntropy, MatchesTorchAndFormula) {
  // torch.nn.functional.cross_entropy(l, [2, 0, -100]) = 0.4076059644443804
  Tensor l = from_vector<double>({1, 2, 3, 1, 0, -1, 0.5, 0.5, 0.5}, {3, 3});
  for (DType it : {DType::Int64, DType::Int32}) {
    Tensor loss = cross_entropy(l, from_vector<int64_t>({2, 0, -100}, {3}).to(it));
    EXPECT_EQ(loss.shape(), Shape({}));
    EXPECT_NEAR(loss.item(), 0.4076059644443804, 1e-15);
  }
  Tensor x = mul(rand64({13, 17}, 9), 2.0);
  std::vector<int64_t> t = {0, 16, 3, 3, 5, 2, 9, 1, 0, 8, 11, 16, 7};
  EXPECT_NEAR(cross_entropy(x, from_vector(t, {13})).item(), cross_entropy_ref(x, t, -100), 1e-13);
  // A custom ignore_index that is also a valid class id.
  EXPECT_NEAR(cross_entropy(x, from_vector(t, {13}), 3).item(), cross_entropy_ref(x, t, 3), 1e-13);
}

TEST(CrossEntropy, GradientIsSoftmaxMinusOneHotOverCount) {
  Tensor x = rand64({6, 5}, 10).set_requires_grad(true);
  std::vector<int64_t> t = {4, -100, 0, 2, -100, 2};
  cross_entropy(x, from_vector(t, {6})).backward();
  std::vector<double> p = softmax_ref(x.detach(), 1, false), g = x.grad().to_vector<double>();
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      double want = t[i] == -100 ? 0.0 : (p[i * 5 + j] - (j == t[i] ? 1.0 : 0.0)) / 4.0;
      EXPECT_NEAR(g[i * 5 + j], want, 1e-15);
    }
}

TEST(CrossEntropy, Gradcheck) {
  Tensor t = from_vector<int64_t>({2, -100, 0, 4, 4, -100, 1}, {7});
  expect_gradients_match([](V in) { return cross_entropy(in[0], in[1]); }, {leaf64({7, 5}, 11), t});
  Tensor t32 = from_vector<int32_t>({1, 1, 0}, {3});
  expect_gradients_match([](V in) { return cross_entropy(in[0].transpose(0, 1), in[1], 0); },
                         {leaf64({4, 3}, 12), t32});
  // Loss scaled downstream: the incoming gradient is not 1.
  expect_gradients_match([](V in) { return mul(cross_entropy(in[0], in[1]), 3.5); },
                         {leaf64({3, 6}, 13), from_vector<int64_t>({5, 0, 2}, {3})});
}

TEST(CrossEntropy, AllIgnoredGivesZeroLossAndGradient) {
  // torch returns nan here; strata returns 0 so that a shard of pure padding does not
  // poison a data-parallel gradient average (documented in nn_functional.h).
  Tensor x = rand64({3, 4}, 14).set_requires_grad(true);
  Tensor loss = cross_entropy(x, from_vector<int64_t>({-100, -100, -100}, {3}));
  EXPECT_EQ(loss.item(), 0.0);
  loss.backward();
  for (double g : x.grad().to_vector<double>()) EXPECT_EQ(g, 0.0);
}

TEST(CrossEntropy, Float32WithinDerivedErrorBound) {
  // Includes a GPT-2-sized vocabulary, where the row sums are long.
  for (int64_t classes : {int64_t{1000}, int64_t{50257}}) {
    const int64_t n = classes > 1000 ? 6 : 64;
    Generator gen(16);
    Tensor t = randint(0, classes, {n}, {.dtype = DType::Int64}, &gen);
    Tensor x32 = mul(rand64({n, classes}, 15), 3.0).to(DType::Float32).set_requires_grad(true);
    Tensor x64 = x32.detach().to(DType::Float64).set_requires_grad(true);  // same inputs
    Tensor l32 = cross_entropy(x32, t), l64 = cross_entropy(x64, t);
    EXPECT_EQ(l32.dtype(), DType::Float32);
    const std::vector<double> x = x32.to_vector<double>();
    const std::vector<int64_t> targets = t.to_vector<int64_t>();
    const std::string what = "cross_entropy " + std::to_string(classes);
    const strata::test::Bounded lb = strata::test::cross_entropy_bound(x, static_cast<size_t>(classes), targets);
    EXPECT_TRUE(strata::test::within_error_bounds({l32.item()}, {lb}, what));
    EXPECT_TRUE(strata::test::within_error_bounds({l64.item()}, {lb}, what + " float64"));
    l32.backward();
    l64.backward();
    const auto db = strata::test::cross_entropy_backward_bounds(x, static_cast<size_t>(classes), targets);
    EXPECT_TRUE(strata::test::within_error_bounds(x32.grad().to_vector<double>(), db, what + " gradient"));
    EXPECT_TRUE(strata::test::within_error_bounds(x64.grad().to_vector<double>(), db, what + " gradient float64"));
  }
}

TEST(CrossEntropy, Errors) {
  Tensor x = ones({4, 10});
  std::string msg = error_of([&] { cross_entropy(x, from_vector<int64_t>({1, 2, 10, 3}, {4})); });
  expect_contains(msg, "target 10 at position 2");
  expect_contains(msg, "10 classes");
  expect_contains(error_of([&] {
                    cross_entropy(x, from_vector<int32_t>({1, -1, 2, 3}, {4}));
                  }),
                  "target -1 at position 1");
  expect_contains(error_of([&] {
                    cross_entropy(x, from_vector<int64_t>({1, 2, 3}, {3}));
                  }),
                  "targets must be [N] = [4]");
  expect_contains(error_of([&] { cross_entropy(x, ones({4})); }), "targets have dtype float32");
  expect_contains(error_of([&] {
                    cross_entropy(ones({2, 3, 4}), from_vector<int64_t>({0, 0}, {2}));
                  }),
                  "logits must be [N, C]");
  EXPECT_THROW(cross_entropy(x, from_vector<int64_t>({0, 0, 0, 0}, {2, 2})), Error);
  EXPECT_THROW(cross_entropy(ones({4, 10}, {.dtype = DType::Int64}), from_vector<int64_t>({0, 0, 0, 0}, {4})), Error);
}
