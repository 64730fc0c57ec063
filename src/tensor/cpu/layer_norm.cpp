#include "layer_norm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "dtype_dispatch.h"
#include "multiversion.h"
#include "thread_partials.h"
#include "strata/tensor/factory.h"

namespace strata::cpu {
namespace {

constexpr int64_t kParallelThreshold = 16384;  // elements

// weight/bias as raw [D] arrays; an undefined one becomes ones/zeros so that every row
// loop has one shape (D elements stay in L1, the extra load costs nothing measurable).
Tensor or_filled(const Tensor& t, int64_t d, DType dtype, double value) {
  return t.defined() ? t : full({d}, value, {.dtype = dtype});
}

template <class T>
STRATA_MULTIVERSION void layer_norm_kernel(const T* x, const T* w, const T* b, int64_t rows, int64_t d, double eps,
                                           T* y, T* mean, T* rstd) {
#pragma omp parallel for if (rows * d > kParallelThreshold) schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    const T* xr = x + i * d;
    T* yr = y + i * d;
    // Two passes over the cached row, accumulated in double: no cancellation in the
    // variance even for rows with a large mean.
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < d; ++j) s += static_cast<double>(xr[j]);
    const double mu = s / static_cast<double>(d);
    double v = 0;
#pragma omp simd reduction(+ : v)
    for (int64_t j = 0; j < d; ++j) {
      const double c = static_cast<double>(xr[j]) - mu;
      v += c * c;
    }
    const double rs = 1.0 / std::sqrt(v / static_cast<double>(d) + eps);
    const T mu_t = static_cast<T>(mu), rs_t = static_cast<T>(rs);
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mu_t) * rs_t * w[j] + b[j];
    mean[i] = mu_t;
    rstd[i] = rs_t;
  }
}

// Rows [r0, r1): dx (when dx != null) and, when dw != null, dweight/dbias partial sums
// accumulated into dw[0, d) and db[0, d).
template <class T>
STRATA_ALWAYS_INLINE void layer_norm_backward_rows(const T* g, const T* x, const T* w, const T* mean, const T* rstd,
                                                   int64_t r0, int64_t r1, int64_t d, T* dx, T* dw, T* db) {
  const T inv_d = T(1) / static_cast<T>(d);
  for (int64_t i = r0; i < r1; ++i) {
    const T* gr = g + i * d;
    const T* xr = x + i * d;
    const T mu = mean[i], rs = rstd[i];
    // Pass 1: the two row means that dx needs, and the parameter gradients.
    T s1 = 0, s2 = 0;
    if (dw != nullptr) {
#pragma omp simd reduction(+ : s1, s2)
      for (int64_t j = 0; j < d; ++j) {
        const T xhat = (xr[j] - mu) * rs;
        const T dxhat = gr[j] * w[j];
        s1 += dxhat;
        s2 += dxhat * xhat;
        dw[j] += gr[j] * xhat;
        db[j] += gr[j];
      }
    } else {
#pragma omp simd reduction(+ : s1, s2)
      for (int64_t j = 0; j < d; ++j) {
        const T dxhat = gr[j] * w[j];
        s1 += dxhat;
        s2 += dxhat * ((xr[j] - mu) * rs);
      }
    }
    if (dx == nullptr) continue;
    // Pass 2: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
    const T a = s1 * inv_d, c = s2 * inv_d;
    T* dr = dx + i * d;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      const T xhat = (xr[j] - mu) * rs;
      dr[j] = rs * (gr[j] * w[j] - a - xhat * c);
    }
  }
}

// partials: slots of 2 d elements ([dweight | dbias]), or none when the parameter
// gradients are not needed.
template <class T>
STRATA_MULTIVERSION void layer_norm_backward_kernel(const T* g, const T* x, const T* w, const T* mean, const T* rstd,
                                                    int64_t rows, int64_t d, int threads, T* dx,
                                                    ThreadPartials<T>& partials) {
#pragma omp parallel num_threads(threads)
  {
    const auto c = partials.claim(rows);
    T* db = c.slot != nullptr ? c.slot + d : nullptr;
    layer_norm_backward_rows(g, x, w, mean, rstd, c.r0, c.r1, d, dx, c.slot, db);
  }
}

}  // namespace

LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  LayerNormResult r{empty_like(x), empty({rows}, {.dtype = x.dtype()}), empty({rows}, {.dtype = x.dtype()})};
  if (rows == 0) return r;
  Tensor w = or_filled(weight, d, x.dtype(), 1.0);
  Tensor b = or_filled(bias, d, x.dtype(), 0.0);
  detail::dispatch_floating(x.dtype(), "layer_norm", [&]<class T>() {
    layer_norm_kernel(x.data<T>(), w.data<T>(), b.data<T>(), rows, d, eps, r.out.data<T>(), r.mean.data<T>(),
                      r.rstd.data<T>());
  });
  return r;
}

LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& rstd, bool need_dx, bool need_dweight, bool need_dbias) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  LayerNormGrads g;
  if (need_dx) g.dx = empty_like(x);
  if (need_dweight) g.dweight = zeros({d}, {.dtype = x.dtype()});
  if (need_dbias) g.dbias = zeros({d}, {.dtype = x.dtype()});
  if (rows == 0) return g;
  const bool need_params = need_dweight || need_dbias;
  const int threads = rows * d > kParallelThreshold ? std::max(1, omp_get_max_threads()) : 1;
  Tensor partial = need_params ? empty({threads, 2 * d}, {.dtype = x.dtype()}) : Tensor();
  Tensor w = or_filled(weight, d, x.dtype(), 1.0);
  detail::dispatch_floating(x.dtype(), "layer_norm backward", [&]<class T>() {
    ThreadPartials<T> partials(need_params ? partial.data<T>() : nullptr, 2 * d);
    layer_norm_backward_kernel(grad.data<T>(), x.data<T>(), w.data<T>(), mean.data<T>(), rstd.data<T>(), rows, d,
                               threads, need_dx ? g.dx.data<T>() : nullptr, partials);
    // Reduce the partial sums in thread order.
    if (need_dweight) partials.add_to(g.dweight.data<T>(), 0, d);
    if (need_dbias) partials.add_to(g.dbias.data<T>(), d, d);
  });
  return g;
}

}  // namespace strata::cpu
