#pragma once
// gelu and silu of a 16-bit tensor through the 16-bit kernels (backend/cpu/unary16.h and its
// CUDA twin): float32 math per element, the output and the input gradient rounded once on
// store, no conversion kernel.
#include "backend/kernel_types.h"

namespace strata::detail {

// op(x) for a bfloat16/float16 x, recording `node` (its backward: grad_op on the saved x).
Tensor sixteen_bit_activation(backend::UnaryOp op, backend::UnaryGradOp grad_op, const Tensor& x, const char* name,
                              const char* node);

}  // namespace strata::detail
