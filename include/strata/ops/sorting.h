#pragma once
// Sorting, searching and counting: sort, argsort, nonzero, bincount. CPU and CUDA.
#include <cstdint>

#include "strata/ops/reduce.h"  // ValuesIndices
#include "strata/tensor/tensor.h"

namespace strata {

// x sorted along `dim` (values) and where each value came from (int64 indices), as
// torch.sort. Ascending, or descending; NaN sorts after every number (so first when
// descending) and all NaNs tie; -0 ties with +0. Ties keep their input order in both
// directions: the result is always the stable one, so stable=false (where torch may order
// ties any way) returns the same tensors. Float32, float64, int32 or int64. Differentiable
// in values: the gradient goes back to the position each value came from.
ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = true);
// sort's indices alone (not differentiable).
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);

// The coordinates of x's nonzero elements (NaN counts), one row each in row-major order:
// int64 [count, x.dim()], as torch.nonzero. Float32/64, int32/64 or bool. On CUDA the count
// is read back to the host to size the result (a device synchronisation).
Tensor nonzero(const Tensor& x);

// How often each value 0, 1, .. occurs in the 1-D int64 x, as torch.bincount: int64
// [max(max(x) + 1, minlength)]. With weights (x's length, float32 or float64) entry v is the
// sum of weights[i] over the i with x[i] == v, in weights' dtype, and the result is
// differentiable in weights (torch 1.13 refuses that backward). A negative value is refused,
// naming it and its position. On CUDA x is copied to the host for that check and for the
// maximum (a synchronisation, as in torch), and weighted sums are added atomically, in an
// unspecified order.
Tensor bincount(const Tensor& x, const Tensor& weights = {}, int64_t minlength = 0);

}  // namespace strata
