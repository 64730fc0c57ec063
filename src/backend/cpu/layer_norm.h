#pragma once
// Layer normalisation over the last dimension, fused forward and backward.
#include "backend/kernel_types.h"

namespace strata::cpu {

using backend::LayerNormGrads;
using backend::LayerNormResult;

// x contiguous [..., D] viewed as [rows, D]; weight and bias contiguous [D] or undefined.
// Math and order: strata_kernels/common/row_norms.h (the GPU runs the same).
LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);

// dx row by row (row_norms.h); dweight/dbias summed over rows in strata_kernels/common/column_sum.h's
// fixed order (the same bits for any thread count, and on the GPU).
LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& rstd, bool need_dx, bool need_dweight, bool need_dbias);

}  // namespace strata::cpu
