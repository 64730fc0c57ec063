#pragma once
// Shared by the backward passes that route a gradient to indexed positions (gather, max,
// topk).
#include <cstdint>

#include "strata/tensor/tensor.h"

namespace strata::detail {

// Zeros of `shape` with grad[p] added at p with p[dim] replaced by index[p]: the adjoint of
// gather. index is int64, contiguous and already range-checked; grad has index's shape.
Tensor scatter_add_into_zeros(const char* op, const Shape& shape, int64_t dim, const Tensor& index, const Tensor& grad);

}  // namespace strata::detail
