#include "backend/cpu/rms_norm.h"

#include <algorithm>

#include "backend/cpu/column_totals.h"
#include "backend/cpu/multiversion.h"
#include "backend/cpu/row_storage.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/column_sum.h"
#include "strata_kernels/common/row_norms.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {
namespace {

using strata_kernels::CpuRow;

constexpr int64_t kParallelThreshold = 16384;  // elements

// An undefined weight becomes ones: one row loop for both cases ([D] stays in L1).
Tensor weight_or_ones(const Tensor& w, int64_t d, DType dtype) { return w.defined() ? w : ones({d}, {.dtype = dtype}); }

template <class X, class T, class Y>
STRATA_MULTIVERSION void rms_norm_kernel(const X* x, const T* w, int64_t rows, int64_t d, double eps, Y* y, T* rstd) {
#pragma omp parallel for if (rows * d > kParallelThreshold) schedule(static)
  for (int64_t i = 0; i < rows; ++i) strata_kernels::rms_norm_row<CpuRow>(x + i * d, w, d, eps, y + i * d, rstd + i);
}

// dx (when dx != null) row by row and, when partials != null, column_sum.h's block
// partials of dweight ([blocks, d]) in the same pass over each row. x and dx are stored as
// X, g as G (row_storage.h).
template <class X, class T, class G>
STRATA_MULTIVERSION void rms_norm_backward_kernel(const G* g, const X* x, const T* w, const T* rstd, int64_t rows,
                                                  int64_t d, X* dx, T* partials) {
  using strata_kernels::widen;
  const int64_t blocks = strata_kernels::column_blocks(rows);
#pragma omp parallel for if (rows * d > kParallelThreshold) schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    T* dw = partials != nullptr ? partials + blk * d : nullptr;
    if (dw != nullptr) std::fill(dw, dw + d, T(0));
    const int64_t end = std::min(rows, (blk + 1) * strata_kernels::kColumnBlockRows);
    for (int64_t i = blk * strata_kernels::kColumnBlockRows; i < end; ++i) {
      const G* gr = g + i * d;
      const X* xr = x + i * d;
      const T rs = rstd[i];
      if (dw != nullptr) {
#pragma omp simd
        for (int64_t j = 0; j < d; ++j)
          dw[j] += strata_kernels::rms_norm_dweight_term<T>(widen(gr[j]), widen(xr[j]), rs);
      }
      if (dx != nullptr) strata_kernels::rms_norm_backward_row<CpuRow>(gr, xr, w, rs, d, dx + i * d);
    }
  }
}

}  // namespace

RmsNormResult rms_norm_forward(const Tensor& x, const Tensor& weight, double eps, DType out_dtype) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  const DType compute = row_compute_dtype(x.dtype());
  RmsNormResult r{empty(x.shape(), {.dtype = out_dtype}), empty({rows}, {.dtype = compute})};
  if (rows == 0) return r;
  Tensor w = weight_or_ones(weight, d, compute);
  dispatch_row_storage(x.dtype(), out_dtype, "rms_norm", [&]<class X, class T, class Y>() {
    rms_norm_kernel(storage<const X>(x), w.data<T>(), rows, d, eps, storage<Y>(r.out), r.rstd.data<T>());
  });
  return r;
}

RmsNormGrads rms_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                               bool need_dx, bool need_dweight) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  const DType compute = row_compute_dtype(x.dtype());
  RmsNormGrads g;
  if (need_dx) g.dx = empty_like(x);
  if (need_dweight) g.dweight = zeros({d}, {.dtype = compute});
  if (rows == 0) return g;
  const int64_t blocks = strata_kernels::column_blocks(rows);
  Tensor partial = need_dweight ? empty({blocks, d}, {.dtype = compute}) : Tensor();
  Tensor w = weight_or_ones(weight, d, compute);
  dispatch_row_storage(x.dtype(), grad.dtype(), "rms_norm backward", [&]<class X, class T, class G>() {
    T* partials = need_dweight ? partial.data<T>() : nullptr;
    rms_norm_backward_kernel(storage<const G>(grad), storage<const X>(x), w.data<T>(), rstd.data<T>(), rows, d,
                             need_dx ? storage<X>(g.dx) : nullptr, partials);
    column_totals(partials, blocks, d, 0, d, need_dweight ? g.dweight.data<T>() : nullptr);
  });
  return g;
}

}  // namespace strata::cpu
