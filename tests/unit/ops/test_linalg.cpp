#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>

#include "float32_bound.h"
#include "gradcheck.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::expect_error_mentions;
using strata::testing::expect_gradients_match;
using strata::testing::leaf64;
using strata::testing::rel_err;
using V = const std::vector<Tensor>&;
using strata::test::gamma32;

namespace {

Tensor rnd(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, {.dtype = dtype}, &gen);
}

// Reference product by plain loops over the logical values: a [batch.., n, k] or [n, k],
// b [batch.., k, m] or [k, m]; a matrix operand is shared by every batch entry.
Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  const int64_t n = a.size(-2), k = a.size(-1), m = b.size(-1);
  const Shape& big = a.dim() >= b.dim() ? a.shape() : b.shape();
  Shape out_shape(big.begin(), big.end() - 2);
  const int64_t batch = out_shape.numel();
  out_shape.push_back(n);
  out_shape.push_back(m);
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  std::vector<double> out(static_cast<size_t>(out_shape.numel()), 0.0);
  for (int64_t z = 0; z < batch; ++z) {
    const int64_t za = a.dim() == 2 ? 0 : z, zb = b.dim() == 2 ? 0 : z;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += va[static_cast<size_t>((za * n + i) * k + p)] * vb[static_cast<size_t>((zb * k + p) * m + j)];
        out[static_cast<size_t>((z * n + i) * m + j)] = acc;
      }
  }
  return from_vector(out, out_shape);
}

// Float32 products are checked entry by entry against the exact product (float64 of the
// same inputs): in any order of its k additions (whichever kernel, blocking and FMA use the
// CPU's BLAS selects), a float32 dot product is within gamma32(k) sum_p |a_ip| |b_pj| of it
// (Higham, Accuracy and Stability of Numerical Algorithms, (3.5)). Inputs rounded from
// float64 add two roundings to each product: gamma32(k + 2); a bias is one more term (and
// one more rounding). Returns max |got - exact| / magnitude, entry by entry, where
// magnitude = |a| |b| (+ |bias|) in float64.
double product_error_ratio(const Tensor& got, const Tensor& exact, const Tensor& magnitude) {
  const std::vector<double> g = got.to_vector<double>(), e = exact.to_vector<double>(),
                            m = magnitude.to_vector<double>();
  EXPECT_EQ(g.size(), m.size());
  double worst = 0;
  for (size_t i = 0; i < g.size() && i < m.size(); ++i)
    worst = std::max(worst, std::fabs(g[i] - e[i]) / std::max(m[i], 1e-300));
  return worst;
}
Tensor f64(const Tensor& t) { return t.to(DType::Float64); }
Tensor magnitude(const Tensor& a, const Tensor& b) { return naive_matmul(abs(f64(a)), abs(f64(b))); }

void expect_matmul_matches(const Tensor& a, const Tensor& b, const std::string& what) {
  Tensor out = matmul(a, b);
  Tensor ref = naive_matmul(a, b);
  ASSERT_EQ(out.shape(), ref.shape()) << what;
  EXPECT_EQ(out.dtype(), a.dtype()) << what;
  if (a.dtype() == DType::Float64) {
    EXPECT_LT(rel_err(out, ref), 1e-12) << what << " a " << a.shape() << " b " << b.shape();
  } else {
    EXPECT_LE(product_error_ratio(out, ref, magnitude(a, b)), gamma32(static_cast<double>(a.size(-1))))
        << what << " a " << a.shape() << " b " << b.shape();
  }
}

}  // namespace

TEST(Matmul, HandComputed) {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector<float>({7, 8, 9, 10, 11, 12}, {3, 2});
  EXPECT_EQ(matmul(a, b).to_vector<float>(), (std::vector<float>{58, 64, 139, 154}));
  // a^T b^T through transposed views: [3, 2] x [2, 3].
  EXPECT_EQ(matmul(a.transpose(0, 1), b.transpose(0, 1)).to_vector<float>(),
            (std::vector<float>{39, 49, 59, 54, 68, 82, 69, 87, 105}));
}

