#pragma once
// Joining and splitting tensors. Differentiable. (Views such as view, narrow, transpose and
// permute are methods of Tensor.)
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// Pieces of `split_size` along dim (the last may be smaller); views of x.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);

}  // namespace strata
