#pragma once
// Sums over the rows of a [rows, width] table of terms (the norms' weight and bias
// gradients) in one fixed order, so that the CPU (any number of threads) and the GPU give
// the same bits and no atomics are needed:
//   1. rows are cut into blocks of kColumnBlockRows; block b's partial for column j is the
//      sum in T of its rows' terms in row order, starting from 0;
//   2. column j's total is the sum in double of the blocks' partials in block order,
//      rounded to T.
// The CPU loops run step 1 inside their row loop (a block's rows in order, the columns as a
// vector loop); the GPU runs one thread per (block, column). Either way each partial sees
// the same additions in the same order.
#include <stdint.h>

#include "strata_kernels/common/macros.h"
#include "strata_kernels/common/row_norms.h"

namespace strata_kernels {

constexpr int64_t kColumnBlockRows = 64;

STRATA_HD int64_t column_blocks(int64_t rows) { return (rows + kColumnBlockRows - 1) / kColumnBlockRows; }

// Step 2 for column j; partials is [blocks, stride], the column at offset j.
template <class T>
STRATA_HD T column_total(const T* partials, int64_t blocks, int64_t stride, int64_t j) {
  double s = 0;
  for (int64_t b = 0; b < blocks; ++b) s += static_cast<double>(partials[b * stride + j]);
  return static_cast<T>(s);
}

// The terms of the norms' parameter gradients for one element.
template <class T>
STRATA_HD T layer_norm_dweight_term(T g, T x, T mean, T rstd) {
  return g * layer_norm_xhat(x, mean, rstd);
}

template <class T>
STRATA_HD T rms_norm_dweight_term(T g, T x, T rstd) {
  return g * x * rstd;
}

}  // namespace strata_kernels
