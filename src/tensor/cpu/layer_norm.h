#pragma once
// Layer normalisation over the last dimension, fused forward and backward.
#include "strata/tensor/tensor.h"

namespace strata::cpu {

struct LayerNormResult {
  Tensor out;   // x's shape
  Tensor mean;  // [rows], x's dtype
  Tensor rstd;  // [rows], 1 / sqrt(var + eps), biased variance
};
// x contiguous [..., D] viewed as [rows, D]; weight and bias contiguous [D] or undefined.
// Mean and variance are accumulated in double (two passes over the cached row).
LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);

struct LayerNormGrads {
  Tensor dx, dweight, dbias;  // undefined where not requested
};
// One pass per row computes dx and accumulates dweight/dbias into per-thread partial sums
// (reduced at the end in thread order: no atomics, deterministic for a thread count).
LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& rstd, bool need_dx, bool need_dweight, bool need_dbias);

}  // namespace strata::cpu
