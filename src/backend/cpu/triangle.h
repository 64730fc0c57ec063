#pragma once
// CPU kernels of tril/triu (ops/triangle.cpp) and one_hot (ops/one_hot.cpp): the element
// functions of strata_kernels/common/triangle.h, which the CUDA kernels run too.
#include <cstdint>

#include "strata/tensor/tensor.h"

namespace strata::cpu {

// tril (lower) or triu of the last two dimensions of x (rank >= 2, any dtype), a fresh
// contiguous tensor of x's shape: x where kept, zero bits elsewhere.
Tensor triangle(const Tensor& x, int64_t diagonal, bool lower);
// [indices.shape.., classes] int64; indices int64, each already checked to lie in
// [0, classes).
Tensor one_hot(const Tensor& indices, int64_t classes);

}  // namespace strata::cpu
