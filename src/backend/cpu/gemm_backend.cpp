#include "backend/cpu/gemm_backend.h"

#include <cblas.h>
#include <omp.h>

#ifdef STRATA_HAS_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include "strata/core/error.h"

namespace strata::cpu {
namespace {

void openblas(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

#ifdef STRATA_HAS_ONEDNN
// oneDNN costs about 0.5 us more per call than OpenBLAS and, with several threads, starts
// them for products OpenBLAS keeps on one (256^3 on 2 threads: 263 us against 209), so it
// takes only the products where it was measured faster: from 2^20 multiply-adds when the
// call runs on one thread (inside an OpenMP loop, or OMP_NUM_THREADS=1), from 2^24 otherwise.
bool use_onednn(int64_t m, int64_t n, int64_t k) {
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const bool one_thread = omp_in_parallel() || omp_get_max_threads() == 1;
  return work >= (one_thread ? 0x1p20 : 0x1p24);
}
#endif

}  // namespace

void backend_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
#ifdef STRATA_HAS_ONEDNN
  if (use_onednn(m, n, k)) {
    const dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    STRATA_CHECK(st == dnnl_success, "gemm: dnnl_sgemm failed with status ", static_cast<int>(st), " (m=", m, ", n=", n,
                 ", k=", k, ", lda=", lda, ", ldb=", ldb, ", ldc=", ldc, ")");
    return;
  }
#endif
  openblas(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void backend_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                  const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  // oneDNN has no float64 GEMM.
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

const char* gemm_backend_name() {
#ifdef STRATA_HAS_ONEDNN
  return "onednn";
#else
  return "openblas";
#endif
}

}  // namespace strata::cpu
