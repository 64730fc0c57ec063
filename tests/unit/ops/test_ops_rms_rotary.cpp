// rms_norm and rotary_embedding: values against their formulas, float64 gradchecks, float32
// vs float64, 16-bit weights, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"
#include "unit/ops/row_kernel_error_bounds.h"

using namespace strata;
using strata::testing::expect_error_mentions;
using strata::testing::expect_gradients_match;
using strata::testing::expect_near_vec;
using strata::testing::leaf64;
using strata::testing::rand64;
using strata::testing::rel_err;
using V = const std::vector<Tensor>&;

namespace {

// x / sqrt(mean(x^2) + eps) * w, composed from elementwise and reduction ops.
Tensor rms_norm_composed(const Tensor& x, const Tensor& w, double eps) {
  Tensor ms = mean(mul(x, x), {-1}, /*keepdim=*/true);
  Tensor y = div(x, sqrt(add(ms, eps)));
  return w.defined() ? mul(y, w) : y;
}

// x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1], composed from shape ops.
Tensor rotary_composed(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  Tensor rotated = cat({neg(x.narrow(-1, half, half)), x.narrow(-1, 0, half)}, -1);
  return add(mul(x, cos), mul(rotated, sin));
}

}  // namespace

TEST(RmsNorm, MatchesComposition) {
  for (const Shape& s : {Shape{3, 8}, Shape{2, 3, 5}, Shape{1, 1}, Shape{64, 300}}) {
    Tensor x = rand64(s, 1), w = rand64({s.back()}, 2);
    expect_near_vec(rms_norm(x, w, 1e-5).to_vector<double>(), rms_norm_composed(x, w, 1e-5).to_vector<double>(), 1e-14);
    expect_near_vec(rms_norm(x, Tensor(), 0.5).to_vector<double>(),
                    rms_norm_composed(x, Tensor(), 0.5).to_vector<double>(), 1e-14);
  }
}

TEST(RmsNorm, Gradcheck) {
  auto f = [](V in) { return rms_norm(in[0], in[1], 1e-3); };
  for (const Shape& s : {Shape{3, 5}, Shape{2, 2, 4}, Shape{1, 1}}) {
    expect_gradients_match(f, {leaf64(s, 10), leaf64({s.back()}, 11)});
  }
  expect_gradients_match([](V in) { return rms_norm(in[0], Tensor()); }, {leaf64({4, 6}, 12)});
  // Only the weight, and a strided input.
  expect_gradients_match([](V in) { return rms_norm(rand64({3, 4}, 13), in[0]); }, {leaf64({4}, 14)});
  expect_gradients_match([](V in) { return rms_norm(in[0].transpose(0, 1), in[1]); },
                         {leaf64({5, 3}, 15), leaf64({5}, 16)});
  // Rows past the parallel threshold: per-thread weight partials.
  Tensor x = leaf64({300, 64}, 17), w = leaf64({64}, 18);
  rms_norm(x, w).backward(rand64({300, 64}, 19));
  Tensor x2 = x.detach().set_requires_grad(true), w2 = w.detach().set_requires_grad(true);
  rms_norm_composed(x2, w2, 1e-6).backward(rand64({300, 64}, 19));
  EXPECT_LT(rel_err(x.grad(), x2.grad()), 1e-12);
  EXPECT_LT(rel_err(w.grad(), w2.grad()), 1e-12);
}

