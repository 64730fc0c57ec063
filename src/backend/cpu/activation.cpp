#include "backend/cpu/activation.h"

#include "backend/cpu/multiversion.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/activation.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {
namespace {

// GELU costs ~30 flops an element, so threads pay off on smaller tensors than a copy.
constexpr int64_t kGeluParallelThreshold = 8192;
constexpr int64_t kReluParallelThreshold = 32768;

template <class T>
STRATA_MULTIVERSION void gelu_kernel(const T* x, T* y, int64_t n) {
#pragma omp parallel for simd if (n > kGeluParallelThreshold)
  for (int64_t i = 0; i < n; ++i) y[i] = strata_kernels::gelu_tanh(x[i]);
}

template <class T>
STRATA_MULTIVERSION void gelu_backward_kernel(const T* g, const T* x, T* dx, int64_t n) {
#pragma omp parallel for simd if (n > kGeluParallelThreshold)
  for (int64_t i = 0; i < n; ++i) dx[i] = g[i] * strata_kernels::gelu_tanh_grad(x[i]);
}

}  // namespace

Tensor gelu_forward(const Tensor& x) {
  Tensor out = empty_like(x);
  detail::dispatch_floating(x.dtype(), "gelu", [&]<class T>() { gelu_kernel(x.data<T>(), out.data<T>(), x.numel()); });
  return out;
}

Tensor gelu_backward(const Tensor& grad, const Tensor& x) {
  Tensor out = empty_like(x);
  detail::dispatch_floating(x.dtype(), "gelu backward", [&]<class T>() {
    gelu_backward_kernel(grad.data<T>(), x.data<T>(), out.data<T>(), x.numel());
  });
  return out;
}

Tensor relu_forward(const Tensor& x) {
  Tensor out = empty_like(x);
  detail::dispatch_floating(x.dtype(), "relu", [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const int64_t n = x.numel();
    // NaN < 0 is false, so NaN passes through, as in torch.
#pragma omp parallel for simd if (n > kReluParallelThreshold)
    for (int64_t i = 0; i < n; ++i) po[i] = px[i] < T(0) ? T(0) : px[i];
  });
  return out;
}

Tensor relu_backward(const Tensor& grad, const Tensor& out) {
  Tensor gx = empty_like(out);
  detail::dispatch_floating(out.dtype(), "relu backward", [&]<class T>() {
    const T* py = out.data<T>();
    const T* pg = grad.data<T>();
    T* po = gx.data<T>();
    const int64_t n = out.numel();
#pragma omp parallel for simd if (n > kReluParallelThreshold)
    for (int64_t i = 0; i < n; ++i) {
      const T g = pg[i];  // loaded unconditionally so that the select vectorises
      po[i] = py[i] > T(0) ? g : T(0);
    }
  });
  return gx;
}

}  // namespace strata::cpu
