// min / min_with_indices / argmin (max's mirror) and logsumexp over dimensions: values, ties,
// NaN and infinities, empty dimensions, float64 finite-difference gradients, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "float32_bound.h"
#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::expect_error_mentions;
using strata::testing::expect_gradients_match;
using strata::testing::leaf64;
using V = const std::vector<Tensor>&;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

Tensor f64(const std::vector<double>& v, const Shape& shape) { return from_vector(v, shape); }

// logsumexp of one row in long double, directly (the inputs are small enough not to overflow).
double naive_logsumexp(const std::vector<double>& row) {
  long double s = 0;
  for (double v : row) s += std::exp(static_cast<long double>(v));
  return static_cast<double>(std::log(s));
}

}  // namespace

TEST(Min, ValuesIndicesTiesAndNan) {
  // Row 0: a tie (first occurrence wins); row 1: two NaNs (the first NaN is the minimum).
  const Tensor x = f64({3, 1, 1, 2, 5, kNan, -7, kNan}, {2, 4});
  const ValuesIndices m = min_with_indices(x, 1);
  const std::vector<double> v = m.values.to_vector<double>();
  EXPECT_EQ(v[0], 1.0);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(m.indices.dtype(), DType::Int64);
  EXPECT_EQ(m.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(argmin(x, -1).to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));
  // Along dimension 0, kept, and on a transposed view.
  const ValuesIndices k = min_with_indices(x, 0, true);
  EXPECT_EQ(k.values.shape(), Shape({1, 4}));
  EXPECT_EQ(k.indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(argmin(x.transpose(0, 1), 1, true).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 1}));
  // -0.0 and +0.0 are equal: the first is taken, with its sign.
  const ValuesIndices z = min_with_indices(f64({0.0, -0.0}, {2}), 0);
  EXPECT_EQ(z.indices.to_vector<int64_t>(), std::vector<int64_t>{0});
  EXPECT_FALSE(std::signbit(z.values.item()));
  EXPECT_EQ(min(f64({-kInf, 1}, {2}), 0).item(), -kInf);
}

TEST(Min, IntegersAndEmptyKeptDimensions) {
  const int64_t lo = std::numeric_limits<int64_t>::min();
  const Tensor i = from_vector(std::vector<int64_t>{4, lo, lo, 0}, {2, 2});
  EXPECT_EQ(min(i, 1).to_vector<int64_t>(), (std::vector<int64_t>{lo, lo}));
  EXPECT_EQ(argmin(i, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(min(from_vector(std::vector<int32_t>{2, -3, 5}, {3}), 0).to_vector<int32_t>(), std::vector<int32_t>{-3});
  // An empty dimension that is not reduced is fine (as torch): an empty result.
  EXPECT_EQ(min(zeros({0, 3}), 1).shape(), Shape({0}));
  EXPECT_EQ(argmin(zeros({0, 3}), 1, true).shape(), Shape({0, 1}));
}

TEST(Min, GradientGoesToThePickedElement) {
  Tensor x = f64({3, 1, 1, 2}, {1, 4}).set_requires_grad(true);
  sum(mul(min(x, 1), 5.0)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 5, 0, 0}));  // the first of the tie
  expect_gradients_match([](V in) { return min(in[0], 1); }, {leaf64({3, 5}, 21)});
  expect_gradients_match([](V in) { return min_with_indices(in[0], 0, true).values; }, {leaf64({4, 3}, 22)});
  expect_gradients_match([](V in) { return min(in[0].transpose(0, 1), -1); }, {leaf64({4, 3}, 23)});
}

TEST(Min, Errors) {
  expect_error_mentions([] { (void)min(zeros({2, 0}), 1); }, {"min", "dimension 1", "[2, 0]", "empty"});
  expect_error_mentions([] { (void)argmin(zeros({2, 0}), -1); }, {"argmin", "[2, 0]", "empty"});
  expect_error_mentions([] { (void)min(zeros({2, 3}), 2); }, {"min", "dimension 2", "out of range", "2 dimensions"});
  expect_error_mentions([] { (void)min(gt(zeros({2}), 0.0), 0); }, {"min", "bool"});
}

