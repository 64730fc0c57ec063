#pragma once
// The last step of strata_kernels/common/column_sum.h's order on the CPU: each column's total over
// the row blocks' partial sums, in block order.
#include <cstdint>

#include "strata_kernels/common/column_sum.h"

namespace strata::cpu {

// out[j] = total of column offset + j of partials ([blocks, stride]) for j < n; nothing
// when out or partials is null.
template <class T>
void column_totals(const T* partials, int64_t blocks, int64_t stride, int64_t offset, int64_t n, T* out) {
  if (out == nullptr || partials == nullptr) return;
  for (int64_t j = 0; j < n; ++j) out[j] = strata_kernels::column_total(partials + offset, blocks, stride, j);
}

}  // namespace strata::cpu
