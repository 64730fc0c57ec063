#pragma once
// The order of every reduction along a row (the norms, softmax, cross-entropy), and the CPU
// executor that replays it. Row functions (row_softmax.h, row_norms.h) are written once
// against an executor `R` and run on the CPU with CpuRow and on the GPU with
// cuda/row_executor.cuh's WarpRow, one warp per row; the only GPU-only piece is the warp's
// halving step, which CpuRow replays, so both give the same bits.
//
// The order, for a row of n values and kRowLanes = L lanes:
//   1. lane t combines values t, t+L, t+2L, ... in that order, starting from the identity;
//   2. the lanes halve pairwise: for s = L/2, L/4, ..., 1, lane t < s takes
//      combine(lane t, lane t + s);
//   3. lane 0 holds the row's result (every lane of the executor may read it).
// An executor R provides:
//   R::sum(n, f)       sum of f(j), j < n, in double (f returns double)
//   R::sum2(n, f)      two such sums in one pass (f returns a Sum2)
//   R::max(n, f, lo)   maximum of f(j), starting from lo (exact: the order cannot matter)
//   R::for_each(n, f)  f(j) for every j < n (elementwise, no order)
//   R::leader()        true on the one thread that writes a row's scalars (mean, rstd, ...)
#include <stdint.h>

#include "strata_kernels/common/macros.h"

namespace strata_kernels {

constexpr int kRowLanes = 32;

struct Sum2 {
  double a, b;
};

#if !defined(__CUDACC__)
// Host-only: the CPU loops call it from inside their STRATA_MULTIVERSION functions, so each
// ISA version inlines it (and the lane loops vectorise across the 32 lanes).
struct CpuRow {
  template <class F>
  STRATA_HD static double sum(int64_t n, F&& f) {
    double lanes[kRowLanes] = {};
    int64_t base = 0;
    for (; base + kRowLanes <= n; base += kRowLanes) {
#pragma omp simd
      for (int l = 0; l < kRowLanes; ++l) lanes[l] += f(base + l);
    }
    for (int l = 0; base + l < n; ++l) lanes[l] += f(base + l);
    return halve(lanes);
  }

  template <class F>
  STRATA_HD static Sum2 sum2(int64_t n, F&& f) {
    double la[kRowLanes] = {}, lb[kRowLanes] = {};
    int64_t base = 0;
    for (; base + kRowLanes <= n; base += kRowLanes) {
#pragma omp simd
      for (int l = 0; l < kRowLanes; ++l) {
        const Sum2 v = f(base + l);
        la[l] += v.a;
        lb[l] += v.b;
      }
    }
    for (int l = 0; base + l < n; ++l) {
      const Sum2 v = f(base + l);
      la[l] += v.a;
      lb[l] += v.b;
    }
    return {halve(la), halve(lb)};
  }

  template <class T, class F>
  STRATA_HD static T max(int64_t n, F&& f, T lo) {
    T m = lo;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; ++j) {
      const T v = f(j);
      m = v > m ? v : m;
    }
    return m;
  }

  template <class F>
  STRATA_HD static void for_each(int64_t n, F&& f) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) f(j);
  }

  STRATA_HD static bool leader() { return true; }

  // Step 2 of the order.
  STRATA_HD static double halve(double* lanes) {
    for (int s = kRowLanes / 2; s > 0; s /= 2)
      for (int l = 0; l < s; ++l) lanes[l] += lanes[l + s];
    return lanes[0];
  }
};
#endif

}  // namespace strata_kernels
