// round / floor / ceil / trunc / sign and isnan / isinf / isfinite: half-way cases, -0.0,
// NaN and infinities, integer inputs, strided views, the zero gradient, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

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

// Inputs with every rounding boundary of interest, and the expected results.
const std::vector<double> kIn = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.4999999, 2.7, -2.7, -0.0, 0.0, 0x1p40, kInf, -kInf};
const std::vector<double> kRound = {0, 2, 2, -0.0, -2, -2, 0, 3, -3, -0.0, 0, 0x1p40, kInf, -kInf};
const std::vector<double> kFloor = {0, 1, 2, -1, -2, -3, 0, 2, -3, -0.0, 0, 0x1p40, kInf, -kInf};
const std::vector<double> kCeil = {1, 2, 3, -0.0, -1, -2, 1, 3, -2, -0.0, 0, 0x1p40, kInf, -kInf};
const std::vector<double> kTrunc = {0, 1, 2, -0.0, -1, -2, 0, 2, -2, -0.0, 0, 0x1p40, kInf, -kInf};

Tensor input(DType dtype) { return from_vector(kIn, {static_cast<int64_t>(kIn.size())}).to(dtype); }

// Equal values and equal signs of zero (so -0.0 is told from +0.0).
void expect_same(const Tensor& got, const std::vector<double>& want, const char* what) {
  const std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " element " << i;
      continue;
    }
    EXPECT_EQ(g[i], want[i]) << what << " element " << i << " of input " << kIn[i];
    EXPECT_EQ(std::signbit(g[i]), std::signbit(want[i])) << what << " sign of zero, element " << i;
  }
}

}  // namespace

TEST(Rounding, HalfToEvenAndSignedZeros) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = input(dtype);
    EXPECT_EQ(round(x).dtype(), dtype);
    expect_same(round(x), kRound, "round");
    expect_same(floor(x), kFloor, "floor");
    expect_same(ceil(x), kCeil, "ceil");
    expect_same(trunc(x), kTrunc, "trunc");
    // NaN stays NaN through all four.
    const Tensor nan = full({3}, kNan, {.dtype = dtype});
    for (const Tensor& r : {round(nan), floor(nan), ceil(nan), trunc(nan)})
      for (double v : r.to_vector<double>()) EXPECT_TRUE(std::isnan(v));
  }
  // 0.49999997f is the float just below 0.5: a round(x + 0.5)-style rounding would give 1.
  EXPECT_EQ(round(from_vector(std::vector<float>{0.49999997f, 8388609.0f}, {2})).to_vector<float>(),
            (std::vector<float>{0.0f, 8388609.0f}));
}

TEST(Rounding, SignAsPyTorch) {
  const std::vector<double> in = {-2.5, -0.0, 0.0, 3.0, kNan, kInf, -kInf, 1e-310};
  for (DType dtype : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<double> got = sign(from_vector(in, {8}).to(dtype)).to_vector<double>();
    // (0 < x) - (x < 0): sign(-0.0) is +0, sign(NaN) is 0; a float64 denormal is positive
    // (in float32 it flushes to +0 on conversion, so its sign is 0).
    const double tiny = dtype == DType::Float64 ? 1.0 : 0.0;
    const std::vector<double> want = {-1, 0, 0, 1, 0, 1, -1, tiny};
    EXPECT_EQ(got, want);
    EXPECT_FALSE(std::signbit(got[1])) << "sign(-0.0) is +0";
  }
}

TEST(Rounding, IntegersAreTheirOwnRounding) {
  const int64_t lo = std::numeric_limits<int64_t>::min();
  const Tensor i64 = from_vector(std::vector<int64_t>{-5, 0, 7, lo}, {4});
  for (const Tensor& r : {round(i64), floor(i64), ceil(i64), trunc(i64)}) {
    EXPECT_EQ(r.dtype(), DType::Int64);
    EXPECT_EQ(r.to_vector<int64_t>(), (std::vector<int64_t>{-5, 0, 7, lo}));
  }
  EXPECT_EQ(sign(i64).to_vector<int64_t>(), (std::vector<int64_t>{-1, 0, 1, -1}));
  EXPECT_EQ(sign(from_vector(std::vector<int32_t>{-3, 0, 9}, {3})).to_vector<int32_t>(),
            (std::vector<int32_t>{-1, 0, 1}));
}

