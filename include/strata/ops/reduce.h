#pragma once
// Reductions, top-k and prefix sums. Differentiable in floating-point inputs.
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata {

Tensor sum(const Tensor& x);  // all elements -> shape []
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

// Variance: sum((x - mean)^2) / (N - correction) over N reduced elements. correction 1 is
// torch's default (unbiased=True), 0 the population variance (unbiased=False). Where
// N - correction <= 0 the result is inf or NaN, as in torch.
struct VarOptions {
  int64_t correction = 1;
  bool keepdim = false;
};
Tensor var(const Tensor& x);  // all elements, correction 1 -> shape []
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, VarOptions options = {});

// A reduction's values and their int64 positions along the reduced dimension.
struct ValuesIndices {
  Tensor values;
  Tensor indices;
};
// Maximum along `dim`; ties and NaN: the first occurrence (a NaN is the maximum). The
// gradient flows to that position.
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices max_with_indices(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // int64, not differentiable
// Minimum along `dim`, max's mirror: ties and NaN give the first occurrence (a NaN is the
// minimum), as torch.min; the gradient flows to that position.
Tensor min(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min_with_indices(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);  // int64, not differentiable

// log(sum(exp(x))) over `dims` (each listed once; an empty list reduces nothing, as sum),
// float32 or float64, computed as m + log(sum(exp(x - m))) with m the maximum, so nothing
// overflows; float32 sums in double. As torch: a row of all -inf (or an empty reduction) gives
// -inf, a +inf gives +inf, a NaN NaN. Gradient grad * exp(x - out), the softmax weights
// (NaN on an all -inf row, as torch).
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// The k largest (or smallest) entries along `dim`, largest first (smallest first), values
// differentiable, indices int64. Equal values come in index order (torch leaves the order of
// ties unspecified); NaN counts as larger than every number. The result is always sorted, so
// sorted=false (where torch may return any order) gives the same tensors.
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);

// Inclusive prefix sums along `dim`; float32/64 or int32/64, in the input's dtype (torch
// would return int64 for int32 input). Floating sums accumulate in double.
Tensor cumsum(const Tensor& x, int64_t dim);

// Sums `x` down to `shape` (the inverse of broadcasting `shape` to x.shape()).
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace strata
