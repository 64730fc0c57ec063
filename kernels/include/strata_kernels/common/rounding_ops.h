#pragma once
// round, floor, ceil, trunc and sign, and the class tests isnan, isinf and isfinite, as
// functors: the CPU loops (src/backend/cpu/rounding.cpp) and the CUDA kernels
// (cuda/rounding.cu) both instantiate these. Every result is exact (an integral value, a
// sign or a bool), so the CPU and the GPU agree bit for bit.
//
// The rules are PyTorch 1.13's: round halves to even (rint in the default rounding mode:
// 0.5 -> 0, 2.5 -> 2, -0.5 -> -0); sign is (0 < x) - (x < 0), so sign(-0.0) = +0 and
// sign(NaN) = 0; integer inputs round to themselves; integers and bools are never NaN or
// infinite. A NaN input is returned as it is, bits and all: IEEE 754 leaves the payload of
// rint/floor/ceil/trunc(NaN) open (x86 keeps the input's bits; an NVIDIA GPU's float32
// instructions return the canonical NaN 0x7fffffff), so the bits would depend on the device.
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "strata_kernels/common/macros.h"

namespace strata_kernels {

enum class RoundingCode : int32_t { Round, Floor, Ceil, Trunc, Sign };
enum class ClassifyCode : int32_t { IsNan, IsInf, IsFinite };

template <auto>
inline constexpr bool kUnknownRounding = false;

template <class T, RoundingCode C>
struct RoundingFn {
  STRATA_HD T operator()(T x) const {
    if constexpr (C == RoundingCode::Sign) {
      return static_cast<T>((T(0) < x) - (x < T(0)));
    } else if constexpr (std::is_integral<T>::value) {
      return x;
    } else if (x != x) {
      return x;
    } else if constexpr (C == RoundingCode::Round) {
      return rint(x);
    } else if constexpr (C == RoundingCode::Floor) {
      return floor(x);
    } else if constexpr (C == RoundingCode::Ceil) {
      return ceil(x);
    } else if constexpr (C == RoundingCode::Trunc) {
      return trunc(x);
    } else {
      static_assert(kUnknownRounding<C>, "unknown rounding code");
    }
  }
};

// x - x is 0 for every finite x and NaN for +-inf and NaN (the library is built without
// -ffinite-math-only, so the compiler keeps it): a branch-free test that vectorises.
template <class T, ClassifyCode C>
struct ClassifyFn {
  STRATA_HD bool operator()(T x) const {
    if constexpr (!std::is_floating_point<T>::value) {
      return C == ClassifyCode::IsFinite;
    } else if constexpr (C == ClassifyCode::IsNan) {
      return x != x;
    } else if constexpr (C == ClassifyCode::IsInf) {
      return x == x && x - x != T(0);
    } else if constexpr (C == ClassifyCode::IsFinite) {
      return x - x == T(0);
    } else {
      static_assert(kUnknownRounding<C>, "unknown class code");
    }
  }
};

}  // namespace strata_kernels
