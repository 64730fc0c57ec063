#pragma once
// RMS normalisation over the last dimension, fused forward and backward (math in
// kernels/common/rms_norm.h).
#include "strata/tensor/tensor.h"

namespace strata::cpu {

struct RmsNormResult {
  Tensor out;   // x's shape
  Tensor rstd;  // [rows], 1 / sqrt(mean(x^2) + eps), x's dtype
};
// x contiguous [..., D] viewed as [rows, D]; weight contiguous [D] or undefined (no scale).
// Math and order: kernels/common/row_norms.h (the GPU runs the same).
RmsNormResult rms_norm_forward(const Tensor& x, const Tensor& weight, double eps);

struct RmsNormGrads {
  Tensor dx, dweight;  // undefined where not requested
};
// dx row by row (row_norms.h); dweight summed over rows in kernels/common/column_sum.h's
// fixed order (the same bits for any thread count, and on the GPU).
RmsNormGrads rms_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                               bool need_dx, bool need_dweight);

}  // namespace strata::cpu
