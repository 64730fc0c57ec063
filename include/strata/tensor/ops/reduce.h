#pragma once
// Reductions. Differentiable.
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata {

Tensor sum(const Tensor& x);  // all elements -> shape []
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// Maximum along `dim`; the gradient flows to the (first) arg-max.
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // int64, not differentiable
// Sums `x` down to `shape` (the inverse of broadcasting `shape` to x.shape()).
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace strata
