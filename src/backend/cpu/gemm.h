#pragma once
// Checked GEMMs over the backend library (cpu/gemm_backend.h: oneDNN or OpenBLAS), row-major:
//   C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C
// op(X) = X, stored row-major with leading dimension ld (trans = false), or X^T, where X^T
// is stored row-major (trans = true). Passing a transposed view as trans = true is how the
// ops avoid copying transposes.
#include <cstdint>

namespace strata::cpu {

// Throws strata::Error naming the sizes when an argument is out of range for BLAS (negative
// sizes, a leading dimension smaller than the row it must hold, sizes over the BLAS integer).
// beta == 0 overwrites C without reading it (so C may be uninitialised). k == 0 scales C by
// beta, like BLAS.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// `batch` independent products, entry i using a + a_offsets[i], b + b_offsets[i] and
// c + i * c_stride (offsets in elements; an offset of 0 for every entry broadcasts that
// operand). The outputs must not overlap. Arguments are checked once. When each product
// is small the batch loop runs in parallel with OpenMP (BLAS then runs single-threaded in
// each thread); otherwise the entries run one after another and BLAS threads each.
void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  const int64_t* a_offsets, int64_t lda, const float* b, const int64_t* b_offsets, int64_t ldb,
                  float beta, float* c, int64_t c_stride, int64_t ldc, int64_t batch);
void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                  const int64_t* a_offsets, int64_t lda, const double* b, const int64_t* b_offsets, int64_t ldb,
                  double beta, double* c, int64_t c_stride, int64_t ldc, int64_t batch);

// The m*n*k below which gemm_batched parallelises over the batch.
inline constexpr int64_t kSmallGemmWork = int64_t{1} << 20;

}  // namespace strata::cpu
