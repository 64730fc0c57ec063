#pragma once
// 16-bit storage read and written by kernels that compute in float32: a kernel templated on
// its storage types loads with widen() and stores with store(), so one body serves float32
// and float64 (both identities: the same instructions as before) and bfloat16/float16 data
// (widened exactly on load, rounded once, to nearest even, on store). The CPU passes its
// bfloat16/float16 tensors' bits as these types (the same 16-bit layout).
#include <stdint.h>

#include "strata_kernels/common/half.h"
#include "strata_kernels/common/macros.h"

namespace strata_kernels {

struct Bf16Storage {
  uint16_t bits;
};
struct HalfStorage {
  uint16_t bits;
};

STRATA_HD float widen(float v) { return v; }
STRATA_HD double widen(double v) { return v; }
STRATA_HD float widen(Bf16Storage v) { return bf16_bits_to_float(v.bits); }
STRATA_HD float widen(HalfStorage v) { return half_bits_to_float(v.bits); }

STRATA_HD void store(float& dst, float v) { dst = v; }
STRATA_HD void store(double& dst, double v) { dst = v; }
STRATA_HD void store(Bf16Storage& dst, float v) { dst.bits = float_to_bf16_bits(v); }
STRATA_HD void store(HalfStorage& dst, float v) { dst.bits = float_to_half_bits(v); }

// Whether a kernel's extra 16-bit output (storage B beside its compute-type output A) exists:
// a float32/float64 kernel has none, so its `if constexpr` branch compiles away.
template <class A, class B>
struct SeparateStorage {
  static constexpr bool value = true;
};
template <class A>
struct SeparateStorage<A, A> {
  static constexpr bool value = false;
};

}  // namespace strata_kernels
