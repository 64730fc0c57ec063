#pragma once
// sort on the CPU: each row of a contiguous [rows, n] array ordered by
// strata_kernels/common/sort_key.h's keys, stably (the CUDA radix sort sorts the same keys).
#include "strata/tensor/tensor.h"

namespace strata::cpu {

// values and indices [rows, n] (x's dtype and int64): each row of x sorted ascending (or
// descending), equal elements in input order. float32, float64, int32 or int64.
void sort_rows(const Tensor& x, bool descending, Tensor* values, Tensor* indices);

}  // namespace strata::cpu
