#include "strata/optim/grad_clip.h"

#include <cmath>

#include "../tensor/cpu/dtype_dispatch.h"
#include "strata/autograd/grad_mode.h"

namespace strata::optim {
namespace {

constexpr int64_t kParallelThreshold = 32768;

}  // namespace

double grad_norm_squared(const std::vector<Tensor>& params) {
  double total = 0.0;
  for (const Tensor& param : params) {
    Tensor grad = param.grad();
    if (!grad.defined()) continue;
    STRATA_CHECK(grad.device().is_cpu(), "grad_norm_squared: gradient of shape ", grad.shape(), " is on ",
                 grad.device(), "; only the CPU version exists so far");
    grad = grad.contiguous();
    detail::dispatch_floating(grad.dtype(), "grad_norm_squared", [&]<class T>() {
      const T* g = grad.data<T>();
      const int64_t n = grad.numel();
      double sum = 0.0;
#pragma omp parallel for reduction(+ : sum) schedule(static) if (n > kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) {
        const double x = static_cast<double>(g[i]);
        sum += x * x;
      }
      total += sum;
    });
  }
  return total;
}

void scale_grads(const std::vector<Tensor>& params, double factor) {
  NoGradGuard no_grad;
  for (const Tensor& param : params) {
    Tensor grad = param.grad();
    if (!grad.defined()) continue;
    STRATA_CHECK(grad.device().is_cpu(), "scale_grads: gradient of shape ", grad.shape(), " is on ", grad.device(),
                 "; only the CPU version exists so far");
    STRATA_CHECK(grad.is_contiguous(), "scale_grads: gradient of shape ", grad.shape(),
                 " is not contiguous; it is scaled in place");
    detail::dispatch_floating(grad.dtype(), "scale_grads", [&]<class T>() {
      T* g = grad.data<T>();
      const T f = static_cast<T>(factor);
      const int64_t n = grad.numel();
#pragma omp parallel for simd if (n > kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) g[i] = g[i] * f;
    });
  }
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  STRATA_CHECK(std::isfinite(max_norm) && max_norm > 0, "clip_grad_norm: max_norm ", max_norm,
               " must be finite and > 0");
  const double norm = std::sqrt(grad_norm_squared(params));
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) scale_grads(params, coef);
  return norm;
}

}  // namespace strata::optim