TEST(Logsumexp, ValuesAgainstDirectSum) {
  const Tensor x = leaf64({3, 4, 5}, 31).detach();
  const std::vector<double> v = x.to_vector<double>();
  // Over the last dimension: each output is one contiguous row.
  const std::vector<double> last = logsumexp(x, {-1}).to_vector<double>();
  ASSERT_EQ(last.size(), 12u);
  for (size_t r = 0; r < 12; ++r)
    EXPECT_NEAR(last[r], naive_logsumexp({v.begin() + 5 * r, v.begin() + 5 * r + 5}), 1e-14);
  // Over dimensions 0 and 2 (not one block: the kernel reads a permuted copy), kept.
  const Tensor both = logsumexp(x, {0, 2}, true);
  EXPECT_EQ(both.shape(), Shape({1, 4, 1}));
  for (int64_t j = 0; j < 4; ++j) {
    std::vector<double> row;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t k = 0; k < 5; ++k) row.push_back(v[static_cast<size_t>((i * 4 + j) * 5 + k)]);
    EXPECT_NEAR(both.to_vector<double>()[static_cast<size_t>(j)], naive_logsumexp(row), 1e-14);
  }
  // All dimensions, and none (as sum: nothing reduced, so x itself).
  EXPECT_EQ(logsumexp(x, {0, 1, 2}).shape(), Shape({}));
  EXPECT_NEAR(logsumexp(x, {0, 1, 2}).item(), naive_logsumexp(v), 1e-13);
  EXPECT_EQ(logsumexp(x, {}).to_vector<double>(), v);
}

TEST(Logsumexp, ShiftedSoNothingOverflows) {
  // exp(1000) overflows double: the max shift keeps the sum finite.
  EXPECT_NEAR(logsumexp(f64({1000, 1000}, {2}), {0}).item(), 1000 + std::log(2.0), 1e-12);
  EXPECT_NEAR(logsumexp(f64({-1000, -1000}, {2}), {0}).item(), -1000 + std::log(2.0), 1e-12);
  const Tensor f = from_vector(std::vector<float>{88.0f, 89.0f, 90.0f}, {3});  // exp(89) overflows float32
  const double want = 90.0 + std::log(1.0 + std::exp(-1.0) + std::exp(-2.0));
  // float32 sums in double and rounds once: within one rounding (u |want|) of the exact value.
  EXPECT_NEAR(logsumexp(f, {0}).item(), want, 2 * strata::test::kUnitRoundoff32 * want);
}

TEST(Logsumexp, InfinitiesNanAndEmptyRows) {
  const Tensor x = f64({-kInf, -kInf, -kInf,  // all -inf: -inf
                        -kInf, 0, -kInf,      // one finite entry: itself
                        1, kInf, 2,           // +inf: +inf
                        1, kNan, kInf},       // NaN: NaN
                       {4, 3});
  const std::vector<double> r = logsumexp(x, {1}).to_vector<double>();
  EXPECT_EQ(r[0], -kInf);
  EXPECT_EQ(r[1], 0.0);
  EXPECT_EQ(r[2], kInf);
  EXPECT_TRUE(std::isnan(r[3]));
  // An empty reduction is log(0) = -inf; an empty kept dimension an empty result.
  EXPECT_EQ(logsumexp(zeros({2, 0}), {1}).to_vector<double>(), (std::vector<double>{-kInf, -kInf}));
  EXPECT_EQ(logsumexp(zeros({0, 3}), {1}).shape(), Shape({0}));
  // The gradient of an all -inf row is NaN, as torch's exp(x - out) = exp(-inf + inf).
  Tensor y = f64({-kInf, -kInf, 0, 0}, {2, 2}).set_requires_grad(true);
  sum(logsumexp(y, {1})).backward();
  const std::vector<double> g = y.grad().to_vector<double>();
  EXPECT_TRUE(std::isnan(g[0]) && std::isnan(g[1]));
  EXPECT_EQ(g[2], 0.5);
  EXPECT_EQ(g[3], 0.5);
}

TEST(Logsumexp, Gradcheck) {
  expect_gradients_match([](V in) { return logsumexp(in[0], {1}); }, {leaf64({3, 4}, 41)});
  expect_gradients_match([](V in) { return logsumexp(in[0], {0, 2}, true); }, {leaf64({2, 3, 4}, 42)});
  expect_gradients_match([](V in) { return logsumexp(in[0], {-1, 0}); }, {leaf64({2, 3, 4}, 43)});
  expect_gradients_match([](V in) { return logsumexp(in[0].transpose(0, 1), {1}); }, {leaf64({4, 3}, 44)});
  // Large values: the softmax weights, no overflow.
  expect_gradients_match([](V in) { return logsumexp(add(in[0], 800.0), {1}); }, {leaf64({2, 3}, 45)});
}

TEST(Logsumexp, Errors) {
  expect_error_mentions(
      [] {
        (void)logsumexp(zeros({2, 3}, {.dtype = DType::Int64}), {1});
      },
      {"logsumexp", "int64", "[2, 3]", "float32 or float64"});
  expect_error_mentions(
      [] {
        (void)logsumexp(zeros({2, 3}), {3});
      },
      {"logsumexp", "dimension 3", "out of range", "2 dimensions"});
  expect_error_mentions([] { (void)logsumexp(zeros({2, 3}), {1, -1}); }, {"logsumexp", "listed twice", "[2, 3]"});
}
