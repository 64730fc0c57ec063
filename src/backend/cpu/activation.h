#pragma once
// Fused elementwise activations: forward and backward each one pass over memory.
#include "strata/tensor/tensor.h"

namespace strata::cpu {

// Inputs must be contiguous float32/float64 tensors of equal shape; results are new
// contiguous tensors.
Tensor gelu_forward(const Tensor& x);
Tensor gelu_backward(const Tensor& grad, const Tensor& x);  // grad * gelu'(x)
Tensor relu_forward(const Tensor& x);
Tensor relu_backward(const Tensor& grad, const Tensor& out);  // grad where out > 0

}  // namespace strata::cpu