TEST(Matmul, MatchesNaiveLoops) {
  for (DType dt : {DType::Float64, DType::Float32}) {
    uint64_t s = 1;
    auto r = [&](const Shape& shape) { return rnd(shape, dt, s++); };
    expect_matmul_matches(r({3, 5}), r({5, 4}), "2-D");
    expect_matmul_matches(r({1, 5}), r({5, 1}), "row x column");
    expect_matmul_matches(r({2, 3, 5}), r({5, 4}), "flattened 3-D x 2-D");
    expect_matmul_matches(r({2, 3, 4, 5}), r({2, 3, 5, 6}), "batched 4-D");
    expect_matmul_matches(r({3, 5}), r({2, 5, 4}), "matrix x batch");
    // Transposed views go to BLAS with the transpose flag.
    expect_matmul_matches(r({5, 3}).transpose(0, 1), r({5, 4}), "a^T");
    expect_matmul_matches(r({3, 5}), r({4, 5}).transpose(-1, -2), "b^T");
    expect_matmul_matches(r({2, 5, 3}).transpose(-1, -2), r({4, 5}).transpose(-1, -2), "flattened a^T b^T");
    expect_matmul_matches(r({2, 3, 5, 4}).transpose(-1, -2), r({2, 3, 6, 5}).transpose(-1, -2), "batched a^T b^T");
    expect_matmul_matches(r({5, 2, 3}).permute({1, 2, 0}), r({5, 4}), "rows of stride 1 merged across the batch");
    expect_matmul_matches(r({3, 2, 5}).transpose(0, 1), r({5, 4}), "batch dims that do not merge");
    expect_matmul_matches(r({3, 8}).narrow(1, 2, 5), r({5, 7}).narrow(1, 1, 4), "row stride larger than width");
    // Layouts BLAS cannot read (element stride 2, broadcast rows) are copied first.
    expect_matmul_matches(r({3, 5, 2}).select(2, 1), r({5, 4}), "column stride 2");
    expect_matmul_matches(r({3, 5}), r({1, 4}).expand({5, 4}), "broadcast rows");
    expect_matmul_matches(r({2, 1, 5}).expand({2, 3, 5}), r({5, 4}), "broadcast batch rows");
  }
}

TEST(Matmul, VectorsAndEmpty) {
  Tensor v = from_vector<double>({1, 2, 3}, {3});
  Tensor m = from_vector<double>({1, 0, 0, 1, 1, 1}, {3, 2});
  Tensor d = matmul(v, v);
  EXPECT_EQ(d.dim(), 0);
  EXPECT_EQ(d.item(), 14.0);
  EXPECT_EQ(matmul(v, m).to_vector<double>(), (std::vector<double>{4, 5}));
  EXPECT_EQ(matmul(m.transpose(0, 1), v).to_vector<double>(), (std::vector<double>{4, 5}));
  // Empty sizes: k == 0 gives zeros, n == 0 gives an empty result.
  Tensor z = matmul(zeros({2, 3, 0}), zeros({0, 4}));
  EXPECT_EQ(z.shape(), Shape({2, 3, 4}));
  EXPECT_EQ(sum(z).item(), 0.0);
  EXPECT_EQ(matmul(zeros({0, 3}), zeros({3, 4})).shape(), Shape({0, 4}));
  EXPECT_EQ(matmul(zeros({0, 2, 3}), zeros({0, 3, 4})).shape(), Shape({0, 2, 4}));
}

TEST(Matmul, ParallelBatchOfSmallProducts) {
  // Many small products run over OpenMP threads, each calling BLAS from inside the
  // parallel region; the result must not depend on that.
  const int saved = omp_get_max_threads();
  omp_set_num_threads(4);
  Tensor a = rnd({64, 8, 16}, DType::Float32, 1), b = rnd({64, 16, 12}, DType::Float32, 2);
  Tensor ref = naive_matmul(a, b);
  for (int rep = 0; rep < 5; ++rep) EXPECT_LE(product_error_ratio(matmul(a, b), ref, magnitude(a, b)), gamma32(16));
  Tensor at = rnd({64, 16, 8}, DType::Float64, 3).transpose(-1, -2);
  EXPECT_LT(rel_err(matmul(at, b.to(DType::Float64)), naive_matmul(at, b.to(DType::Float64))), 1e-12);
  omp_set_num_threads(saved);
}

