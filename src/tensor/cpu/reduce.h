#pragma once
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::cpu {
// Sum over `reduced` (a mask per dimension), keeping those dimensions as size 1.
Tensor sum_keepdim(const Tensor& x, const std::vector<bool>& reduced);
// Max and arg-max along one dimension, keeping it as size 1.
void max_keepdim(const Tensor& x, int64_t dim, Tensor* values, Tensor* indices);
// The k largest (smallest) entries along `dim` of x (any strides), best first, ties in
// index order, NaN above every number; values in x's dtype, indices int64.
void topk(const Tensor& x, int64_t k, int64_t dim, bool largest, Tensor* values, Tensor* indices);
// Inclusive prefix sums along `dim` (suffix sums when `reverse`: cumsum's adjoint) into a
// fresh contiguous tensor; floating types accumulate in double.
Tensor cumsum(const Tensor& x, int64_t dim, bool reverse);
}  // namespace strata::cpu
