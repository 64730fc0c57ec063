#include "rms_norm.h"

#include <omp.h>

#include <algorithm>

#include "common/rms_norm.h"
#include "dtype_dispatch.h"
#include "multiversion.h"
#include "thread_partials.h"
#include "strata/tensor/factory.h"

namespace strata::cpu {
namespace {

using strata_kernels::rms_norm_grad_coeff;
using strata_kernels::rms_norm_grad_x;
using strata_kernels::rms_norm_out;
using strata_kernels::rms_norm_rstd;

constexpr int64_t kParallelThreshold = 16384;  // elements

// An undefined weight becomes ones: one row loop for both cases ([D] stays in L1).
Tensor weight_or_ones(const Tensor& w, int64_t d, DType dtype) { return w.defined() ? w : ones({d}, {.dtype = dtype}); }

template <class T>
STRATA_MULTIVERSION void rms_norm_kernel(const T* x, const T* w, int64_t rows, int64_t d, double eps, T* y, T* rstd) {
#pragma omp parallel for if (rows * d > kParallelThreshold) schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    const T* xr = x + i * d;
    T* yr = y + i * d;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < d; ++j) s += static_cast<double>(xr[j]) * static_cast<double>(xr[j]);
    const T rs = static_cast<T>(rms_norm_rstd(s, d, eps));
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) yr[j] = rms_norm_out(xr[j], rs, w[j]);
    rstd[i] = rs;
  }
}

// Rows [r0, r1): dx when dx != null, and dweight partial sums into dw[0, d) when dw != null.
template <class T>
STRATA_ALWAYS_INLINE void rms_norm_backward_rows(const T* g, const T* x, const T* w, const T* rstd, int64_t r0,
                                                 int64_t r1, int64_t d, T* dx, T* dw) {
  for (int64_t i = r0; i < r1; ++i) {
    const T* gr = g + i * d;
    const T* xr = x + i * d;
    const T rs = rstd[i];
    if (dw != nullptr) {
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) dw[j] += gr[j] * xr[j] * rs;
    }
    if (dx == nullptr) continue;
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < d; ++j) dot += static_cast<double>(gr[j] * w[j]) * static_cast<double>(xr[j]);
    const T c = static_cast<T>(rms_norm_grad_coeff(dot, rs, d));
    T* dr = dx + i * d;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) dr[j] = rms_norm_grad_x(gr[j], w[j], xr[j], rs, c);
  }
}

template <class T>
STRATA_MULTIVERSION void rms_norm_backward_kernel(const T* g, const T* x, const T* w, const T* rstd, int64_t rows,
                                                  int64_t d, int threads, T* dx, ThreadPartials<T>& dweight) {
#pragma omp parallel num_threads(threads)
  {
    const auto c = dweight.claim(rows);
    rms_norm_backward_rows(g, x, w, rstd, c.r0, c.r1, d, dx, c.slot);
  }
}

}  // namespace

RmsNormResult rms_norm_forward(const Tensor& x, const Tensor& weight, double eps) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  RmsNormResult r{empty_like(x), empty({rows}, {.dtype = x.dtype()})};
  if (rows == 0) return r;
  Tensor w = weight_or_ones(weight, d, x.dtype());
  detail::dispatch_floating(x.dtype(), "rms_norm", [&]<class T>() {
    rms_norm_kernel(x.data<T>(), w.data<T>(), rows, d, eps, r.out.data<T>(), r.rstd.data<T>());
  });
  return r;
}

RmsNormGrads rms_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                               bool need_dx, bool need_dweight) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  RmsNormGrads g;
  if (need_dx) g.dx = empty_like(x);
  if (need_dweight) g.dweight = zeros({d}, {.dtype = x.dtype()});
  if (rows == 0) return g;
  const int threads = rows * d > kParallelThreshold ? std::max(1, omp_get_max_threads()) : 1;
  Tensor partial = need_dweight ? empty({threads, d}, {.dtype = x.dtype()}) : Tensor();
  Tensor w = weight_or_ones(weight, d, x.dtype());
  detail::dispatch_floating(x.dtype(), "rms_norm backward", [&]<class T>() {
    ThreadPartials<T> dweight(need_dweight ? partial.data<T>() : nullptr, d);
    rms_norm_backward_kernel(grad.data<T>(), x.data<T>(), w.data<T>(), rstd.data<T>(), rows, d, threads,
                             need_dx ? g.dx.data<T>() : nullptr, dweight);
    if (need_dweight) dweight.add_to(g.dweight.data<T>(), 0, d);
  });
  return g;
}

}  // namespace strata::cpu
