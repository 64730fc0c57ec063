#pragma once
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::cpu {
// dst[i] = convert(src[i]) over the logical index space; shapes must be equal, strides
// arbitrary (src may be a broadcast view), dtypes may differ.
void copy_strided(const Tensor& dst, const Tensor& src);
// dst[i] = value for every element of a (possibly strided) dst.
void fill(const Tensor& dst, double value);
// The tensors (same dtype and device, shapes equal but in dimension d) concatenated along d
// into a fresh contiguous tensor of out_shape.
Tensor cat(const std::vector<Tensor>& ts, size_t d, const Shape& out_shape);
}  // namespace strata::cpu
