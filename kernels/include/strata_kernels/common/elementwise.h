#pragma once
// Per-element math of the elementwise ops and their gradients, shared by the CPU loops and
// future CUDA kernels. Plain values in, plain value out.
//
// NaN follows PyTorch: clamp, minimum and maximum propagate it; the gradient shares of
// minimum/maximum and clamp's gradient mask are those of PyTorch 1.13 (ties split the
// gradient half/half; clamp passes the gradient at its bounds).
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "strata_kernels/common/fast_math.h"
#include "strata_kernels/common/macros.h"

namespace strata_kernels {

// Through z = exp(-|x|) <= 1: no overflow for any x, and full relative accuracy in the
// tail where sigmoid(x) = z / (1 + z) is tiny. fast_exp keeps the float loop vectorised.
template <class T>
STRATA_HD T sigmoid(T x) {
  const T z = fast_exp(-fabs(x));
  const T r = T(1) / (T(1) + z);
  return x >= T(0) ? r : z * r;
}

// d sigmoid / dx from the output s.
template <class T>
STRATA_HD T sigmoid_grad_from_output(T s) {
  return s * (T(1) - s);
}

template <class T>
STRATA_HD T silu(T x) {
  return x * sigmoid(x);
}

// d (x sigmoid(x)) / dx = s (1 + x (1 - s)).
template <class T>
STRATA_HD T silu_grad(T x) {
  const T s = sigmoid(x);
  return s * (T(1) + x * (T(1) - s));
}

template <class T>
STRATA_HD T abs_value(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return fabs(x);  // also maps -0.0 to +0.0
  } else {
    return x < T(0) ? -x : x;
  }
}

// sign(x), 0 at 0 (and for NaN).
template <class T>
STRATA_HD T abs_grad(T x) {
  return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
}

// d sqrt(x) / dx = 1 / (2 sqrt(x)), from the output r = sqrt(x).
template <class T>
STRATA_HD T sqrt_grad_from_output(T r) {
  return T(0.5) / r;
}

// d tanh(x) / dx = 1 - tanh(x)^2, from the output t.
template <class T>
STRATA_HD T tanh_grad_from_output(T t) {
  return T(1) - t * t;
}

template <class T>
STRATA_HD T rsqrt_value(T x) {
  return T(1) / sqrt(x);
}

// d x^(-1/2) / dx = -x^(-3/2) / 2, from the output r = x^(-1/2).
template <class T>
STRATA_HD T rsqrt_grad_from_output(T r) {
  return T(-0.5) * r * r * r;
}

// min(max(x, lo), hi): all hi when lo > hi; NaN stays NaN (both comparisons are false).
template <class T>
STRATA_HD T clamp_value(T x, T lo, T hi) {
  const T r = x < lo ? lo : x;
  return r > hi ? hi : r;
}

// 1 inside [lo, hi], bounds included, else 0 (NaN: 0).
template <class T>
STRATA_HD T clamp_grad(T x, T lo, T hi) {
  return x >= lo && x <= hi ? T(1) : T(0);
}

// NaN in either input gives NaN.
template <class T>
STRATA_HD T minimum_value(T a, T b) {
  return (a < b || a != a) ? a : b;
}

template <class T>
STRATA_HD T maximum_value(T a, T b) {
  return (a > b || a != a) ? a : b;
}

// The share of the gradient of minimum(x, y) that goes to x: 1 when x is selected, 1/2 on a
// tie. The share of maximum(x, y) going to x is minimum_share(y, x).
template <class T>
STRATA_HD T minimum_share(T x, T y) {
  return x == y ? T(0.5) : (x > y ? T(0) : T(1));
}

// d a^b / da = b a^(b-1); 0 where b == 0 (a^0 is constant, even at a == 0).
template <class T>
STRATA_HD T pow_grad_base(T a, T b) {
  return b == T(0) ? T(0) : b * pow(a, b - T(1));
}

// d a^b / db = a^b log a: NaN for a < 0 (log undefined); 0 at a == 0 with b >= 0, where
// a^b is 0 or 1 on the right of the base's domain.
template <class T>
STRATA_HD T pow_grad_exponent(T a, T b) {
  return a == T(0) && b >= T(0) ? T(0) : pow(a, b) * log(a);
}

// c ? x : y without a branch on the host: with an unpredictable condition (a mask) a branch
// mispredicts half the time, and baseline x86-64 has no blend instruction that would let the
// compiler vectorise the select, but it has and/or on vectors.
template <class T>
STRATA_HD T select_value(bool c, T x, T y) {
#if defined(__CUDA_ARCH__)
  return c ? x : y;
#else
  using U = std::conditional_t<
      sizeof(T) == 8, uint64_t,
      std::conditional_t<sizeof(T) == 4, uint32_t, std::conditional_t<sizeof(T) == 2, uint16_t, uint8_t> > >;
  static_assert(sizeof(U) == sizeof(T));
  U ux, uy;
  memcpy(&ux, &x, sizeof(T));
  memcpy(&uy, &y, sizeof(T));
  const U mask = static_cast<U>(U(0) - static_cast<U>(c));
  const U r = static_cast<U>((ux & mask) | (uy & static_cast<U>(~mask)));
  T out;
  memcpy(&out, &r, sizeof(T));
  return out;
#endif
}

}  // namespace strata_kernels
