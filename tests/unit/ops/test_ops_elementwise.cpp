// Elementwise ops: gradients against float64 finite differences (broadcast cases
// included), forward values in float32 and float64, special values and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "gradcheck.h"
#include "ops/elementwise_common.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::expect_error_mentions;
using strata::testing::expect_gradients_match;
using strata::testing::leaf64;
using strata::testing::rand64;
using V = std::vector<Tensor>;

namespace {

// A float64 leaf with entries in [0.5, 2.5): inside the domain of log, sqrt, rsqrt and pow.
Tensor positive_leaf(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return add(mul(rand(shape, {.dtype = DType::Float64}, &gen), 2.0), 0.5).set_requires_grad(true);
}

Tensor vec64(const std::vector<double>& v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }

// The pairs of shapes every binary op is checked on: equal, broadcast either way, size-1
// dimensions on both sides, and scalars of shape [].
const std::vector<std::pair<Shape, Shape>> kBroadcastPairs = {{{2, 3}, {2, 3}},    {{2, 3}, {3}}, {{3}, {2, 3}},
                                                              {{2, 1, 4}, {3, 1}}, {{}, {2, 3}},  {{2, 3}, {}}};

}  // namespace

TEST(OpsElementwise, UnaryGradients) {
  using F = Tensor (*)(const Tensor&);
  for (auto [name, f] : std::vector<std::pair<const char*, F>>{
           {"sigmoid", sigmoid}, {"silu", silu}, {"abs", abs}, {"tanh", tanh}, {"exp", exp}, {"neg", neg}}) {
    SCOPED_TRACE(name);
    expect_gradients_match([f](V in) { return f(in[0]); }, {leaf64({3, 4}, 1)});
  }
  for (auto [name, f] : std::vector<std::pair<const char*, F>>{{"log", log}, {"sqrt", sqrt}, {"rsqrt", rsqrt}}) {
    SCOPED_TRACE(name);
    expect_gradients_match([f](V in) { return f(in[0]); }, {positive_leaf({3, 4}, 2)});
  }
  expect_gradients_match([](V in) { return pow(in[0], 2.5); }, {positive_leaf({5}, 3)});
  expect_gradients_match([](V in) { return pow(in[0], 3.0); }, {leaf64({5}, 3)});
}

TEST(OpsElementwise, ClampGradients) {
  expect_gradients_match([](V in) { return clamp(in[0], -0.5, 0.7); }, {leaf64({4, 5}, 4)});
  expect_gradients_match([](V in) { return clamp(in[0], -0.5, std::nullopt); }, {leaf64({4, 5}, 5)});
  expect_gradients_match([](V in) { return clamp(in[0], std::nullopt, 0.2); }, {leaf64({4, 5}, 6)});
}

TEST(OpsElementwise, BinaryGradientsBroadcast) {
  using F = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<const char*, F>> ops = {{"add", add}, {"sub", sub},         {"mul", mul},
                                                      {"div", div}, {"minimum", minimum}, {"maximum", maximum}};
  uint64_t seed = 10;
  for (const auto& [sa, sb] : kBroadcastPairs) {
    for (auto [name, f] : ops) {
      SCOPED_TRACE(std::string(name) + " " + sa.str() + " " + sb.str());
      Tensor b = std::string(name) == "div" ? positive_leaf(sb, seed + 1) : leaf64(sb, seed + 1);
      expect_gradients_match([f](V in) { return f(in[0], in[1]); }, {leaf64(sa, seed), b});
      seed += 2;
    }
    SCOPED_TRACE("pow " + sa.str() + " " + sb.str());
    expect_gradients_match([](V in) { return pow(in[0], in[1]); }, {positive_leaf(sa, seed), leaf64(sb, seed + 1)});
  }
  expect_gradients_match([](V in) { return pow(1.7, in[0]); }, {leaf64({2, 3}, 40)});
}

TEST(OpsElementwise, WhereAndMaskedFillGradients) {
  Tensor cond = gt(rand64({2, 1, 4}, 50), 0.0);
  expect_gradients_match([&](V in) { return where(cond, in[0], in[1]); }, {leaf64({3, 1}, 51), leaf64({2, 3, 4}, 52)});
  expect_gradients_match([&](V in) { return where(cond, in[0], in[1]); }, {leaf64({}, 53), leaf64({4}, 54)});
  expect_gradients_match([&](V in) { return masked_fill(in[0], cond, -3.0); }, {leaf64({3, 4}, 55)});
  expect_gradients_match([&](V in) { return masked_fill(in[0], cond, 2.0); }, {leaf64({2, 3, 4}, 56)});
}

