#pragma once
// Elementwise activations on contiguous bfloat16/float16 tensors, float32 math per element
// and one rounding on store (strata_kernels/common/unary16.h, the functors the GPU runs).
#include "backend/kernel_types.h"

namespace strata::cpu {

// op: Gelu or Silu. Results are new contiguous tensors of x's dtype.
Tensor unary16(backend::UnaryOp op, const Tensor& x);
Tensor unary_grad16(backend::UnaryGradOp op, const Tensor& grad, const Tensor& saved);

}  // namespace strata::cpu
