#pragma once
// Softmax, log-softmax and cross-entropy of one row, written once against a row executor R
// (row_reduce.h: CpuRow on the CPU, WarpRow on the GPU), so both devices run the same
// arithmetic in the same order. Numerically stable: the row maximum is subtracted before
// exp. Sums are accumulated in double (a float row of a 50k vocabulary keeps about 1e-7
// relative accuracy); exp of float is fast_exp on both devices; log of the double sum is
// the platform's (glibc's or CUDA's, which may differ by an ulp before rounding to T).
#include <math.h>
#include <stdint.h>

#include "strata_kernels/common/fast_math.h"
#include "strata_kernels/common/macros.h"
#include "strata_kernels/common/row_reduce.h"
#include "strata_kernels/common/storage16.h"

namespace strata_kernels {

template <class T>
STRATA_HD T lowest_value() {
  return static_cast<T>(-INFINITY);
}

template <class R, class T>
STRATA_HD T row_max(const T* x, int64_t n) {
  return R::max(
      n, [&](int64_t j) { return x[j]; }, lowest_value<T>());
}

// y = softmax(x) or log_softmax(x) over n values, in the compute type T (what backward
// reads). 16-bit x (X) is widened on load; a 16-bit y16 (Y != T) also receives y rounded
// once, in the same pass (with Y == T, y16 is unused: pass null).
template <class R, class X, class T, class Y>
STRATA_HD void softmax_row(const X* x, T* y, Y* y16, int64_t n, bool log_softmax) {
  const T m = R::max(
      n, [&](int64_t j) { return static_cast<T>(widen(x[j])); }, lowest_value<T>());
  if (log_softmax) {
    // (x - m) - log(s), not x - (m + log(s)): m + log(s) would round to m's magnitude.
    const T ls = static_cast<T>(
        log(R::sum(n, [&](int64_t j) { return static_cast<double>(fast_exp(static_cast<T>(widen(x[j])) - m)); })));
    R::for_each(n, [&](int64_t j) {
      y[j] = (static_cast<T>(widen(x[j])) - m) - ls;
      if constexpr (SeparateStorage<T, Y>::value) store(y16[j], y[j]);
    });
  } else {
    // The sum's pass stores the terms; the second pass scales them.
    const double s = R::sum(n, [&](int64_t j) {
      const T e = fast_exp(static_cast<T>(widen(x[j])) - m);
      y[j] = e;
      return static_cast<double>(e);
    });
    const T inv = static_cast<T>(1.0 / s);
    R::for_each(n, [&](int64_t j) {
      y[j] = y[j] * inv;
      if constexpr (SeparateStorage<T, Y>::value) store(y16[j], y[j]);
    });
  }
}

// y is softmax_row's T output, g the gradient of y (stored as G, as dx is):
//   softmax:     dx = y * (g - sum(g * y))
//   log_softmax: dx = g - exp(y) * sum(g)
template <class R, class G, class T>
STRATA_HD void softmax_backward_row(const G* g, const T* y, G* dx, int64_t n, bool log_softmax) {
  if (log_softmax) {
    const T sg = static_cast<T>(R::sum(n, [&](int64_t j) { return static_cast<double>(widen(g[j])); }));
    R::for_each(n, [&](int64_t j) { store(dx[j], static_cast<T>(widen(g[j])) - fast_exp(y[j]) * sg); });
  } else {
    const T gy = static_cast<T>(
        R::sum(n, [&](int64_t j) { return static_cast<double>(widen(g[j])) * static_cast<double>(y[j]); }));
    R::for_each(n, [&](int64_t j) { store(dx[j], y[j] * (static_cast<T>(widen(g[j])) - gy)); });
  }
}

// Attention's probabilities: the softmax of scale * x over the first `valid` of n values
// (the keys a query may see; the rest of y is 0). y is in the compute type T (what backward
// reads); 16-bit scores (X) are widened on load, and a 16-bit y16 (Y != T) also receives y
// rounded once, in the same pass (with Y == T, y16 is unused: pass null).
template <class R, class X, class T, class Y>
STRATA_HD void prefix_softmax_row(const X* x, T* y, Y* y16, int64_t n, int64_t valid, T scale) {
  const T m = R::max(
      valid, [&](int64_t j) { return static_cast<T>(widen(x[j])) * scale; }, lowest_value<T>());
  const double s = R::sum(valid, [&](int64_t j) {
    const T e = fast_exp(static_cast<T>(widen(x[j])) * scale - m);
    y[j] = e;
    return static_cast<double>(e);
  });
  const T inv = static_cast<T>(1.0 / s);
  R::for_each(valid, [&](int64_t j) {
    y[j] = y[j] * inv;
    if constexpr (SeparateStorage<T, Y>::value) store(y16[j], y[j]);
  });
  R::for_each(n - valid, [&](int64_t j) {
    y[valid + j] = T(0);
    if constexpr (SeparateStorage<T, Y>::value) store(y16[valid + j], T(0));
  });
}

// Its gradient: dx = scale * y * (g - sum(g * y)) over the valid prefix, 0 beyond. g and dx
// may be 16-bit (G, widened on load, rounded once on store); y is the forward's T output.
template <class R, class G, class T>
STRATA_HD void prefix_softmax_backward_row(const G* g, const T* y, G* dx, int64_t n, int64_t valid, T scale) {
  const T gy = static_cast<T>(
      R::sum(valid, [&](int64_t j) { return static_cast<double>(widen(g[j])) * static_cast<double>(y[j]); }));
  R::for_each(valid, [&](int64_t j) { store(dx[j], scale * (y[j] * (static_cast<T>(widen(g[j])) - gy))); });
  R::for_each(n - valid, [&](int64_t j) { store(dx[valid + j], T(0)); });
}

// The keys row `row` of a [.., tq, tk] score stack may see: all of them, or under a causal
// mask those up to its query's position, the queries being the last tq of tk positions.
STRATA_HD int64_t attention_valid_keys(int64_t row, int64_t tq, int64_t tk, bool causal) {
  if (!causal) return tk;
  const int64_t valid = row % tq + 1 + (tk - tq);
  return valid < 0 ? 0 : (valid > tk ? tk : valid);
}

// Cross-entropy of one row of logits against class `target` (the caller skips ignored
// rows): stats[0] = max m, stats[1] = log(sum exp(x - m)) (the leader writes them), and the
// row's loss logsumexp - x[target] in double. The logits may be stored in 16 bits (X,
// storage16.h) with T float: each is widened on load, the rest is T's arithmetic.
template <class R, class X, class T>
STRATA_HD double cross_entropy_row(const X* x, int64_t n, int64_t target, T* stats) {
  const T m = R::max(
      n, [&](int64_t j) { return static_cast<T>(widen(x[j])); }, lowest_value<T>());
  const double log_sum =
      log(R::sum(n, [&](int64_t j) { return static_cast<double>(fast_exp(static_cast<T>(widen(x[j])) - m)); }));
  if (R::leader()) {
    stats[0] = m;
    stats[1] = static_cast<T>(log_sum);
  }
  return log_sum - (static_cast<double>(widen(x[target])) - static_cast<double>(m));
}

// d loss / d x of one counted row: (softmax(x) - onehot(target)) * coef, with
// coef = grad / count, from the forward's stats; dx is stored as the logits (rounded once).
// The row holds `cols` >= n logits of which the first n are classes; the rest (a padded
// vocabulary) took no part: gradient 0.
template <class R, class X, class T>
STRATA_HD void cross_entropy_backward_row(const X* x, int64_t n, int64_t cols, int64_t target, const T* stats, T coef,
                                          X* dx) {
  const T m = stats[0], log_sum = stats[1];
  R::for_each(cols, [&](int64_t j) {
    if (j >= n) {
      store(dx[j], T(0));
      return;
    }
    const T p = fast_exp((static_cast<T>(widen(x[j])) - m) - log_sum) * coef;
    store(dx[j], j == target ? p - coef : p);
  });
}

}  // namespace strata_kernels
