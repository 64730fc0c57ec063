#pragma once
// Dropout with a counter-based mask: nothing is stored, backward regenerates the mask.
#include <cstdint>

#include "strata/tensor/tensor.h"

namespace strata::cpu {

// out[i] = x[i] / (1 - p) where element i is kept under (seed, offset), else 0 (see
// strata_kernels/common/dropout.h). x contiguous float32/float64; i is the row-major position.
// The backward pass is the same call on the gradient.
Tensor dropout_apply(const Tensor& x, double p, uint64_t seed, uint64_t offset);

}  // namespace strata::cpu
