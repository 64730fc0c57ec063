#pragma once
// nonzero and bincount on the CPU.
#include <cstdint>

#include "strata/tensor/tensor.h"

namespace strata::cpu {

// int64 [count, x.dim()]: the coordinates of x's nonzero elements in row-major order
// (strata_kernels/common/nonzero.h). Float32/64, int32/64 or bool.
Tensor nonzero(const Tensor& x);

// out[v] = the number of times v occurs in x (int64), or the sum of weights[i] over the i
// with x[i] == v (weights' dtype, float32 or float64, summed in index order); `length`
// entries. x is int64, 1-D and checked by the caller to hold values in [0, length).
Tensor bincount(const Tensor& x, const Tensor& weights, int64_t length);

}  // namespace strata::cpu