TEST(RmsNorm, Float32WithinDerivedErrorBound) {
  Tensor x32 = rand64({40, 96}, 20).to(DType::Float32), w32 = rand64({96}, 21).to(DType::Float32);
  Tensor g32 = rand64({40, 96}, 22).to(DType::Float32);
  Tensor a32 = x32.detach().set_requires_grad(true), v32 = w32.detach().set_requires_grad(true);
  Tensor a64 = x32.to(DType::Float64).set_requires_grad(true), v64 = w32.to(DType::Float64).set_requires_grad(true);
  Tensor y32 = rms_norm(a32, v32), y64 = rms_norm(a64, v64);
  EXPECT_EQ(y32.dtype(), DType::Float32);
  y32.backward(g32);
  y64.backward(g32.to(DType::Float64));
  const std::vector<double> x = x32.to_vector<double>(), w = w32.to_vector<double>();
  const strata::test::NormBounds fb = strata::test::norm_bounds(x, w, {}, 1e-6, true);
  const strata::test::NormGradBounds gb =
      strata::test::norm_backward_bounds(g32.to_vector<double>(), x, w, fb.stats, true);
  EXPECT_TRUE(strata::test::within_error_bounds(y32.to_vector<double>(), fb.y, "rms_norm"));
  EXPECT_TRUE(strata::test::within_error_bounds(a32.grad().to_vector<double>(), gb.dx, "rms_norm dx"));
  EXPECT_TRUE(strata::test::within_error_bounds(v32.grad().to_vector<double>(), gb.dw, "rms_norm dweight"));
  EXPECT_TRUE(strata::test::within_error_bounds(y64.to_vector<double>(), fb.y, "rms_norm float64"));
  EXPECT_TRUE(strata::test::within_error_bounds(a64.grad().to_vector<double>(), gb.dx, "rms_norm dx float64"));
  EXPECT_TRUE(strata::test::within_error_bounds(v64.grad().to_vector<double>(), gb.dw, "rms_norm dweight float64"));
}

TEST(RmsNorm, SixteenBitWeightEqualsFloat32Copy) {
  Tensor x = rand64({6, 16}, 30).to(DType::Float32);
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    Tensor w16 = rand64({16}, 31).to(dt).set_requires_grad(true);
    Tensor w32 = w16.detach().to(DType::Float32).set_requires_grad(true);
    Tensor y16 = rms_norm(x, w16), y32 = rms_norm(x, w32);
    EXPECT_EQ(max_abs_diff(y16, y32), 0.0);
    Tensor g = rand64({6, 16}, 32).to(DType::Float32);
    y16.backward(g);
    y32.backward(g);
    EXPECT_EQ(w16.grad().dtype(), dt);
    EXPECT_EQ(max_abs_diff(w16.grad().to(DType::Float32), w32.grad().to(dt).to(DType::Float32)), 0.0);
  }
}

TEST(RmsNorm, Errors) {
  expect_error_mentions([] { rms_norm(ones({2, 3}), ones({4})); }, {"rms_norm", "[3]", "[2, 3]"});
  expect_error_mentions([] { rms_norm(ones({2, 3}, {.dtype = DType::Int32}), Tensor()); }, {"rms_norm", "int32"});
  expect_error_mentions([] { rms_norm(ones({2, 3}), Tensor(), -1); }, {"rms_norm", "eps"});
  expect_error_mentions([] { rms_norm(ones({2, 3}), ones({3}, {.dtype = DType::Float64})); }, {"rms_norm", "weight"});
}

TEST(Rotary, TablesFollowTheFormula) {
  const int64_t d = 6, offset = 5;
  const double theta = 500.0;
  RotaryTables t = rotary_tables(4, d, theta, offset, DType::Float64);
  ASSERT_EQ(t.cos.shape(), Shape({4, d}));
  std::vector<double> c = t.cos.to_vector<double>(), s = t.sin.to_vector<double>();
  for (int64_t p = 0; p < 4; ++p) {
    for (int64_t j = 0; j < d; ++j) {
      const double angle =
          static_cast<double>(offset + p) * std::pow(theta, -2.0 * static_cast<double>(j % (d / 2)) / d);
      EXPECT_NEAR(c[p * d + j], std::cos(angle), 1e-15);
      EXPECT_NEAR(s[p * d + j], std::sin(angle), 1e-15);
    }
  }
  // With an offset: the rows of a longer table from that position on.
  RotaryTables full = rotary_tables(offset + 4, d, theta, 0, DType::Float64);
  EXPECT_EQ(max_abs_diff(full.cos.narrow(0, offset, 4), t.cos), 0.0);
  EXPECT_EQ(max_abs_diff(full.sin.narrow(0, offset, 4), t.sin), 0.0);
  EXPECT_EQ(rotary_tables(2, 4).cos.dtype(), DType::Float32);
}

