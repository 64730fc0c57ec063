#pragma once
// Layer normalisation over the last dimension, fused forward and backward.
#include "backend/kernel_types.h"

namespace strata::cpu {

using backend::LayerNormGrads;
using backend::LayerNormResult;

// x contiguous [..., D] viewed as [rows, D]; weight and bias contiguous [D] or undefined.
// Math and order: strata_kernels/common/row_norms.h (the GPU runs the same). x is float32,
// float64 or 16-bit; out_dtype x's, or 16-bit for float32 x. 16-bit data computes in float32
// (weight, bias, mean and rstd float32), widened on load and rounded once on store.
LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                   DType out_dtype);

// dx row by row (row_norms.h); dweight/dbias summed over rows in strata_kernels/common/column_sum.h's
// fixed order (the same bits for any thread count, and on the GPU). grad is stored as the
// forward's output, dx as x; the parameter gradients are in the compute dtype.
LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& rstd, bool need_dx, bool need_dweight, bool need_dbias);

}  // namespace strata::cpu
