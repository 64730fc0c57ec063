#include "backend/cpu/layer_norm.h"

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

// weight/bias as raw [D] arrays; an undefined one becomes ones/zeros so that every row
// loop has one shape (D elements stay in L1, the extra load costs nothing measurable).
Tensor or_filled(const Tensor& t, int64_t d, DType dtype, double value) {
  return t.defined() ? t : full({d}, value, {.dtype = dtype});
}

template <class X, class T, class Y>
STRATA_MULTIVERSION void layer_norm_kernel(const X* x, const T* w, const T* b, int64_t rows, int64_t d, double eps,
                                           Y* y, T* mean, T* rstd) {
#pragma omp parallel for if (rows * d > kParallelThreshold) schedule(static)
  for (int64_t i = 0; i < rows; ++i)
    strata_kernels::layer_norm_row<CpuRow>(x + i * d, w, b, d, eps, y + i * d, mean + i, rstd + i);
}

// dx (when dx != null) row by row and, when partials != null, column_sum.h's block
// partials of dweight and dbias ([blocks, 2 d]: [dweight | dbias] per block), in the
// same pass over each row. x and dx are stored as X, g as G (row_storage.h).
template <class X, class T, class G>
STRATA_MULTIVERSION void layer_norm_backward_kernel(const G* g, const X* x, const T* w, const T* mean, const T* rstd,
                                                    int64_t rows, int64_t d, X* dx, T* partials) {
  using strata_kernels::widen;
  const int64_t blocks = strata_kernels::column_blocks(rows);
#pragma omp parallel for if (rows * d > kParallelThreshold) schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    T* dw = partials != nullptr ? partials + blk * 2 * d : nullptr;
    T* db = dw != nullptr ? dw + d : nullptr;
    if (dw != nullptr) std::fill(dw, dw + 2 * d, T(0));
    const int64_t end = std::min(rows, (blk + 1) * strata_kernels::kColumnBlockRows);
    for (int64_t i = blk * strata_kernels::kColumnBlockRows; i < end; ++i) {
      const G* gr = g + i * d;
      const X* xr = x + i * d;
      const T mu = mean[i], rs = rstd[i];
      if (dw != nullptr) {
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) {
          dw[j] += strata_kernels::layer_norm_dweight_term<T>(widen(gr[j]), widen(xr[j]), mu, rs);
          db[j] += widen(gr[j]);
        }
      }
      if (dx != nullptr) strata_kernels::layer_norm_backward_row<CpuRow>(gr, xr, w, mu, rs, d, dx + i * d);
    }
  }
}

}  // namespace

LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                   DType out_dtype) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  const DType compute = row_compute_dtype(x.dtype());
  LayerNormResult r{empty(x.shape(), {.dtype = out_dtype}), empty({rows}, {.dtype = compute}),
                    empty({rows}, {.dtype = compute})};
  if (rows == 0) return r;
  Tensor w = or_filled(weight, d, compute, 1.0);
  Tensor b = or_filled(bias, d, compute, 0.0);
  dispatch_row_storage(x.dtype(), out_dtype, "layer_norm", [&]<class X, class T, class Y>() {
    layer_norm_kernel(storage<const X>(x), w.data<T>(), b.data<T>(), rows, d, eps, storage<Y>(r.out), r.mean.data<T>(),
                      r.rstd.data<T>());
  });
  return r;
}

LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& rstd, bool need_dx, bool need_dweight, bool need_dbias) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  const DType compute = row_compute_dtype(x.dtype());
  LayerNormGrads g;
  if (need_dx) g.dx = empty_like(x);
  if (need_dweight) g.dweight = zeros({d}, {.dtype = compute});
  if (need_dbias) g.dbias = zeros({d}, {.dtype = compute});
  if (rows == 0) return g;
  const bool need_params = need_dweight || need_dbias;
  const int64_t blocks = strata_kernels::column_blocks(rows);
  Tensor partial = need_params ? empty({blocks, 2 * d}, {.dtype = compute}) : Tensor();
  Tensor w = or_filled(weight, d, compute, 1.0);
  dispatch_row_storage(x.dtype(), grad.dtype(), "layer_norm backward", [&]<class X, class T, class G>() {
    T* partials = need_params ? partial.data<T>() : nullptr;
    layer_norm_backward_kernel(storage<const G>(grad), storage<const X>(x), w.data<T>(), mean.data<T>(), rstd.data<T>(),
                               rows, d, need_dx ? storage<X>(g.dx) : nullptr, partials);
    column_totals(partials, blocks, 2 * d, 0, d, need_dweight ? g.dweight.data<T>() : nullptr);
    column_totals(partials, blocks, 2 * d, d, d, need_dbias ? g.dbias.data<T>() : nullptr);
  });
  return g;
}

}  // namespace strata::cpu
