#include "backend/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <limits>

#include "backend/cpu/gemm_backend.h"
#include "strata/core/error.h"

namespace strata::cpu {
namespace {

constexpr int64_t kBlasIntMax = std::numeric_limits<blasint>::max();

void check_args(const char* who, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                int64_t ldc) {
  STRATA_CHECK(m >= 0 && n >= 0 && k >= 0, who, ": negative size (m=", m, ", n=", n, ", k=", k, ")");
  STRATA_CHECK(m <= kBlasIntMax && n <= kBlasIntMax && k <= kBlasIntMax, who, ": size (m=", m, ", n=", n, ", k=", k,
               ") exceeds the BLAS integer range ", kBlasIntMax);
  // Row-major: a stored row holds the columns of the stored (possibly transposed) matrix.
  const int64_t a_row = std::max<int64_t>(1, trans_a ? m : k);
  const int64_t b_row = std::max<int64_t>(1, trans_b ? k : n);
  const int64_t c_row = std::max<int64_t>(1, n);
  STRATA_CHECK(lda >= a_row && ldb >= b_row && ldc >= c_row, who, ": leading dimension too small (lda=", lda,
               " needs >= ", a_row, ", ldb=", ldb, " needs >= ", b_row, ", ldc=", ldc, " needs >= ", c_row, "; m=", m,
               ", n=", n, ", k=", k, ", trans_a=", trans_a, ", trans_b=", trans_b, ")");
  STRATA_CHECK(lda <= kBlasIntMax && ldb <= kBlasIntMax && ldc <= kBlasIntMax, who,
               ": leading dimension exceeds the BLAS integer range (lda=", lda, ", ldb=", ldb, ", ldc=", ldc, ")");
}

// C = beta * C for k == 0, where BLAS implementations differ on whether they touch C.
template <class T>
void scale_c(int64_t m, int64_t n, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    T* row = c + i * ldc;
    if (beta == T(0)) {
      std::fill(row, row + n, T(0));  // not 0 * C: C may hold uninitialised NaNs
    } else if (beta != T(1)) {
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  }
}

template <class T>
void gemm_impl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc) {
  check_args("gemm", ta, tb, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_c(m, n, beta, c, ldc);
  backend_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <class T>
void gemm_batched_impl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, const int64_t* a_offsets,
                       int64_t lda, const T* b, const int64_t* b_offsets, int64_t ldb, T beta, T* c, int64_t c_stride,
                       int64_t ldc, int64_t batch) {
  check_args("gemm_batched", ta, tb, m, n, k, lda, ldb, ldc);
  STRATA_CHECK(batch >= 0, "gemm_batched: negative batch ", batch);
  if (m == 0 || n == 0 || batch == 0) return;
  STRATA_CHECK(batch == 1 || c_stride >= (m - 1) * ldc + n, "gemm_batched: output stride ", c_stride,
               " makes outputs overlap (m=", m, ", n=", n, ", ldc=", ldc, ")");
  if (k == 0) {
    for (int64_t i = 0; i < batch; ++i) scale_c(m, n, beta, c + i * c_stride, ldc);
    return;
  }
  // Small products: one BLAS call per OpenMP thread. The OpenMP build of OpenBLAS runs
  // single-threaded when called inside a parallel region, so the pools do not nest.
  const bool small = m * n * k < kSmallGemmWork;
#pragma omp parallel for if (batch > 1 && small) schedule(static)
  for (int64_t i = 0; i < batch; ++i) {
    backend_gemm(ta, tb, m, n, k, alpha, a + a_offsets[i], lda, b + b_offsets[i], ldb, beta, c + i * c_stride, ldc);
  }
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_impl(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  gemm_impl(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  const int64_t* a_offsets, int64_t lda, const float* b, const int64_t* b_offsets, int64_t ldb,
                  float beta, float* c, int64_t c_stride, int64_t ldc, int64_t batch) {
  gemm_batched_impl(trans_a, trans_b, m, n, k, alpha, a, a_offsets, lda, b, b_offsets, ldb, beta, c, c_stride, ldc,
                    batch);
}
void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                  const int64_t* a_offsets, int64_t lda, const double* b, const int64_t* b_offsets, int64_t ldb,
                  double beta, double* c, int64_t c_stride, int64_t ldc, int64_t batch) {
  gemm_batched_impl(trans_a, trans_b, m, n, k, alpha, a, a_offsets, lda, b, b_offsets, ldb, beta, c, c_stride, ldc,
                    batch);
}

}  // namespace strata::cpu