TEST(OpsElementwise, MinimumMaximumSplitTiesHalfHalf) {
  for (bool is_max : {false, true}) {
    Tensor a = vec64({1, 2, 3}).set_requires_grad(true);
    Tensor b = vec64({2, 2, 1}).set_requires_grad(true);
    sum(is_max ? maximum(a, b) : minimum(a, b)).backward();
    const std::vector<double> sel_a = is_max ? std::vector<double>{0, 0.5, 1} : std::vector<double>{1, 0.5, 0};
    EXPECT_EQ(a.grad().to_vector<double>(), sel_a) << (is_max ? "maximum" : "minimum");
    EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{1 - sel_a[0], 0.5, 1 - sel_a[2]}));
  }
}

TEST(OpsElementwise, ClampPassesGradientAtItsBounds) {
  Tensor x = vec64({-1, 0, 0.5, 1, 2}).set_requires_grad(true);
  Tensor y = clamp(x, 0.0, 1.0);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{0, 0, 0.5, 1, 1}));
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 1, 1, 1, 0}));
  // min > max: every element becomes max (as torch).
  EXPECT_EQ(clamp(vec64({-5, 2, 9}), 3.0, 1.0).to_vector<double>(), (std::vector<double>{1, 1, 1}));
}

TEST(OpsElementwise, PowGradientsAtZeroAndNegativeBases) {
  Tensor a = vec64({0, 0, 0, -2, 2}).set_requires_grad(true);
  Tensor b = vec64({0, 2, -1, 2, 0}).set_requires_grad(true);
  Tensor y = pow(a, b);
  sum(y).backward();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 0, inf, 4, 1}));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 0, -inf, -4, 0}));
  std::vector<double> gb = b.grad().to_vector<double>();
  EXPECT_EQ(gb[0], 0);
  EXPECT_EQ(gb[1], 0);
  EXPECT_EQ(gb[2], -inf);
  EXPECT_TRUE(std::isnan(gb[3])) << "log of a negative base";
  EXPECT_NEAR(gb[4], std::log(2.0), 1e-15);
}

template <class T>
void check_forward_values(DType dtype) {
  const std::vector<double> xs = {-30, -2.5, -1, -0.25, 0, 0.25, 1, 2.5, 30};
  Tensor x = from_vector(xs, {static_cast<int64_t>(xs.size())}, {.dtype = dtype});
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  auto expect = [&](const Tensor& t, auto f, const char* name) {
    ASSERT_EQ(t.dtype(), dtype) << name;
    std::vector<T> got = t.template to_vector<T>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = f(static_cast<double>(static_cast<T>(xs[i])));
      EXPECT_NEAR(got[i], want, tol * std::max(1.0, std::fabs(want))) << name << "(" << xs[i] << ")";
    }
  };
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  expect(sigmoid(x), sig, "sigmoid");
  expect(
      silu(x), [&](double v) { return v * sig(v); }, "silu");
  expect(
      abs(x), [](double v) { return std::fabs(v); }, "abs");
  expect(
      clamp(x, -1.0, 2.0), [](double v) { return std::min(std::max(v, -1.0), 2.0); }, "clamp");
  Tensor ax = abs(x);
  expect(
      rsqrt(add(ax, 1.0)), [](double v) { return 1 / std::sqrt(std::fabs(v) + 1); }, "rsqrt");
  expect(
      pow(add(ax, 1.0), mul(x, 0.25)), [](double v) { return std::pow(std::fabs(v) + 1, 0.25 * v); }, "pow");
  Tensor r = mul(x, -0.5);
  expect(
      minimum(x, r), [](double v) { return std::min(v, -0.5 * v); }, "minimum");
  expect(
      maximum(x, r), [](double v) { return std::max(v, -0.5 * v); }, "maximum");
}

TEST(OpsElementwise, ForwardValuesFloat32AndFloat64) {
  check_forward_values<float>(DType::Float32);
  check_forward_values<double>(DType::Float64);
}

TEST(OpsElementwise, SigmoidAndSiluStayFiniteInTheTails) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor x = from_vector(std::vector<double>{-1000, -80, 80, 1000}, {4}, {.dtype = dtype});
    std::vector<double> s = sigmoid(x).to_vector<double>(), u = silu(x).to_vector<double>();
    EXPECT_EQ(s[0], 0);
    EXPECT_NEAR(s[1], std::exp(-80.0), 1e-6 * std::exp(-80.0)) << "full relative accuracy in the left tail";
    EXPECT_EQ(s[2], 1);
    EXPECT_EQ(s[3], 1);
    EXPECT_EQ(u[0], 0);
    EXPECT_EQ(u[3], 1000);
  }
}

