#pragma once
// The comparison and selection ops as functors: the CPU loops (src/backend/cpu/compare.cpp)
// and the CUDA kernels (cuda/compare.cu) both instantiate these. Comparisons read two
// values of one type and give a bool; the selections copy one of their operands unchanged
// (no arithmetic, so the CPU and the GPU agree bit for bit, NaN payloads and -0.0 included).
#include <stdint.h>

#include "strata_kernels/common/elementwise.h"
#include "strata_kernels/common/macros.h"

namespace strata_kernels {

enum class CompareCode : int32_t { Eq, Ne, Lt, Le, Gt, Ge };

template <auto>
inline constexpr bool kUnknownCompare = false;

// a (op) b; every comparison with NaN is false except Ne, as in IEEE and torch.
template <class T, CompareCode C>
struct CompareFn {
  STRATA_HD bool operator()(T a, T b) const {
    if constexpr (C == CompareCode::Eq) return a == b;
    else if constexpr (C == CompareCode::Ne) return a != b;
    else if constexpr (C == CompareCode::Lt) return a < b;
    else if constexpr (C == CompareCode::Le) return a <= b;
    else if constexpr (C == CompareCode::Gt) return a > b;
    else if constexpr (C == CompareCode::Ge) return a >= b;
    else static_assert(kUnknownCompare<C>, "unknown comparison code");
  }
};

// where(cond, a, b): cond ? a : b.
template <class T>
struct WhereFn {
  STRATA_HD T operator()(bool c, T a, T b) const { return select_value(c, a, b); }
};

// masked_fill(x, mask, value): mask ? value : x, value already in T (converted on the host,
// by the CPU's rule, for both devices).
template <class T>
struct MaskedFillFn {
  T value;
  STRATA_HD T operator()(T x, bool mask) const { return select_value(mask, value, x); }
};

}  // namespace strata_kernels
