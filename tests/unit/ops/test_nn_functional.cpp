// gelu, relu, layer_norm, embedding, dropout and the vectorisable exp they build on.
// softmax / cross_entropy: test_nn_softmax.cpp; causal_attention: test_nn_attention.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "strata/strata.h"
#include "strata_kernels/common/fast_math.h"
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

// ---------------------------------------------------------------- fast exp

TEST(FastMath, ExpMatchesLibm) {
  double worst = 0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 200000.0f;
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(strata_kernels::fast_exp(x) - ref) / ref);
  }
  EXPECT_LT(worst, 2.5e-7);  // about 2 float ulp
  EXPECT_EQ(strata_kernels::fast_exp(0.0f), 1.0f);
  EXPECT_EQ(strata_kernels::fast_exp(-100.0f), 0.0f);
  EXPECT_EQ(strata_kernels::fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(strata_kernels::fast_exp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_GT(strata_kernels::fast_exp(1000.0f), 1e38f);  // saturates, finite
}

// ---------------------------------------------------------------- gelu / relu

TEST(Gelu, MatchesTorchTanhApproximation) {
  // torch.nn.functional.gelu(x, approximate='tanh') and its gradient, float64.
  const std::vector<double> x = {-5, -3, -1, -0.5, 0, 0.1, 0.5, 1, 3, 5};
  const std::vector<double> y = {
      -2.2917961972623857e-07, -0.0036373920817729943, -0.1588080093917233, -0.15428599017485606, 0.0,
      0.053982751045435165,    0.34571400982514394,    0.8411919906082768,  2.996362607918227,    4.999999770820381};
  const std::vector<double> dy = {
      -1.5463619879596227e-06, -0.011584166630969648, -0.08296408384578258, 0.13263009646535764, 0.5,
      0.5795217892717567,      0.8673699035346424,    1.0829640838457826,   1.0115841666309695,  1.000001546361988};
  Tensor t = from_vector(x, {10}).set_requires_grad(true);
  Tensor out = gelu(t);
  sum(out).backward();
  std::vector<double> got = out.to_vector<double>(), grad = t.grad().to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(got[i], y[i], 1e-15) << x[i];
    EXPECT_NEAR(grad[i], dy[i], 1e-14) << x[i];
  }
  EXPECT_EQ(out.grad_fn()->name(), "GeluBackward");
}

TEST(Gelu, Float32MatchesFloat64) {
  Tensor x = mul(rand64({4097}, 3), 4.0);  // odd size: vector tail
  Tensor x32 = x.to(DType::Float32).set_requires_grad(true);
  Tensor x64 = x32.detach().to(DType::Float64).set_requires_grad(true);
  Tensor y32 = gelu(x32), y64 = gelu(x64);
  EXPECT_EQ(y32.dtype(), DType::Float32);
  EXPECT_TRUE(allclose(y32.to(DType::Float64), y64, 1e-6, 1e-7));
  Tensor w = rand64({4097}, 4);
  sum(mul(y32, w.to(DType::Float32))).backward();
  sum(mul(y64, w)).backward();
  EXPECT_TRUE(allclose(x32.grad().to(DType::Float64), x64.grad(), 1e-5, 1e-6));
}

TEST(Gelu, Gradcheck) {
  expect_gradients_match([](V in) { return gelu(in[0]); }, {leaf64({3, 7}, 1)});
  expect_gradients_match([](V in) { return gelu(in[0].transpose(0, 1)); }, {leaf64({4, 5}, 2)});
}

TEST(Relu, ValuesAndGradcheck) {
  Tensor x = from_vector<float>({-2, -0.5, 0, 0.5, 3}, {5}).set_requires_grad(true);
  Tensor y = relu(x);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 0, 0, 0.5, 3}));
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0, 0, 0, 1, 1}));
  expect_gradients_match([](V in) { return relu(in[0]); }, {leaf64({4, 6}, 3)});
  expect_gradients_match([](V in) { return relu(in[0].permute({1, 0})); }, {leaf64({3, 5}, 4)});
}

TEST(Activation, RejectsNonFloatInputs) {
  Tensor i = ones({3}, {.dtype = DType::Int64});
  expect_contains(error_of([&] { gelu(i); }), "gelu: input has dtype int64");
  EXPECT_THROW(relu(i), Error);
  EXPECT_THROW(gelu(Tensor()), Error);
  EXPECT_THROW(relu(ones({3}, {.dtype = DType::BFloat16})), Error);
}

// ---------------------------------------------------------------- layer_norm

