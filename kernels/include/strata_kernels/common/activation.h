#pragma once
// Per-element activation math shared by the CPU loops and the CUDA kernels.
//
// GELU, tanh approximation (GPT-2; torch.nn.functional.gelu(approximate='tanh')):
//   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
// evaluated through 1 + tanh(u) = 2 sigmoid(2u), which avoids the cancellation of
// 1 + tanh(u) for negative u (float keeps full relative accuracy in the tail). With
// z = exp(-2|u|) <= 1 (no overflow for any x) and r = 1 / (1 + z):
//   sigmoid(2u) = s = (u >= 0 ? r : z r),    s (1 - s) = z r^2
//   gelu(x)  = x s
//   gelu'(x) = s + 2 x s (1 - s) du/dx,      du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
#include <math.h>

#include "strata_kernels/common/fast_math.h"
#include "strata_kernels/common/macros.h"

namespace strata_kernels {

template <class T>
STRATA_HD T gelu_tanh(T x) {
  const T kSqrt2OverPi = T(0.79788456080286535588);
  const T kCoeff = T(0.044715);
  const T u = kSqrt2OverPi * (x + kCoeff * x * x * x);
  const T z = fast_exp(T(-2) * fabs(u));
  const T r = T(1) / (T(1) + z);
  const T s = u >= T(0) ? r : z * r;
  return x * s;
}

// d gelu(x) / dx.
template <class T>
STRATA_HD T gelu_tanh_grad(T x) {
  const T kSqrt2OverPi = T(0.79788456080286535588);
  const T kCoeff = T(0.044715);
  const T u = kSqrt2OverPi * (x + kCoeff * x * x * x);
  const T du = kSqrt2OverPi * (T(1) + T(3) * kCoeff * x * x);
  const T z = fast_exp(T(-2) * fabs(u));
  const T r = T(1) / (T(1) + z);
  const T s = u >= T(0) ? r : z * r;
  return s + T(2) * x * du * z * r * r;
}

}  // namespace strata_kernels
