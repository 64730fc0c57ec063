#pragma once
// add / mul (elementwise_ops.h's float32 functors) of two same-shape contiguous operands of
// which any may be stored in 16 bits (storage16.h): out[i] = op(widen(a[i]), widen(b[i])),
// rounded once on store. Covers autocast's residual add (16-bit branch + float32 stream ->
// float32), 16-bit products of activations (SwiGLU) and the gradients of both, each in one
// pass with no conversion kernel. The CPU loop (src/backend/cpu/binary16.cpp) and the CUDA
// kernel (cuda/binary16.cu) call it per element.
#include <stdint.h>

#include "strata_kernels/common/elementwise_ops.h"
#include "strata_kernels/common/macros.h"
#include "strata_kernels/common/storage16.h"

namespace strata_kernels {

template <class A, class B, class O, BinaryCode C>
struct Binary16 {
  const A* a;
  const B* b;
  O* out;
  STRATA_HD void operator()(int64_t i) const { store(out[i], BinaryFn<float, C>{}(widen(a[i]), widen(b[i]))); }
};

}  // namespace strata_kernels