TEST(Matmul, Float32AgreesWithFloat64) {
  Tensor a = rnd({4, 33, 96}, DType::Float64, 7), b = rnd({96, 80}, DType::Float64, 8);
  Tensor w = rnd({80, 96}, DType::Float64, 9), bias = rnd({80}, DType::Float64, 10);
  Tensor a32 = a.to(DType::Float32), b32 = b.to(DType::Float32), w32 = w.to(DType::Float32);
  const double k = 96;  // inputs rounded from float64: gamma32(k + 2); the bias: gamma32(k + 3)
  EXPECT_LE(product_error_ratio(matmul(a32, b32), matmul(a, b), magnitude(a, b)), gamma32(k + 2));
  EXPECT_LE(product_error_ratio(matmul(a32.transpose(0, 1), b32), matmul(a.transpose(0, 1), b),
                                magnitude(a.transpose(0, 1), b)),
            gamma32(k + 2));
  EXPECT_LE(product_error_ratio(linear(a32, w32, bias.to(DType::Float32)), linear(a, w, bias),
                                magnitude(a, w.transpose(0, 1)) + abs(bias)),
            gamma32(k + 3));
}

TEST(Matmul, LargeFloat32ProductsAgreeWithFloat64) {
  // Products large enough for the float32 backend (oneDNN where built with it: from 2^24
  // multiply-adds, or 2^20 on one thread), every transpose combination, with and without a
  // bias, into outputs that reuse NaN-filled blocks (beta 0 must not read them).
  const std::string backend = gemm_backend();
  EXPECT_TRUE(backend == "onednn" || backend == "openblas") << backend;
  const int saved = omp_get_max_threads();
  for (int threads : {saved, 1}) {
    omp_set_num_threads(threads);
    const int64_t m = 300, k = 256, n = 240;  // 18.4 M multiply-adds
    Tensor a = rnd({m, k}, DType::Float64, 11), b = rnd({k, n}, DType::Float64, 12);
    Tensor at = rnd({k, m}, DType::Float64, 13), bt = rnd({n, k}, DType::Float64, 14);
    Tensor bias = rnd({n}, DType::Float64, 15);
    auto f32 = [](const Tensor& t) { return t.to(DType::Float32); };
    for (int i = 0; i < 4; ++i) {
      const Tensor x = i & 1 ? at.transpose(0, 1) : a, y = i & 2 ? bt.transpose(0, 1) : b;
      { Tensor nan = full({m, n}, std::nan("")); }  // back to the allocator's cache
      // Inputs rounded from float64 (see product_error_ratio).
      EXPECT_LE(product_error_ratio(matmul(f32(x), f32(y)), matmul(x, y), magnitude(x, y)), gamma32(k + 2))
          << "case " << i << ", threads " << threads;
      EXPECT_LE(product_error_ratio(linear(f32(x), f32(y.transpose(0, 1)), f32(bias)),
                                    linear(x, y.transpose(0, 1), bias), magnitude(x, y) + abs(bias)),
                gamma32(k + 3))
          << "case " << i << ", threads " << threads;
    }
  }
  omp_set_num_threads(saved);
}

TEST(Matmul, Errors) {
  Tensor a = ones({2, 3}), b = ones({4, 5});
  expect_error_mentions([&] { matmul(a, b); }, {"matmul", "inner", "[2, 3]", "[4, 5]"});
  expect_error_mentions(
      [&] {
        matmul(ones({2, 2, 3}), ones({3, 3, 4}));
      },
      {"matmul", "batch", "[2, 2, 3]", "[3, 3, 4]"});
  // Batch dimensions broadcast as in torch.matmul (issue 30): [2] against [1, 2] is [1, 2].
  EXPECT_EQ(matmul(ones({2, 2, 3}), ones({1, 2, 3, 4})).shape(), Shape({1, 2, 2, 4}));
  expect_error_mentions([&] { matmul(ones({2, 2, 3}), ones({2, 3, 3, 4})); }, {"matmul", "batch", "2 vs 3"});
  expect_error_mentions([&] { matmul(a, ones({3, 2}, {.dtype = DType::Float64})); }, {"matmul", "dtype", "float"});
  expect_error_mentions([&] { matmul(scalar_tensor(1.0), a); }, {"matmul", "dimension"});
  expect_error_mentions([&] { matmul(a, scalar_tensor(1.0)); }, {"matmul", "dimension"});
  expect_error_mentions(
      [&] {
        matmul(ones({2, 3}, {.dtype = DType::Int64}), ones({3, 2}, {.dtype = DType::Int64}));
      },
      {"matmul", "int64"});
  expect_error_mentions([&] { matmul(Tensor(), a); }, {"matmul", "undefined"});
  EXPECT_THROW(matmul(ones({3}), ones({4})), Error);
}

