#pragma once
// Rotary position embedding, one fused pass per row (math in strata_kernels/common/rotary.h).
#include "strata/tensor/tensor.h"

namespace strata::cpu {

// x contiguous [..., T, D] (D even), cos and sin contiguous [T, D]: the rotated x
// (transpose = false) or the transposed map applied to x, i.e. the gradient (transpose = true).
Tensor rotary_apply(const Tensor& x, const Tensor& cos, const Tensor& sin, bool transpose);

// cos and sin [length, d] (d even) of the angles of positions [offset, offset + length),
// computed in double and rounded once to dtype.
void rotary_fill_tables(const Tensor& cos, const Tensor& sin, int64_t offset, double theta);

}  // namespace strata::cpu
