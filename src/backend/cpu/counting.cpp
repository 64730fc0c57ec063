#include "backend/cpu/counting.h"

#include "strata/tensor/factory.h"
#include "strata_kernels/common/nonzero.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {

Tensor nonzero(const Tensor& x_in) {
  const Tensor x = x_in.contiguous();
  const auto ndim = static_cast<int32_t>(x.dim());
  return detail::dispatch_arith_or_bool(x.dtype(), "nonzero", [&]<class T>() {
    const T* p = x.data<T>();
    const int64_t n = x.numel();
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) count += strata_kernels::is_nonzero(p[i]) ? 1 : 0;
    Tensor out = empty({count, x.dim()}, {.dtype = DType::Int64});
    int64_t* coords = out.data<int64_t>();
    const int64_t* sizes = x.shape().vec().data();
    for (int64_t i = 0, row = 0; i < n; ++i) {
      if (!strata_kernels::is_nonzero(p[i])) continue;
      strata_kernels::unravel_index(i, sizes, ndim, coords + row * ndim);
      ++row;
    }
    return out;
  });
}

Tensor bincount(const Tensor& x_in, const Tensor& weights, int64_t length) {
  const Tensor x = x_in.contiguous();
  const int64_t* v = x.data<int64_t>();
  const int64_t n = x.numel();
  if (!weights.defined()) {
    Tensor out = zeros({length}, {.dtype = DType::Int64});
    int64_t* counts = out.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) ++counts[v[i]];
    return out;
  }
  const Tensor w = weights.contiguous();
  Tensor out = zeros({length}, {.dtype = w.dtype()});
  detail::dispatch_floating(w.dtype(), "bincount", [&]<class T>() {
    const T* wp = w.data<T>();
    T* sums = out.data<T>();
    for (int64_t i = 0; i < n; ++i) sums[v[i]] += wp[i];
  });
  return out;
}

}  // namespace strata::cpu
