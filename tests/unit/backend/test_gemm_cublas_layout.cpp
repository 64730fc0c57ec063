// The translation of a GEMM plan into cuBLASLt calls (src/backend/gemm_cublas_layout.h), run
// on the CPU: a small emulator executes the calls as cublasLtMatmul defines them
// (column-major, op(A) and op(B) by the transpose flags, strided batches, beta 0 or 1, the
// bias epilogue) on the plan's own tensors, and the result must equal a plain triple loop
// over the logical matrices. Every path of the plan is covered: one GEMM, merged rows, a
// uniform batch, a batch with offsets only, transposed views, a shared operand, the summed
// batch with and without fold, chunked batches and the bias fallback. The CUDA glue that
// issues these calls runs on a GPU only (tests/gpu/test_matmul_gpu.cpp).
#include "backend/gemm_cublas_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "strata/strata.h"

namespace strata {
namespace {

using gemm::CublasCall;
using gemm::CublasMatrix;

// Element (r, c) of op(M) for a stored column-major matrix M.
double op_at(const double* m, const CublasMatrix& l, int64_t r, int64_t c) {
  return l.trans ? m[c + r * l.ld] : m[r + c * l.ld];
}

// What cuBLASLt must be given: op(A) is m x k, op(B) k x n, every ld at least the stored
// rows (and 1).
void expect_valid(const CublasCall& c) {
  EXPECT_EQ(c.a.trans ? c.a.cols : c.a.rows, c.m);
  EXPECT_EQ(c.a.trans ? c.a.rows : c.a.cols, c.k);
  EXPECT_EQ(c.b.trans ? c.b.cols : c.b.rows, c.k);
  EXPECT_EQ(c.b.trans ? c.b.rows : c.b.cols, c.n);
  EXPECT_GE(c.a.ld, std::max<int64_t>(1, c.a.rows));
  EXPECT_GE(c.b.ld, std::max<int64_t>(1, c.b.rows));
  EXPECT_GE(c.ldd, std::max<int64_t>(1, c.m));
  EXPECT_GE(c.batch, 1);
}

// D = op(A) op(B) (+ D when accumulating) (+ bias[row] when given), as cublasLtMatmul does.
void emulate(const CublasCall& c, const double* a, const double* b, double* d, const double* bias) {
  expect_valid(c);
  for (int64_t i = 0; i < c.batch; ++i) {
    const double* ai = a + c.offset_a + i * c.stride_a;
    const double* bi = b + c.offset_b + i * c.stride_b;
    double* di = d + c.offset_d + i * c.stride_d;
    for (int64_t col = 0; col < c.n; ++col) {
      for (int64_t row = 0; row < c.m; ++row) {
        double acc = 0;
        for (int64_t p = 0; p < c.k; ++p) acc += op_at(ai, c.a, row, p) * op_at(bi, c.b, p, col);
        double& out = di[row + col * c.ldd];
        out = acc + (c.accumulate ? out : 0.0) + (bias ? bias[row] : 0.0);
      }
    }
  }
}

// Runs a plan's calls into a fresh NaN-filled output of `numel` elements.
std::vector<double> run_plan(const gemm::Plan& p, int64_t numel, int64_t max_batch = 1 << 30) {
  std::vector<double> out(static_cast<size_t>(numel), std::nan(""));
  for (const CublasCall& c : gemm::cublas_calls(p, max_batch))
    emulate(c, p.b.t.data<double>(), p.a.t.data<double>(), out.data(), nullptr);
  return out;
}

void expect_near_all(const std::vector<double>& got, const Tensor& want) {
  const std::vector<double> w = want.contiguous().to_vector<double>();
  ASSERT_EQ(got.size(), w.size());
  for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(got[i], w[i], 1e-12 * (1 + std::abs(w[i]))) << "element " << i;
}

Tensor rnd(const Shape& s, uint64_t seed) {
  Generator gen(seed);
  return randn(s, {.dtype = DType::Float64}, &gen);
}

// matmul through the plan and the emulated calls against strata's CPU matmul.
void check_matmul(const Tensor& a, const Tensor& b, const Shape& batch, int64_t max_batch = 1 << 30) {
  const gemm::Plan p = gemm::plan_matmul(a, b, batch);
  const Tensor want = matmul(a, b);
  expect_near_all(run_plan(p, want.numel(), max_batch), want);
}

TEST(GemmCublasLayout, SwapsOperandsForColumnMajor) {
  Tensor a = rnd({37, 29}, 1), b = rnd({29, 53}, 2);
  const gemm::Plan p = gemm::plan_matmul(a, b, Shape{});
  const std::vector<CublasCall> calls = gemm::cublas_calls(p);
  ASSERT_EQ(calls.size(), 1u);
  const CublasCall& c = calls[0];
  EXPECT_EQ(c.m, 53);  // the plan's n
  EXPECT_EQ(c.n, 37);  // the plan's m
  EXPECT_EQ(c.k, 29);
  EXPECT_FALSE(c.a.trans);
  EXPECT_EQ(c.a.rows, 53);  // b [29, 53] row-major is column-major [53, 29]
  EXPECT_EQ(c.a.ld, 53);
  EXPECT_EQ(c.b.rows, 29);  // a [37, 29] row-major is column-major [29, 37]
  EXPECT_EQ(c.ldd, 53);
  EXPECT_EQ(c.batch, 1);
  EXPECT_FALSE(c.accumulate);
  check_matmul(a, b, Shape{});
}

TEST(GemmCublasLayout, TransposedViewsBecomeFlags) {
  Tensor at = rnd({29, 37}, 3), bt = rnd({53, 29}, 4);
  const gemm::Plan p = gemm::plan_matmul(at.transpose(0, 1), bt.transpose(0, 1), Shape{});
  const std::vector<CublasCall> calls = gemm::cublas_calls(p);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_TRUE(calls[0].a.trans);
  EXPECT_TRUE(calls[0].b.trans);
  check_matmul(at.transpose(0, 1), bt.transpose(0, 1), Shape{});
  check_matmul(at.transpose(0, 1), rnd({29, 5}, 5), Shape{});
  check_matmul(rnd({6, 29}, 6), bt.transpose(0, 1), Shape{});
}

TEST(GemmCublasLayout, PaddedRowsKeepTheirLeadingDimension) {
  Tensor wide = rnd({7, 40}, 7);
  Tensor a = wide.narrow(1, 3, 29);  // [7, 29], row stride 40
  const gemm::Plan p = gemm::plan_matmul(a, rnd({29, 11}, 8), Shape{});
  EXPECT_EQ(gemm::cublas_calls(p)[0].b.ld, 40);
  check_matmul(a, rnd({29, 11}, 8), Shape{});
}

TEST(GemmCublasLayout, MergedRowsAreOneCall) {
  Tensor a = rnd({3, 5, 7}, 9), b = rnd({7, 4}, 10);
  const gemm::Plan p = gemm::plan_matmul(a, b, Shape{3});
  EXPECT_EQ(gemm::cublas_calls(p).size(), 1u);
  EXPECT_EQ(gemm::cublas_calls(p)[0].n, 15);
  check_matmul(a, b, Shape{3});
}

TEST(GemmCublasLayout, UniformBatchIsStrided) {
  Tensor a = rnd({2, 3, 5, 7}, 11), b = rnd({2, 3, 7, 4}, 12);
  const gemm::Plan p = gemm::plan_matmul(a, b, Shape{2, 3});
  const std::vector<CublasCall> calls = gemm::cublas_calls(p);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].batch, 6);
  EXPECT_EQ(calls[0].stride_a, 28);  // b's matrices
  EXPECT_EQ(calls[0].stride_b, 35);  // a's matrices
  EXPECT_EQ(calls[0].stride_d, 20);
  check_matmul(a, b, Shape{2, 3});
  // Chunks of at most 4 products: two calls, the second starting at product 4.
  const std::vector<CublasCall> chunks = gemm::cublas_calls(p, 4);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1].batch, 2);
  EXPECT_EQ(chunks[1].offset_d, 80);
  check_matmul(a, b, Shape{2, 3}, 4);
}

