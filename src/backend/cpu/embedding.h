#pragma once
// Embedding lookup (a row gather) and its deterministic scatter-add backward.
#include <cstdint>

#include "strata/tensor/tensor.h"

namespace strata::cpu {

// Throws naming the first index (contiguous int32/int64, on the CPU) outside
// [0, weight_shape[0]), its position and the weight's shape.
void check_embedding_indices(const Tensor& indices, const Shape& weight_shape);
// indices contiguous int32/int64 of any shape, weight contiguous [V, D] -> [indices.., D].
// Throws naming the first index outside [0, V), its position and V.
Tensor embedding_forward(const Tensor& indices, const Tensor& weight);
// grad contiguous [N, D] with N = indices.numel() -> dweight [V, D]. Threads own disjoint
// column ranges and every element sums its tokens in order, so the result is the same for
// any thread count and there are no races.
Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t vocab);

}  // namespace strata::cpu