namespace {

// Straightforward layer norm over the last dimension in double.
std::vector<double> layer_norm_ref(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  const int64_t d = x.size(-1), rows = x.numel() / d;
  std::vector<double> vx = x.to_vector<double>(), out(vx.size());
  std::vector<double> vw = w.defined() ? w.to_vector<double>() : std::vector<double>(d, 1.0);
  std::vector<double> vb = b.defined() ? b.to_vector<double>() : std::vector<double>(d, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += vx[r * d + j];
    mean /= d;
    for (int64_t j = 0; j < d; ++j) var += (vx[r * d + j] - mean) * (vx[r * d + j] - mean);
    var /= d;
    for (int64_t j = 0; j < d; ++j) out[r * d + j] = (vx[r * d + j] - mean) / std::sqrt(var + eps) * vw[j] + vb[j];
  }
  return out;
}

}  // namespace

TEST(LayerNorm, MatchesFormulaWithAndWithoutAffine) {
  Tensor x = add(mul(rand64({2, 3, 10}, 5), 3.0), 7.0);  // offset mean: tests centring
  Tensor w = rand64({10}, 6), b = rand64({10}, 7);
  for (int mask = 0; mask < 4; ++mask) {
    Tensor wm = mask & 1 ? w : Tensor(), bm = mask & 2 ? b : Tensor();
    Tensor y = layer_norm(x, wm, bm, 1e-5);
    EXPECT_EQ(y.shape(), x.shape());
    expect_near_vec(y.to_vector<double>(), layer_norm_ref(x, wm, bm, 1e-5), 1e-12);
  }
  // eps matters for a constant row.
  Tensor c = full({1, 4}, 2.0, {.dtype = DType::Float64});
  EXPECT_EQ(max_abs_diff(layer_norm(c, {}, {}, 1e-5), zeros({1, 4}, {.dtype = DType::Float64})), 0.0);
}

TEST(LayerNorm, Gradcheck) {
  expect_gradients_match([](V in) { return layer_norm(in[0], in[1], in[2]); },
                         {leaf64({2, 3, 6}, 1), leaf64({6}, 2), leaf64({6}, 3)});
  expect_gradients_match([](V in) { return layer_norm(in[0], {}, {}); }, {leaf64({4, 5}, 4)});
  expect_gradients_match([](V in) { return layer_norm(in[0], in[1], {}); }, {leaf64({3, 5}, 5), leaf64({5}, 6)});
  expect_gradients_match([](V in) { return layer_norm(in[0], {}, in[1], 1e-3); }, {leaf64({3, 4}, 7), leaf64({4}, 8)});
  // Non-contiguous input; weight and bias that do not require grad.
  expect_gradients_match([](V in) { return layer_norm(in[0].transpose(0, 1), rand64({3}, 9), rand64({3}, 10)); },
                         {leaf64({3, 4}, 11)});
}

TEST(LayerNorm, ParallelBackwardMatchesSerialReference) {
  // Large enough for the threaded path with per-thread dweight/dbias partial sums.
  const int64_t rows = 97, d = 300;
  Tensor x = leaf64({rows, d}, 12), w = leaf64({d}, 13), b = leaf64({d}, 14);
  Tensor g = rand64({rows, d}, 15);
  Tensor y = layer_norm(x, w, b);
  expect_near_vec(y.to_vector<double>(), layer_norm_ref(x, w, b, 1e-5), 1e-12);
  y.backward(g);
  // Reference gradients in double, row by row.
  std::vector<double> vx = x.to_vector<double>(), vw = w.to_vector<double>(), vg = g.to_vector<double>();
  std::vector<double> dx(vx.size()), dw(d, 0.0), db(d, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = &vx[r * d];
    const double* gr = &vg[r * d];
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += xr[j];
    mean /= d;
    for (int64_t j = 0; j < d; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    const double rstd = 1 / std::sqrt(var / d + 1e-5);
    double a = 0, c = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double xhat = (xr[j] - mean) * rstd;
      a += gr[j] * vw[j];
      c += gr[j] * vw[j] * xhat;
      dw[j] += gr[j] * xhat;
      db[j] += gr[j];
    }
    for (int64_t j = 0; j < d; ++j) {
      const double xhat = (xr[j] - mean) * rstd;
      dx[r * d + j] = rstd * (gr[j] * vw[j] - a / d - xhat * c / d);
    }
  }
  expect_near_vec(x.grad().to_vector<double>(), dx, 1e-10);
  expect_near_vec(w.grad().to_vector<double>(), dw, 1e-10);
  expect_near_vec(b.grad().to_vector<double>(), db, 1e-10);
}

