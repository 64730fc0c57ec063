#pragma once
// RMS normalisation over the last dimension, fused forward and backward (math in
// strata_kernels/common/rms_norm.h).
#include "backend/kernel_types.h"

namespace strata::cpu {

using backend::RmsNormGrads;
using backend::RmsNormResult;

// x contiguous [..., D] viewed as [rows, D]; weight contiguous [D] or undefined (no scale).
// Math and order: strata_kernels/common/row_norms.h (the GPU runs the same). 16-bit data as
// layer_norm's (cpu/layer_norm.h): float32 math, weight and rstd; out_dtype x's or 16-bit.
RmsNormResult rms_norm_forward(const Tensor& x, const Tensor& weight, double eps, DType out_dtype);

// dx row by row (row_norms.h); dweight summed over rows in strata_kernels/common/column_sum.h's
// fixed order (the same bits for any thread count, and on the GPU).
RmsNormGrads rms_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                               bool need_dx, bool need_dweight);

}  // namespace strata::cpu
