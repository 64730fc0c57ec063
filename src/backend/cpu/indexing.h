#pragma once
// Index-driven copies and their adjoints: index_select / index_add and gather / scatter_add.
// Every `index` here is int64 and contiguous (the ops convert int32 first) and its values
// have passed check_index_range.
#include <cstdint>

#include "strata/tensor/tensor.h"

namespace strata::cpu {

// Throws, for the first index outside [0, input_shape[dim]):
//   "<op>: index 7 at position [1, 2] of index (shape [2, 3]) is out of range for dimension
//    1 of size 5 (input shape [3, 5])"
// Reads host memory, so it runs inside the op's CPU case.
void check_index_range(const char* op, const Tensor& index, int64_t dim, const Shape& input_shape);

// x (contiguous, any dtype) with dimension `dim` replaced by x[.., index[j], ..] for each
// j of the 1-D index.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[.., index[j], ..] += src[.., j, ..]; out and src contiguous, float32/64 or int32/64.
void index_add_(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);

// A fresh tensor of index's shape: out[p] = x[p with p[dim] replaced by index[p]]. Any
// dtype; x may have any strides.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// out[p with p[dim] replaced by index[p]] += src[p] for every position p of index; out and
// src may have any strides. Float32/64 or int32/64.
void scatter_add_(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);

}  // namespace strata::cpu