TEST(LayerNorm, Float32WithinDerivedErrorBound) {
  // A mean of 5 against a spread of 2 (the two-pass variance has no cancellation to fear).
  Tensor x32 = add(mul(rand64({64, 200}, 16), 2.0), 5.0).to(DType::Float32);
  Tensor w32 = rand64({200}, 17).to(DType::Float32), b32 = rand64({200}, 18).to(DType::Float32);
  Tensor g32 = rand64({64, 200}, 19).to(DType::Float32);
  Tensor a32 = x32.detach().set_requires_grad(true), v32 = w32.detach().set_requires_grad(true);
  Tensor a64 = x32.to(DType::Float64).set_requires_grad(true), v64 = w32.to(DType::Float64).set_requires_grad(true);
  Tensor y32 = layer_norm(a32, v32, b32), y64 = layer_norm(a64, v64, b32.to(DType::Float64));
  y32.backward(g32);
  y64.backward(g32.to(DType::Float64));
  const std::vector<double> x = x32.to_vector<double>(), w = w32.to_vector<double>();
  const strata::test::NormBounds fb = strata::test::norm_bounds(x, w, b32.to_vector<double>(), 1e-5, false);
  const strata::test::NormGradBounds gb =
      strata::test::norm_backward_bounds(g32.to_vector<double>(), x, w, fb.stats, false);
  EXPECT_TRUE(strata::test::within_error_bounds(y32.to_vector<double>(), fb.y, "layer_norm"));
  EXPECT_TRUE(strata::test::within_error_bounds(a32.grad().to_vector<double>(), gb.dx, "layer_norm dx"));
  EXPECT_TRUE(strata::test::within_error_bounds(v32.grad().to_vector<double>(), gb.dw, "layer_norm dweight"));
  EXPECT_TRUE(strata::test::within_error_bounds(y64.to_vector<double>(), fb.y, "layer_norm float64"));
  EXPECT_TRUE(strata::test::within_error_bounds(a64.grad().to_vector<double>(), gb.dx, "layer_norm dx float64"));
  EXPECT_TRUE(strata::test::within_error_bounds(v64.grad().to_vector<double>(), gb.dw, "layer_norm dweight float64"));
}

TEST(LayerNorm, Errors) {
  Tensor x = ones({2, 4});
  expect_contains(error_of([&] { layer_norm(x, ones({3}), {}); }), "weight must have shape [4]");
  expect_contains(error_of([&] { layer_norm(x, {}, ones({4, 1})); }), "bias must have shape [4]");
  expect_contains(error_of([&] { layer_norm(x, ones({4}, {.dtype = DType::Float64}), {}); }),
                  "weight has dtype float64");
  EXPECT_THROW(layer_norm(scalar_tensor(1.0), {}, {}), Error);
  EXPECT_THROW(layer_norm(ones({2, 4}, {.dtype = DType::Int32}), {}, {}), Error);
  EXPECT_THROW(layer_norm(x, {}, {}, -1.0), Error);
}

// ---------------------------------------------------------------- embedding

TEST(Embedding, GathersRows) {
  Tensor w = arange(0, 12, 1, {.dtype = DType::Float32}).view({4, 3});
  for (DType it : {DType::Int32, DType::Int64}) {
    Tensor idx = from_vector<int64_t>({3, 0, 3, 1, 2, 2}, {2, 3}).to(it);
    Tensor y = embedding(idx, w);
    ASSERT_EQ(y.shape(), Shape({2, 3, 3}));
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{9, 10, 11, 0, 1, 2, 9, 10, 11, 3, 4, 5, 6, 7, 8, 6, 7, 8}));
  }
  // Scalar index -> [D].
  EXPECT_EQ(embedding(from_vector<int64_t>({2}, {}), w).to_vector<float>(), (std::vector<float>{6, 7, 8}));
}

TEST(Embedding, BackwardScatterAddsRepeatedIndices) {
  // Big enough for the column-parallel backward.
  const int64_t vocab = 50, dim = 400, n = 120;
  Tensor w = leaf64({vocab, dim}, 20);
  Generator gen(21);
  Tensor idx = randint(0, vocab, {n}, {.dtype = DType::Int32}, &gen);
  Tensor g = rand64({n, dim}, 22);
  embedding(idx, w).backward(g);
  std::vector<double> ref(vocab * dim, 0.0), vg = g.to_vector<double>();
  std::vector<int64_t> vi = idx.to_vector<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < dim; ++c) ref[vi[i] * dim + c] += vg[i * dim + c];
  EXPECT_EQ(w.grad().to_vector<double>(), ref);  // same summation order: exact
}

