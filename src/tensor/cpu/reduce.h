#pragma once
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::cpu {
// Sum over `reduced` (a mask per dimension), keeping those dimensions as size 1.
Tensor sum_keepdim(const Tensor& x, const std::vector<bool>& reduced);
// Max and arg-max along one dimension, keeping it as size 1.
void max_keepdim(const Tensor& x, int64_t dim, Tensor* values, Tensor* indices);
}  // namespace strata::cpu
