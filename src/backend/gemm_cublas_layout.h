#pragma once
// How a gemm::Plan (row-major products, gemm_plan.h) becomes cublasLtMatmul calls. Pure
// geometry, no CUDA headers: unit-tested on machines without a GPU.
//
// cuBLAS is column-major. A row-major [r, c] matrix with leading dimension ld is, in the
// same memory, the column-major [c, r] matrix with that ld, so C = A B (row-major) is
// computed as C^T = B^T A^T (column-major): cuBLAS's A reads the plan's b, its B the plan's
// a, and its m, n are the plan's n, m. The alternative, CUBLASLT_ORDER_ROW layouts, is
// avoided: cuBLASLt's heuristics find kernels for row order in few type combinations, while
// every algorithm takes the swapped column-major problem. The swap also makes the bias
// epilogue fit: it adds a vector over D's rows, which are the plan's output columns.
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/gemm_plan.h"

namespace strata::gemm {

// One operand as cuBLASLt's matrix layout describes it: the stored column-major matrix
// (rows x cols, leading dimension ld >= rows) and whether the product reads its transpose.
struct CublasMatrix {
  bool trans = false;
  int64_t rows = 0, cols = 0, ld = 1;
};

// One cublasLtMatmul: D[m, n] = op(A)[m, k] op(B)[k, n] (+ D when accumulate), column-major,
// `batch` products apart by the strides (elements). A reads the plan's b tensor, B the plan's
// a tensor, D the output; the offsets locate this call's first product from each one's data.
struct CublasCall {
  int64_t m = 0, n = 0, k = 0;
  CublasMatrix a, b;
  int64_t ldd = 1;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  int64_t offset_a = 0, offset_b = 0, offset_d = 0;
  bool accumulate = false;  // beta = 1: D already holds a partial sum (sum_batch), else beta = 0
};

// The calls that run plan p into a row-major output ([batch, m, n], or [m, n] with
// sum_batch), in order. A uniform batch (both operands with a batch_stride) becomes strided
// batched calls of at most max_batch products; other batches one call per product; a
// sum_batch plan one call per product, all after the first accumulating. Empty when the
// output is all zeros or empty (m, n, k or batch is 0): the caller then fills it.
std::vector<CublasCall> cublas_calls(const Plan& p, int64_t max_batch = std::numeric_limits<int32_t>::max());

// D[n, rows] += bias[n] ones[rows]^T (column-major, ldd = n): adds a bias vector to `rows`
// row-major output rows of n columns, reading bias as an [n, 1] and ones as a [1, rows]
// matrix. For where cuBLASLt has no bias epilogue kernel for a product.
CublasCall bias_rows_call(int64_t n, int64_t rows);

}  // namespace strata::gemm