TEST(Rotary, MatchesCompositionAndKeepsNorms) {
  for (const Shape& s : {Shape{2, 3, 5, 8}, Shape{1, 1, 1, 2}, Shape{4, 64}}) {
    RotaryTables t = rotary_tables(s[s.size() - 2], s.back(), 10000.0, 3, DType::Float64);
    Tensor x = rand64(s, 40);
    Tensor y = rotary_embedding(x, t.cos, t.sin);
    expect_near_vec(y.to_vector<double>(), rotary_composed(x, t.cos, t.sin).to_vector<double>(), 1e-15);
    // A rotation of each (j, j + D/2) pair: every head vector keeps its norm.
    EXPECT_LT(rel_err(sum(mul(y, y), {-1}), sum(mul(x, x), {-1})), 1e-14);
  }
  // Arbitrary tables (not a rotation) still follow the formula.
  Tensor x = rand64({2, 3, 4}, 41), c = rand64({3, 4}, 42), s = rand64({3, 4}, 43);
  expect_near_vec(rotary_embedding(x, c, s).to_vector<double>(), rotary_composed(x, c, s).to_vector<double>(), 1e-15);
}

TEST(Rotary, Gradcheck) {
  RotaryTables t = rotary_tables(5, 4, 10000.0, 2, DType::Float64);
  expect_gradients_match([&](V in) { return rotary_embedding(in[0], t.cos, t.sin); }, {leaf64({2, 3, 5, 4}, 50)});
  // The transpose for general tables (cos/sin differing between the two halves).
  Tensor c = rand64({3, 6}, 51), s = rand64({3, 6}, 52);
  expect_gradients_match([&](V in) { return rotary_embedding(in[0], c, s); }, {leaf64({2, 3, 6}, 53)});
  // A time-major view of q, as split from a [B, T, H, D] projection.
  RotaryTables t3 = rotary_tables(3, 2, 10.0, 0, DType::Float64);
  expect_gradients_match([&](V in) { return rotary_embedding(in[0].transpose(1, 2), t3.cos, t3.sin); },
                         {leaf64({2, 3, 4, 2}, 54)});
}

TEST(Rotary, Float32MatchesFloat64) {
  RotaryTables t64 = rotary_tables(32, 64, 10000.0, 100, DType::Float64);
  RotaryTables t32 = rotary_tables(32, 64, 10000.0, 100, DType::Float32);
  Tensor x = rand64({2, 4, 32, 64}, 60);
  EXPECT_LT(rel_err(rotary_embedding(x.to(DType::Float32), t32.cos, t32.sin), rotary_embedding(x, t64.cos, t64.sin)),
            1e-6);
}

TEST(Rotary, Errors) {
  RotaryTables t = rotary_tables(3, 4);
  expect_error_mentions([&] { rotary_embedding(ones({1, 2, 3, 5}), t.cos, t.sin); }, {"rotary_embedding", "even"});
  expect_error_mentions(
      [&] {
        rotary_embedding(ones({1, 2, 4, 4}), t.cos, t.sin);
      },
      {"rotary_embedding", "cos", "[4, 4]", "[3, 4]"});
  expect_error_mentions(
      [&] {
        rotary_embedding(ones({3, 4}, {.dtype = DType::Float64}), t.cos, t.sin);
      },
      {"rotary_embedding", "cos", "float64"});
  Tensor c = t.cos.detach().set_requires_grad(true);
  expect_error_mentions(
      [&] {
        rotary_embedding(ones({3, 4}), c, t.sin);
      },
      {"rotary_embedding", "cos", "requires grad"});
  expect_error_mentions([] { rotary_tables(3, 5); }, {"rotary_tables", "head_dim", "5"});
  expect_error_mentions([] { rotary_tables(3, 4, 10000.0, -1); }, {"rotary_tables", "offset"});
}
