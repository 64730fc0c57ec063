#pragma once
// Layer norm and RMS norm of one row of d values, forward and the input gradient, written
// once against a row executor R (row_reduce.h), so the CPU and the GPU run the same
// arithmetic in the same order. Row statistics are accumulated in double: two passes for
// the variance (no cancellation for rows with a large mean). The weight and bias gradients
// are sums over rows: column_sum.h.
//
// T is the compute type (parameters, statistics, math); the row data X, the output Y and
// the gradients may be stored in 16 bits (storage16.h): widened on load, rounded once on
// store, so a 16-bit row gives exactly the float32 function of its widened values, rounded.
#include <math.h>
#include <stdint.h>

#include "strata_kernels/common/macros.h"
#include "strata_kernels/common/rms_norm.h"
#include "strata_kernels/common/row_reduce.h"
#include "strata_kernels/common/storage16.h"

namespace strata_kernels {

// y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps) (biased variance). The leader
// writes *mean and *rstd in T.
template <class R, class X, class T, class Y>
STRATA_HD void layer_norm_row(const X* x, const T* w, const T* b, int64_t d, double eps, Y* y, T* mean, T* rstd) {
  const double inv_d = 1.0 / static_cast<double>(d);
  const double mu = R::sum(d, [&](int64_t j) { return static_cast<double>(widen(x[j])); }) * inv_d;
  const double var = R::sum(d,
                            [&](int64_t j) {
                              const double c = static_cast<double>(widen(x[j])) - mu;
                              return c * c;
                            }) *
                     inv_d;
  const T mu_t = static_cast<T>(mu), rs_t = static_cast<T>(1.0 / sqrt(var + eps));
  R::for_each(d, [&](int64_t j) { store(y[j], (widen(x[j]) - mu_t) * rs_t * w[j] + b[j]); });
  if (R::leader()) {
    *mean = mu_t;
    *rstd = rs_t;
  }
}

template <class T>
STRATA_HD T layer_norm_xhat(T x, T mean, T rstd) {
  return (x - mean) * rstd;
}

// dx = rstd * (g w - mean(g w) - xhat * mean(g w xhat)).
// g is stored as the forward's output, dx as its input.
template <class R, class G, class X, class T>
STRATA_HD void layer_norm_backward_row(const G* g, const X* x, const T* w, T mean, T rstd, int64_t d, X* dx) {
  const Sum2 s = R::sum2(d, [&](int64_t j) {
    const T gw = widen(g[j]) * w[j];
    return Sum2{static_cast<double>(gw), static_cast<double>(gw * layer_norm_xhat(widen(x[j]), mean, rstd))};
  });
  const double inv_d = 1.0 / static_cast<double>(d);
  const T a = static_cast<T>(s.a * inv_d), c = static_cast<T>(s.b * inv_d);
  R::for_each(d, [&](int64_t j) {
    store(dx[j], rstd * (widen(g[j]) * w[j] - a - layer_norm_xhat(widen(x[j]), mean, rstd) * c));
  });
}

// y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps); the leader writes *rstd.
template <class R, class X, class T, class Y>
STRATA_HD void rms_norm_row(const X* x, const T* w, int64_t d, double eps, Y* y, T* rstd) {
  const double sum_sq = R::sum(d, [&](int64_t j) {
    const double v = static_cast<double>(widen(x[j]));
    return v * v;
  });
  const T rs = static_cast<T>(rms_norm_rstd(sum_sq, d, eps));
  R::for_each(d, [&](int64_t j) { store(y[j], rms_norm_out<T>(widen(x[j]), rs, w[j])); });
  if (R::leader()) *rstd = rs;
}

template <class R, class G, class X, class T>
STRATA_HD void rms_norm_backward_row(const G* g, const X* x, const T* w, T rstd, int64_t d, X* dx) {
  const double dot =
      R::sum(d, [&](int64_t j) { return static_cast<double>(widen(g[j]) * w[j]) * static_cast<double>(widen(x[j])); });
  const T c = static_cast<T>(rms_norm_grad_coeff(dot, rstd, d));
  R::for_each(d, [&](int64_t j) { store(dx[j], rms_norm_grad_x<T>(widen(g[j]), w[j], widen(x[j]), rstd, c)); });
}

}  // namespace strata_kernels