TEST(OpsElementwise, NanPropagatesThroughClampMinimumMaximum) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = vec64({nan, 1});
  Tensor y = vec64({0, nan});
  for (const Tensor& t : {clamp(x, 0.0, 0.5), minimum(x, y), maximum(x, y), minimum(y, x)}) {
    std::vector<double> v = t.to_vector<double>();
    EXPECT_TRUE(std::isnan(v[0])) << t;
  }
  EXPECT_TRUE(std::isnan(minimum(x, y).to_vector<double>()[1]));
}

TEST(OpsElementwise, StridedAndIntegerInputs) {
  Tensor a = rand64({3, 4}, 60), b = rand64({4, 3}, 61);
  EXPECT_TRUE(allclose(maximum(a, b.transpose(0, 1)), maximum(a, b.transpose(0, 1).contiguous()), 0, 0));
  EXPECT_TRUE(allclose(sigmoid(b.transpose(0, 1)), sigmoid(b.transpose(0, 1).contiguous()), 0, 0));
  Tensor i = from_vector(std::vector<int64_t>{-3, 5, 7}, {3});
  EXPECT_EQ(minimum(i, full({1}, 4.0, {.dtype = DType::Int64})).to_vector<int64_t>(), (std::vector<int64_t>{-3, 4, 4}));
  EXPECT_EQ(abs(i).to_vector<int64_t>(), (std::vector<int64_t>{3, 5, 7}));
  EXPECT_EQ(clamp(i.to(DType::Int32), 0.0, std::nullopt).to_vector<int32_t>(), (std::vector<int32_t>{0, 5, 7}));
}

TEST(OpsElementwise, ShapeMismatchNamesTheOpAndBothShapes) {
  Tensor a = zeros({2, 3}), b = zeros({4});
  expect_error_mentions([&] { add(a, b); }, {"add", "[2, 3]", "[4]"});
  expect_error_mentions([&] { minimum(a, b); }, {"minimum", "[2, 3]", "[4]"});
  expect_error_mentions([&] { maximum(b, a); }, {"maximum", "[4]", "[2, 3]"});
  expect_error_mentions([&] { pow(a, b); }, {"pow", "[2, 3]", "[4]"});
  expect_error_mentions([&] { lt(a, b); }, {"lt", "[2, 3]", "[4]"});
  expect_error_mentions([&] { masked_fill(a, gt(b, 0.0), 1.0); }, {"masked_fill", "[2, 3]", "[4]"});
  expect_error_mentions([&] { where(gt(a, 0.0), a, b); }, {"where", "[2, 3] (condition)", "[2, 3] (a)", "[4] (b)"});
  expect_error_mentions([&] { add(a, zeros({2, 3}, {.dtype = DType::Float64})); }, {"add", "float32", "float64"});
  expect_error_mentions([&] { clamp(a, std::nullopt, std::nullopt); }, {"clamp", "min and max"});
}

// gelu and relu on CUDA run the elementwise kernels' Gelu/Relu functors; on the CPU the same
// functors, run through the elementwise loop, must equal the activation kernels bit for bit
// (NaN and the tails included), so the GPU's twin is the CPU's op.
TEST(OpsElementwise, GeluAndReluFunctorsEqualTheActivationKernels) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator gen(21);
    Tensor x = mul(randn({3001}, {.dtype = dtype}, &gen), 6.0);
    std::vector<double> v = x.to_vector<double>();
    v[0] = std::nan("");
    v[1] = -0.0;
    v[2] = 40;
    v[3] = -40;
    x = from_vector(v, {3001}).to(dtype);
    const Tensor g = randn({3001}, {.dtype = dtype}, &gen);
    auto same = [](const Tensor& a, const Tensor& b) {
      const std::vector<double> p = a.to_vector<double>(), q = b.to_vector<double>();
      for (size_t i = 0; i < p.size(); ++i)
        if (std::memcmp(&p[i], &q[i], sizeof(double)) != 0) return false;
      return true;
    };
    EXPECT_TRUE(same(detail::unary_op(backend::UnaryOp::Gelu, x, "gelu"), gelu(x))) << dtype;
    EXPECT_TRUE(same(detail::unary_op(backend::UnaryOp::Relu, x, "relu"), relu(x))) << dtype;
    Tensor xl = x.detach().set_requires_grad(true);
    gelu(xl).backward(g);
    EXPECT_TRUE(same(detail::unary_grad_op(backend::UnaryGradOp::Gelu, g, x, "gelu"), xl.grad())) << dtype;
    Tensor xr = x.detach().set_requires_grad(true);
    const Tensor y = relu(xr);
    y.backward(g);
    EXPECT_TRUE(same(detail::unary_grad_op(backend::UnaryGradOp::Relu, g, y, "relu"), xr.grad())) << dtype;
  }
}
