#pragma once
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::cpu {
// x seen as a contiguous [outer, n, inner] array whose middle axis holds the reduced
// elements in their row-major order (the order the sum's lanes take them): x itself when
// the reduced dimensions are one block of a contiguous x, else a copy with the reduced
// dimensions moved last (inner = 1). Used by the CPU and the CUDA sum alike.
struct DimReducePlan {
  Tensor src;
  int64_t outer = 0, n = 0, inner = 0;
};
DimReducePlan plan_dim_reduce(const Tensor& x, const std::vector<bool>& reduced);
// x's shape with the reduced dimensions set to 1.
Shape sum_keepdim_shape(const Shape& shape, const std::vector<bool>& reduced);
// Sum over `reduced` (a mask per dimension), keeping those dimensions as size 1, in
// strata_kernels/common/dim_reduce.h's order (the CUDA sum's): the same bits for any thread count.
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