TEST(GemmCublasLayout, SharedLeftOperandHasStrideZero) {
  Tensor a = rnd({5, 7}, 13), b = rnd({4, 7, 3}, 14);
  const gemm::Plan p = gemm::plan_matmul(a, b, Shape{4});
  const std::vector<CublasCall> calls = gemm::cublas_calls(p);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].stride_b, 0);
  check_matmul(a, b, Shape{4});
  // A transposed stack against a shared right operand (rows do not merge).
  Tensor x = rnd({4, 7, 5}, 15);
  check_matmul(x.transpose(-1, -2), rnd({7, 3}, 16), Shape{4});
}

TEST(GemmCublasLayout, BatchWithOffsetsIsOneCallPerProduct) {
  Tensor big = rnd({3, 4, 5, 6}, 17);
  Tensor a = big.narrow(1, 0, 3);  // batch [3, 3] strides [120, 30]: no single stride
  Tensor b = rnd({3, 3, 6, 2}, 18);
  const gemm::Plan p = gemm::plan_matmul(a, b, Shape{3, 3});
  ASSERT_FALSE(p.a.batch_stride.has_value());
  const std::vector<CublasCall> calls = gemm::cublas_calls(p);
  ASSERT_EQ(calls.size(), 9u);
  EXPECT_EQ(calls[3].offset_b, 120);  // a's product 3 (batch index [1, 0])
  EXPECT_EQ(calls[3].offset_d, 30);
  check_matmul(a, b, Shape{3, 3});
}

