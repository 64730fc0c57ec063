#pragma once
// Per-line math of min/argmin and logsumexp along the middle axis of a contiguous
// [outer, n, inner] array (a line is the n elements x[(o * n + j) * inner + i], read with
// stride `inner`), as common/line_select.h is for max. The CPU ops
// (src/backend/cpu/line_min_logsumexp.cpp) and the CUDA kernels
// (cuda/line_min_logsumexp.cu, one thread per line) run these same functions.
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "strata_kernels/common/dim_reduce.h"
#include "strata_kernels/common/macros.h"

namespace strata_kernels {

// Minimum of a line and its position: the first occurrence among equals, the first NaN if
// any (a NaN is the minimum, as in torch.min). n >= 1. line_max's mirror image.
template <class T>
STRATA_HD void line_min(const T* x, int64_t n, int64_t stride, T* value, int64_t* index) {
  T best = x[0];
  int64_t arg = 0;
  for (int64_t j = 1; j < n; ++j) {
    if (x[j * stride] < best || (x[j * stride] != x[j * stride] && best == best)) {
      best = x[j * stride];
      arg = j;
    }
  }
  *value = best;
  *index = arg;
}

// log(sum_j exp(x_j)) of a line, shifted by its maximum m so no exp overflows: m + log(sum
// exp(x_j - m)). As torch, the shift is 0 where m is infinite: all -inf (or n == 0) gives
// log(0) = -inf, a +inf gives +inf; a NaN gives NaN. The shifted exps are summed in
// DimReduceAcc (double for float32, so the float32 result is the double value rounded once),
// in index order.
template <class T>
STRATA_HD T line_logsumexp(const T* x, int64_t n, int64_t stride) {
  static_assert(std::is_floating_point<T>::value, "logsumexp is defined for floating types only");
  using Acc = typename DimReduceAcc<T>::type;
  T m = -static_cast<T>(INFINITY);
  for (int64_t j = 0; j < n; ++j) {
    const T v = x[j * stride];
    if (v != v) return v;
    if (v > m) m = v;
  }
  const Acc shift = m - m == T(0) ? static_cast<Acc>(m) : Acc(0);
  Acc s = Acc(0);
  for (int64_t j = 0; j < n; ++j) s += exp(static_cast<Acc>(x[j * stride]) - shift);
  return static_cast<T>(log(s) + shift);
}

}  // namespace strata_kernels
