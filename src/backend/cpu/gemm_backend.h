#pragma once
// The library call under every CPU GEMM (cpu::gemm, attention's per-head products):
//   C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C, row-major, as in cpu/gemm.h,
// without argument checks. float32 products of at least backend_min_work() multiply-adds go to
// oneDNN's dnnl_sgemm in builds with it (STRATA_GEMM_BACKEND), everything else to OpenBLAS.
#include <cstdint>

namespace strata::cpu {

void backend_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void backend_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                  int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// "onednn" or "openblas": what runs large float32 products (strata::gemm_backend()).
const char* gemm_backend_name();

}  // namespace strata::cpu