// The gradient of a shared operand: sum over the batch of a[i] @ b[i].
void check_sum(const Tensor& a, const Tensor& b) {
  const gemm::Plan p = gemm::plan_matmul_sum(a, b);
  const Tensor want = sum(matmul(a, b), std::vector<int64_t>{0});
  expect_near_all(run_plan(p, want.numel()), want);
}

TEST(GemmCublasLayout, SummedBatchFoldsOrAccumulates) {
  // dW of a linear layer: folds into one call with k = B*T.
  Tensor g = rnd({4, 6, 5}, 19), x = rnd({4, 6, 3}, 20);
  const gemm::Plan folded = gemm::plan_matmul_sum(g.transpose(-1, -2), x);
  ASSERT_EQ(gemm::cublas_calls(folded).size(), 1u);
  EXPECT_EQ(gemm::cublas_calls(folded)[0].k, 24);
  check_sum(g.transpose(-1, -2), x);
  // linear's 16-bit bias gradient on CUDA, g^T @ ones: the column sums of g, also one call.
  const Tensor ones_col = ones({4, 6, 1}, {.dtype = DType::Float64});
  EXPECT_EQ(gemm::cublas_calls(gemm::plan_matmul_sum(g.transpose(-1, -2), ones_col)).size(), 1u);
  check_sum(g.transpose(-1, -2), ones_col);
  // No fold: one call per product, all after the first accumulating into one output.
  Tensor a = rnd({3, 5, 4}, 21), b = rnd({3, 4, 2}, 22);
  const gemm::Plan p = gemm::plan_matmul_sum(a, b);
  ASSERT_TRUE(p.sum_batch);
  const std::vector<CublasCall> calls = gemm::cublas_calls(p);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_FALSE(calls[0].accumulate);
  EXPECT_TRUE(calls[1].accumulate);
  EXPECT_TRUE(calls[2].accumulate);
  EXPECT_EQ(calls[2].offset_d, 0);
  check_sum(a, b);
}

TEST(GemmCublasLayout, EmptyProductsIssueNothing) {
  EXPECT_TRUE(gemm::cublas_calls(gemm::plan_matmul(rnd({3, 0}, 23), rnd({0, 4}, 24), Shape{})).empty());
  EXPECT_TRUE(gemm::cublas_calls(gemm::plan_matmul(rnd({0, 3, 2}, 25), rnd({0, 2, 4}, 26), Shape{0})).empty());
}

// The bias epilogue adds bias[row] of column-major D, i.e. bias[col] of the plan's output;
// the fallback rank-1 call adds the same.
TEST(GemmCublasLayout, BiasEpilogueAndFallbackAddOverColumns) {
  Tensor a = rnd({2, 5, 7}, 27), b = rnd({7, 4}, 28), bias = rnd({4}, 29);
  const Tensor want = add(matmul(a, b), bias);
  const gemm::Plan p = gemm::plan_matmul(a, b, Shape{2});
  std::vector<double> epilogue(static_cast<size_t>(want.numel()), std::nan(""));
  for (const CublasCall& c : gemm::cublas_calls(p))
    emulate(c, p.b.t.data<double>(), p.a.t.data<double>(), epilogue.data(), bias.data<double>());
  expect_near_all(epilogue, want);

  std::vector<double> fallback = run_plan(p, want.numel());
  const std::vector<double> ones(10, 1.0);
  const CublasCall c = gemm::bias_rows_call(4, 10);
  EXPECT_TRUE(c.accumulate);
  emulate(c, bias.data<double>(), ones.data(), fallback.data(), nullptr);
  expect_near_all(fallback, want);
}

}  // namespace
}  // namespace strata
