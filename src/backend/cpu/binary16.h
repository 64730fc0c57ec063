#pragma once
// add / mul of same-shape contiguous tensors with 16-bit storage (strata_kernels/common/
// binary16.h, the functor the GPU runs): float32 math per element, one rounding on store.
#include "backend/kernel_types.h"

namespace strata::cpu {

// op: Add or Mul. a, b and the result: float32 or one 16-bit dtype (the same for all).
Tensor binary16(backend::BinaryOp op, const Tensor& a, const Tensor& b, DType out_dtype);

}  // namespace strata::cpu
