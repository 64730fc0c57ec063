#pragma once
// Selecting, gathering and scattering along one dimension by an index tensor (int64, or
// int32). Index values must lie in [0, size of that dimension); errors name the offending
// index, its position and the bound. Differentiable in the floating-point operands, not in
// the index.
#include <cstdint>

#include "strata/tensor/tensor.h"

namespace strata {

// x with dimension `dim` replaced by x[.., index[j], ..] for each j of a 1-D (or 0-D)
// index; any dtype. Backward adds the gradient rows back at their indices (repeated indices
// accumulate).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// A copy of x with src[.., j, ..] added at x[.., index[j], ..]; src has x's shape except
// src.size(dim) == index.numel(). Float32/64 or int32/64.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

// out[p] = x[p with p[dim] replaced by index[p]], out of index's shape. index has x's number
// of dimensions and index.size(d) <= x.size(d) for d != dim. Any dtype.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// A copy of x with src[p] added at x[p with p[dim] replaced by index[p]] for each position p
// of index (out of place). index, src and x have the same number of dimensions;
// index.size(d) <= src.size(d) for all d and index.size(d) <= x.size(d) for d != dim.
// Float32/64 or int32/64. Backward: x gets the gradient, src gets gather(grad, dim, index)
// (zero where src lies outside index's shape).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

}  // namespace strata
