#include "backend/dispatch/non_finite.h"

#include <cmath>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/kernel_types.h"
#include "strata/tensor/factory.h"
#include "tensor/device_copy.h"

namespace strata::backend {
namespace {

template <class T>
NonFiniteCount count_host(const T* data, int64_t n, bool negative_inf) {
  NonFiniteCount c;
  for (int64_t i = 0; i < n; ++i) {
    const T x = data[i];
    if (x - x == T(0)) continue;  // finite: the common case, one compare
    if (std::isnan(x)) {
      ++c.nan;
    } else if (x > 0 || negative_inf) {
      ++c.inf;
    } else {
      continue;
    }
    if (c.first < 0) c.first = i;
  }
  return c;
}

// `t` as a contiguous CPU tensor of float32 or float64 (16-bit floats widen exactly, nan and
// inf included): itself when it already is one.
Tensor host_float(const Tensor& t) {
  const bool wide = t.dtype() == DType::Float32 || t.dtype() == DType::Float64;
  if (wide && t.device().is_cpu() && t.is_contiguous()) return t;
  Tensor host = empty(t.shape(), {.dtype = wide ? t.dtype() : DType::Float32});
  detail::copy_any(host, t);
  return host;
}

NonFiniteCount count_on_host(const Tensor& t, bool negative_inf) {
  const Tensor host = host_float(t);
  if (host.dtype() == DType::Float64) return count_host(host.data<double>(), host.numel(), negative_inf);
  return count_host(host.data<float>(), host.numel(), negative_inf);
}

// Below this many elements a CUDA tensor is copied to the host at once: the device test's
// launches and its own copy cost more.
constexpr int64_t kDeviceTestElements = 4096;

// True when every element of the CUDA tensor `t` is finite: x - x is 0 for a finite x and
// nan for inf or nan, so its sum is exactly 0 or nan (no overflow, whatever the values).
bool all_finite_on_device(const Tensor& t) {
  Tensor x = t;
  if (t.dtype() != DType::Float32 && t.dtype() != DType::Float64) {
    x = empty(t.shape(), {.dtype = DType::Float32, .device = t.device()});
    detail::copy_any(x, t);
  }
  const Tensor zero_or_nan = cuda_ops::binary(BinaryOp::Sub, x, x, "anomaly check");
  const Tensor total = cuda_ops::sum_keepdim(zero_or_nan, std::vector<bool>(static_cast<size_t>(x.dim()), true));
  Tensor host = empty(total.shape(), {.dtype = DType::Float64});
  detail::copy_any(host, total);
  return host.data<double>()[0] == 0.0;  // nan compares unequal
}

}  // namespace

NonFiniteCount count_non_finite(const Tensor& t, bool negative_inf) {
  STRATA_CHECK(t.defined(), "count_non_finite: the tensor is undefined");
  if (!is_floating(t.dtype()) || t.numel() == 0) return {};
  if (!t.device().is_cpu() && t.numel() >= kDeviceTestElements && all_finite_on_device(t)) return {};
  return count_on_host(t, negative_inf);
}

}  // namespace strata::backend
