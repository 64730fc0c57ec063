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
// The sum of squares is accumulated in double.
RmsNormResult rms_norm_forward(const Tensor& x, const Tensor& weight, double eps);

struct RmsNormGrads {
  Tensor dx, dweight;  // undefined where not requested
};
// One pass per row computes its dot product, a second dx; dweight is accumulated into
// per-thread partial sums reduced in thread order (deterministic for a thread count).
RmsNormGrads rms_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                               bool need_dx, bool need_dweight);

}  // namespace strata::cpu
