#pragma once
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::cpu {
// Sum over `reduced` (a mask per dimension), keeping those dimensions as size 1.
Tensor sum_keepdim(const Tensor& x, const std::vector<bool>& reduced);
// Max and arg-max along one dimension, keeping it as size 1.
void max_keepdim(const Tensor& x, int64_t dim, Tensor* values, Tensor* indices);
// The gradient of max along `dim`: zeros of in_shape with grad (contiguous, `dim` kept as
// size 1) written at the arg-max positions `indices` (int64, grad's shape).
Tensor max_backward(const Tensor& grad, const Tensor& indices, const Shape& in_shape, int64_t dim);
}  // namespace strata::cpu
