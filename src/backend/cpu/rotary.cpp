#include "backend/cpu/rotary.h"

#include <cmath>

#include "backend/cpu/multiversion.h"
#include "backend/cpu/row_storage.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/rotary.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {
namespace {

constexpr int64_t kParallelThreshold = 16384;  // elements

// S: x's and y's storage (T, or 16-bit with T float: widened on load, rounded on store).
template <bool kTranspose, class S, class T>
STRATA_MULTIVERSION void rotary_kernel(const S* x, const T* cos, const T* sin, int64_t rows, int64_t t, int64_t d,
                                       S* y) {
  using strata_kernels::store;
  using strata_kernels::widen;
  const int64_t half = d / 2;
#pragma omp parallel for if (rows * d > kParallelThreshold) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const S* xr = x + r * d;
    const T* c = cos + (r % t) * d;
    const T* s = sin + (r % t) * d;
    S* yr = y + r * d;
#pragma omp simd
    for (int64_t j = 0; j < half; ++j) {
      const T x1 = widen(xr[j]), x2 = widen(xr[j + half]);
      const auto p = kTranspose ? strata_kernels::rotary_backward(x1, x2, c[j], s[j], c[j + half], s[j + half])
                                : strata_kernels::rotary_forward(x1, x2, c[j], s[j], c[j + half], s[j + half]);
      store(yr[j], p.first);
      store(yr[j + half], p.second);
    }
  }
}

}  // namespace

Tensor rotary_apply(const Tensor& x, const Tensor& cos, const Tensor& sin, bool transpose) {
  Tensor y = empty_like(x);
  const int64_t t = x.size(-2), d = x.size(-1);
  if (x.numel() == 0) return y;
  const int64_t rows = x.numel() / d;
  dispatch_row_storage(x.dtype(), x.dtype(), "rotary_embedding", [&]<class S, class T, class>() {
    if (transpose) {
      rotary_kernel<true>(storage<const S>(x), cos.data<T>(), sin.data<T>(), rows, t, d, storage<S>(y));
    } else {
      rotary_kernel<false>(storage<const S>(x), cos.data<T>(), sin.data<T>(), rows, t, d, storage<S>(y));
    }
  });
  return y;
}

void rotary_fill_tables(const Tensor& cos, const Tensor& sin, int64_t offset, double theta) {
  const int64_t length = cos.size(0), d = cos.size(1), half = d / 2;
  detail::dispatch_floating(cos.dtype(), "rotary_tables", [&]<class T>() {
    T* c = cos.data<T>();
    T* s = sin.data<T>();
    for (int64_t p = 0; p < length; ++p) {
      for (int64_t i = 0; i < half; ++i) {
        const double a = strata_kernels::rotary_angle(offset + p, i, d, theta);
        c[p * d + i] = c[p * d + i + half] = static_cast<T>(std::cos(a));
        s[p * d + i] = s[p * d + i + half] = static_cast<T>(std::sin(a));
      }
    }
  });
}

}  // namespace strata::cpu