// 16-bit operands are a CUDA feature (cuBLASLt); on the CPU they stay refused, naming the
// operand and both ways out.
TEST(Matmul, SixteenBitOnCpuIsRefused) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    Tensor h = ones({2, 3}, {.dtype = dt});
    const std::string name(dtype_name(dt));
    expect_error_mentions(
        [&] {
          matmul(h, ones({3, 2}, {.dtype = dt}));
        },
        {"matmul: a has dtype " + name, "[2, 3]", "on cpu", "bfloat16/float16 on CUDA", ".to()"});
    expect_error_mentions([&] { linear(h, ones({4, 3}, {.dtype = dt})); }, {"linear: input has dtype " + name});
  }
}

// The TF32 switch of the CUDA GEMM is off by default and reads back what was set, in any
// build (without CUDA it has no effect).
TEST(Matmul, Tf32SwitchDefaultsOff) {
  EXPECT_FALSE(cuda::allow_tf32());
  cuda::set_allow_tf32(true);
  EXPECT_TRUE(cuda::allow_tf32());
  cuda::set_allow_tf32(false);
  EXPECT_FALSE(cuda::allow_tf32());
}

TEST(Linear, MatchesMatmulPlusBias) {
  for (DType dt : {DType::Float64, DType::Float32}) {
    // Float32: entry by entry (product_error_ratio), k = 4 products and the bias.
    auto expect_close = [&](const Tensor& got, const Tensor& want, const Tensor& mag) {
      if (dt == DType::Float64) {
        EXPECT_LT(rel_err(got, want), 1e-12);
      } else {
        EXPECT_LE(product_error_ratio(got, want, mag), gamma32(5));
      }
    };
    Tensor x = rnd({2, 3, 4}, dt, 1), w = rnd({5, 4}, dt, 2), b = rnd({5}, dt, 3);
    Tensor ref = naive_matmul(x, w.transpose(0, 1)) + b.to(DType::Float64);
    Tensor y = linear(x, w, b);
    EXPECT_EQ(y.shape(), Shape({2, 3, 5}));
    expect_close(y, ref, magnitude(x, w.transpose(0, 1)) + abs(f64(b)));
    expect_close(linear(x, w), naive_matmul(x, w.transpose(0, 1)), magnitude(x, w.transpose(0, 1)));
    // A transposed input, a weight that is itself a transposed view, a vector input.
    Tensor xt = rnd({4, 6}, dt, 4).transpose(0, 1);
    Tensor wt = rnd({4, 5}, dt, 5).transpose(0, 1);
    expect_close(linear(xt, wt, b), naive_matmul(xt, wt.transpose(0, 1)) + b.to(DType::Float64),
                 magnitude(xt, wt.transpose(0, 1)) + abs(f64(b)));
    Tensor v = rnd({4}, dt, 6);
    Tensor yv = linear(v, w, b);
    EXPECT_EQ(yv.shape(), Shape({5}));
    expect_close(yv, (naive_matmul(v.view({1, 4}), w.transpose(0, 1)) + b.to(DType::Float64)).view({5}),
                 (magnitude(v.view({1, 4}), w.transpose(0, 1)) + abs(f64(b))).view({5}));
  }
  // Hand-computed: y = x W^T + b.
  Tensor x = from_vector<float>({1, 2}, {1, 2});
  Tensor w = from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2});
  Tensor b = from_vector<float>({10, 20, 30}, {3});
  EXPECT_EQ(linear(x, w, b).to_vector<float>(), (std::vector<float>{11, 22, 33}));
}

TEST(Linear, Errors) {
  Tensor x = ones({2, 4}), w = ones({3, 4});
  expect_error_mentions([&] { linear(x, ones({3, 5})); }, {"linear", "[2, 4]", "[3, 5]"});
  expect_error_mentions([&] { linear(x, ones({4})); }, {"linear", "weight"});
  expect_error_mentions([&] { linear(x, w, ones({4})); }, {"linear", "bias", "[4]"});
  expect_error_mentions([&] { linear(x, w, ones({3}, {.dtype = DType::Float64})); }, {"linear", "dtype"});
  expect_error_mentions([&] { linear(x, ones({3, 4}, {.dtype = DType::Float64})); }, {"linear", "dtype"});
  expect_error_mentions([&] { linear(scalar_tensor(1.0), w); }, {"linear", "dimension"});
}

