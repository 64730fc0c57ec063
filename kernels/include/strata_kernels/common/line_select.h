#pragma once
// Per-line math of max/argmax, topk and cumsum along one dimension of a contiguous
// [outer, n, inner] array: a line is the n elements x[(o * n + j) * inner + i], j = 0..n-1,
// read with stride `inner`. The CPU ops (src/backend/cpu/reduce.cpp) and the CUDA kernels
// (cuda/line_select.cu, one thread per line) run these same functions, so both give the
// same values and indices, bit for bit.
#include <stdint.h>

#include "strata_kernels/common/dim_reduce.h"
#include "strata_kernels/common/macros.h"

namespace strata_kernels {

// The rank order of max and topk on values: a strictly before b. NaN counts as larger than
// every number (first when largest, last when smallest); two NaNs are equal. Integers have
// no NaN (v != v is false).
template <class T>
STRATA_HD bool value_before(T a, T b, bool largest) {
  const bool a_nan = a != a, b_nan = b != b;
  if (a_nan != b_nan) return largest ? a_nan : b_nan;
  return !a_nan && (largest ? a > b : a < b);
}

// Maximum of a line and its position: the first occurrence among equals, the first NaN if
// any (a NaN is the maximum). n >= 1.
template <class T>
STRATA_HD void line_max(const T* x, int64_t n, int64_t stride, T* value, int64_t* index) {
  T best = x[0];
  int64_t arg = 0;
  for (int64_t j = 1; j < n; ++j) {
    // value_before(x[j], best, true) written out: a larger value, or the first NaN after
    // numbers. Written so (the element read again where it is taken, not held in a local),
    // GCC keeps a branch here; holding it compiled to a conditional move on x86, a
    // dependency chain through `best` that ran the CPU max 2.5x slower.
    if (x[j * stride] > best || (x[j * stride] != x[j * stride] && best == best)) {
      best = x[j * stride];
      arg = j;
    }
  }
  *value = best;
  *index = arg;
}

// The k largest (smallest) entries of a line, best first, equal values in index order, into
// values[t * out_stride], indices[t * out_stride], t < k (k <= n). A bounded insertion: the
// line is read once in index order and each entry that ranks before the current k-th is
// inserted after the kept entries it does not rank before (so equal values stay in index
// order). (value, index) pairs are totally ordered, so this is the unique answer any sort by
// that order gives. O(n) comparisons plus O(k) moves per insertion: meant for small k.
template <class T>
STRATA_HD void line_topk(const T* x, int64_t n, int64_t stride, int64_t k, bool largest, T* values, int64_t* indices,
                         int64_t out_stride) {
  if (k <= 0) return;
  int64_t kept = 0;
  for (int64_t j = 0; j < n; ++j) {
    const T v = x[j * stride];
    if (kept == k && !value_before(v, values[(k - 1) * out_stride], largest)) continue;
    int64_t at = kept < k ? kept : k - 1;  // the slot freed for it (the last one when full)
    while (at > 0 && value_before(v, values[(at - 1) * out_stride], largest)) {
      values[at * out_stride] = values[(at - 1) * out_stride];
      indices[at * out_stride] = indices[(at - 1) * out_stride];
      --at;
    }
    values[at * out_stride] = v;
    indices[at * out_stride] = j;
    if (kept < k) ++kept;
  }
}

// cumsum's accumulator: the sum's (dim_reduce.h): double for floating types (float32 too),
// the type itself for integers.
template <class T>
using CumsumAcc = DimReduceAcc<T>;

// One step of an inclusive prefix sum: the running sum takes x, the output is its rounding
// to T. Every cumsum (CPU row by row, GPU line by line) is this step in index order (reverse
// index order for the suffix sums of the backward), so the bits agree.
template <class T, class Acc>
STRATA_HD T cumsum_step(Acc* acc, T x) {
  *acc += x;
  return static_cast<T>(*acc);
}

// Inclusive prefix sums of one line (suffix sums when `reverse`) into out (same stride).
template <class T>
STRATA_HD void line_cumsum(const T* x, T* out, int64_t n, int64_t stride, bool reverse) {
  using Acc = typename CumsumAcc<T>::type;
  Acc acc = Acc(0);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t at = (reverse ? n - 1 - j : j) * stride;
    out[at] = cumsum_step<T, Acc>(&acc, x[at]);
  }
}

// The adjoint of picking k entries of a line (max, topk): out[index[t]] += grad[t] for
// t = 0..k-1 in that order, out a line of n (stride `stride`) holding zeros. The CPU's
// scatter_add in its order, so a -0 gradient lands as +0 on both.
template <class T>
STRATA_HD void line_scatter_add(T* out, int64_t stride, const int64_t* index, const T* grad, int64_t k,
                                int64_t in_stride) {
  for (int64_t t = 0; t < k; ++t) out[index[t * in_stride] * stride] += grad[t * in_stride];
}

}  // namespace strata_kernels
