#pragma once
// add / mul of two same-shape tensors, each float32 or 16-bit (one 16-bit dtype), through the
// 16-bit kernels (backend/cpu/binary16.h and its CUDA twin): float32 math per element, one
// rounding on store, no conversion kernel forward or backward, except where a gradient must
// change dtype on its own (a float32 output's gradient handed to a 16-bit addend).
#include "backend/kernel_types.h"

namespace strata::detail {

// op(a, b) in out_dtype; op Add or Mul; a.shape() == b.shape(), same device.
Tensor sixteen_bit_binary_kernel(backend::BinaryOp op, const Tensor& a, const Tensor& b, DType out_dtype);

}  // namespace strata::detail