TEST(Gradcheck, Matmul) {
  expect_gradients_match([](V in) { return matmul(in[0], in[1]); }, {leaf64({3, 4}, 1), leaf64({4, 5}, 2)});
  expect_gradients_match([](V in) { return matmul(in[0], in[1]); }, {leaf64({2, 3, 4}, 3), leaf64({4, 5}, 4)});
  expect_gradients_match([](V in) { return matmul(in[0], in[1]); }, {leaf64({2, 2, 3, 4}, 5), leaf64({2, 2, 4, 3}, 6)});
  expect_gradients_match([](V in) { return matmul(in[0], in[1]); }, {leaf64({3, 4}, 7), leaf64({2, 4, 5}, 8)});
  // Transposed operands (and so transposed gradients flowing back into the views).
  expect_gradients_match([](V in) { return matmul(in[0].transpose(-1, -2), in[1].transpose(0, 1)); },
                         {leaf64({2, 4, 3}, 9), leaf64({5, 4}, 10)});
  expect_gradients_match([](V in) { return matmul(in[0].transpose(-1, -2), in[1].transpose(-1, -2)); },
                         {leaf64({2, 4, 3}, 11), leaf64({2, 5, 4}, 12)});
  // Batch dims that do not merge: a loop forward, the batch sum for b's gradient.
  expect_gradients_match([](V in) { return matmul(in[0].transpose(0, 1), in[1]); },
                         {leaf64({3, 2, 4}, 13), leaf64({4, 5}, 14)});
  // A transposed incoming gradient, and vector operands.
  expect_gradients_match([](V in) { return matmul(in[0], in[1]).transpose(-1, -2); },
                         {leaf64({2, 3, 4}, 15), leaf64({4, 5}, 16)});
  expect_gradients_match([](V in) { return matmul(in[0], in[1]); }, {leaf64({4}, 17), leaf64({2, 4, 3}, 18)});
  expect_gradients_match([](V in) { return matmul(in[0], in[1]); }, {leaf64({3, 4}, 19), leaf64({4}, 20)});
  expect_gradients_match([](V in) { return matmul(in[0], in[1]); }, {leaf64({4}, 21), leaf64({4}, 22)});
}

TEST(Gradcheck, Linear) {
  expect_gradients_match([](V in) { return linear(in[0], in[1], in[2]); },
                         {leaf64({2, 3, 4}, 1), leaf64({5, 4}, 2), leaf64({5}, 3)});
  expect_gradients_match([](V in) { return linear(in[0], in[1]); }, {leaf64({3, 4}, 4), leaf64({2, 4}, 5)});
  expect_gradients_match([](V in) { return linear(in[0], in[1], in[2]); },
                         {leaf64({4}, 6), leaf64({3, 4}, 7), leaf64({3}, 8)});
  // Rows that do not merge (a batched loop, and a batch sum for dW), and a transposed input.
  expect_gradients_match([](V in) { return linear(in[0].transpose(0, 1), in[1], in[2]); },
                         {leaf64({2, 3, 4}, 9), leaf64({5, 4}, 10), leaf64({5}, 11)});
  expect_gradients_match([](V in) { return linear(in[0].transpose(0, 1), in[1].transpose(0, 1)); },
                         {leaf64({4, 3}, 12), leaf64({4, 5}, 13)});
}

TEST(Linear, SkipsGradientsNotNeeded) {
  Tensor x = rnd({3, 4}, DType::Float64, 1);  // no grad
  Tensor w = leaf64({2, 4}, 2), b = rnd({2}, DType::Float64, 3);
  sum(linear(x, w, b)).backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_FALSE(x.grad().defined());
  // dW = dy^T x with dy = ones: each row of dW is the column sums of x.
  Tensor expect = sum(x, {0}).view({1, 4}).expand({2, 4});
  EXPECT_LT(max_abs_diff(w.grad(), expect), 1e-12);
  EXPECT_FALSE(linear(x, w.detach(), b).requires_grad());
}