TEST(Embedding, Gradcheck) {
  Tensor idx = from_vector<int64_t>({1, 4, 1, 0, 3, 1}, {3, 2});
  expect_gradients_match([](V in) { return embedding(in[1], in[0]); }, {leaf64({5, 3}, 23), idx});
}

TEST(Embedding, Errors) {
  Tensor w = ones({10, 4});
  std::string msg = error_of([&] { embedding(from_vector<int64_t>({1, 2, 3, 12, 4, 5}, {2, 3}), w); });
  expect_contains(msg, "index 12");
  expect_contains(msg, "position [1, 0]");
  expect_contains(msg, "10 rows");
  expect_contains(error_of([&] { embedding(from_vector<int32_t>({-1}, {1}), w); }), "index -1");
  expect_contains(error_of([&] { embedding(ones({2}), w); }), "indices have dtype float32");
  expect_contains(error_of([&] { embedding(from_vector<int64_t>({0}, {1}), ones({10})); }),
                  "weight must be [vocab, dim]");
  EXPECT_THROW(embedding(from_vector<int64_t>({0}, {1}), ones({10, 4}, {.dtype = DType::Int64})), Error);
}

// ---------------------------------------------------------------- dropout

TEST(Dropout, IdentityWhenEvaluatingOrPZero) {
  Tensor x = ones({3, 4}, {.requires_grad = true});
  Generator gen(1);
  EXPECT_TRUE(dropout(x, 0.5, false, &gen).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, true, &gen).is_same(x));
  EXPECT_EQ(gen.offset(), 0u);  // no randomness consumed
}

TEST(Dropout, MaskScaleAndReproducibility) {
  const int64_t n = 200001;  // not a multiple of 4: Philox tail
  const double p = 0.3;
  Tensor x = full({n}, 2.0);
  Generator gen(42, 7);
  Tensor y = dropout(x, p, true, &gen);
  EXPECT_EQ(gen.offset(), 8u);
  std::vector<float> v = y.to_vector<float>();
  int64_t dropped = 0;
  for (float e : v) {
    if (e == 0) {
      ++dropped;
    } else {
      ASSERT_FLOAT_EQ(e, static_cast<float>(2.0 / (1 - p)));
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, p, 0.005);
  // Same (seed, offset) -> same mask; next offset -> a different one.
  Generator again(42, 7);
  EXPECT_EQ(dropout(x, p, true, &again).to_vector<float>(), v);
  EXPECT_NE(dropout(x, p, true, &again).to_vector<float>(), v);
  // The mask follows logical positions, not memory layout.
  Tensor m = rand64({6, 5}, 30);
  Generator g1(5), g2(5);
  EXPECT_EQ(
      max_abs_diff(dropout(m.transpose(0, 1), 0.5, true, &g1), dropout(m.transpose(0, 1).contiguous(), 0.5, true, &g2)),
      0.0);
}

TEST(Dropout, BackwardAppliesTheSameMask) {
  const double p = 0.4;
  Tensor x = full({1001}, 1.5, {.dtype = DType::Float64, .requires_grad = true});
  Generator gen(9);
  Tensor y = dropout(x, p, true, &gen);
  Tensor g = rand64({1001}, 32);
  y.backward(g);
  std::vector<double> vy = y.to_vector<double>(), vg = g.to_vector<double>(), dx = x.grad().to_vector<double>();
  for (size_t i = 0; i < vy.size(); ++i) {
    ASSERT_DOUBLE_EQ(dx[i], vy[i] != 0 ? vg[i] / (1 - p) : 0.0) << i;
  }
  // A fixed generator inside f gives every evaluation the same mask.
  expect_gradients_match(
      [](V in) {
        Generator g2(3);
        return dropout(in[0], 0.25, true, &g2);
      },
      {leaf64({5, 7}, 33)});
}

TEST(Dropout, RejectsBadProbability) {
  Tensor x = ones({4});
  for (double p : {-0.1, 1.0, 1.5, std::nan("")}) {
    expect_contains(error_of([&] { dropout(x, p, true); }), "dropout: probability p must be in [0, 1)");
  }
  EXPECT_THROW(dropout(ones({4}, {.dtype = DType::Int32}), 0.5, true), Error);
}