TEST(Rounding, StridedAndEmptyInputs) {
  // A transposed view is read through its strides; the output is contiguous, same shape.
  const Tensor x = from_vector(std::vector<double>{0.5, 1.5, 2.5, 3.5, -0.5, -1.7}, {2, 3});
  const Tensor r = round(x.transpose(0, 1));
  EXPECT_EQ(r.shape(), Shape({3, 2}));
  EXPECT_EQ(r.to_vector<double>(), (std::vector<double>{0, 4, 2, -0.0, 2, -2}));
  EXPECT_EQ(floor(zeros({0, 3})).shape(), Shape({0, 3}));
  EXPECT_EQ(isnan(zeros({2, 0})).shape(), Shape({2, 0}));
}

TEST(Rounding, GradientIsZero) {
  for (auto op : {&round, &floor, &ceil, &trunc, &sign}) {
    Tensor x = leaf64({3, 4}, 5);
    Tensor y = op(x);
    ASSERT_TRUE(y.requires_grad());
    sum(mul(y, 3.0)).backward();
    ASSERT_TRUE(x.grad().defined());
    EXPECT_EQ(x.grad().to_vector<double>(), std::vector<double>(12, 0.0));
  }
  // Finite differences agree away from the jumps (normal samples lie far from them).
  for (auto op : {&round, &floor, &ceil, &trunc, &sign})
    expect_gradients_match([op](V in) { return add(op(in[0]), in[0]); }, {leaf64({2, 5}, 6)});
}

TEST(Classify, FloatsIntegersAndBools) {
  const std::vector<double> in = {1.0, kNan, kInf, -kInf, -0.0, 1e308, 4e-320, -3.0};
  for (DType dtype : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = from_vector(in, {8}).to(dtype);  // 1e308 becomes inf in float32
    const bool big_is_inf = dtype == DType::Float32;
    EXPECT_EQ(isnan(x).dtype(), DType::Bool);
    EXPECT_EQ(isnan(x).to_vector<double>(), (std::vector<double>{0, 1, 0, 0, 0, 0, 0, 0}));
    EXPECT_EQ(isinf(x).to_vector<double>(), (std::vector<double>{0, 0, 1, 1, 0, big_is_inf ? 1.0 : 0.0, 0, 0}));
    EXPECT_EQ(isfinite(x).to_vector<double>(), (std::vector<double>{1, 0, 0, 0, 1, big_is_inf ? 0.0 : 1.0, 1, 1}));
  }
  // As torch: integers and bools are never NaN or infinite.
  for (const Tensor& t : {from_vector(std::vector<int64_t>{1, -2}, {2}), from_vector(std::vector<int32_t>{0, 5}, {2}),
                          gt(from_vector(std::vector<float>{1, -1}, {2}), 0.0)}) {
    EXPECT_EQ(isnan(t).to_vector<double>(), (std::vector<double>{0, 0}));
    EXPECT_EQ(isinf(t).to_vector<double>(), (std::vector<double>{0, 0}));
    EXPECT_EQ(isfinite(t).to_vector<double>(), (std::vector<double>{1, 1}));
  }
  // Not differentiable: a Bool output outside the graph.
  Tensor x = leaf64({2, 2}, 3);
  EXPECT_FALSE(isfinite(x).requires_grad());
}

TEST(Rounding, Errors) {
  const Tensor b = gt(from_vector(std::vector<float>{1, -1}, {2}), 0.0);
  expect_error_mentions([&] { (void)floor(b); }, {"floor", "bool", "[2]"});
  expect_error_mentions([&] { (void)sign(b); }, {"sign", "bool"});
  expect_error_mentions([&] { (void)round(Tensor()); }, {"round", "undefined"});
  expect_error_mentions([&] { (void)isnan(zeros({2}, {.dtype = DType::BFloat16})); }, {"isnan", "bfloat16"});
}
