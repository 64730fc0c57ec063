#pragma once
// CPU kernels of min/argmin and logsumexp (ops/min.cpp, ops/logsumexp.cpp): the line
// functions of strata_kernels/common/line_min_logsumexp.h, which the CUDA kernels run too.
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::cpu {

// Min and arg-min along one dimension (x.size(dim) >= 1), keeping it as size 1; float32,
// float64, int32 or int64, indices int64.
void min_keepdim(const Tensor& x, int64_t dim, Tensor* values, Tensor* indices);
// logsumexp over `reduced` (a mask per dimension), keeping those dimensions as size 1;
// float32 or float64. An empty reduction gives -inf.
Tensor logsumexp_keepdim(const Tensor& x, const std::vector<bool>& reduced);

}  // namespace strata::cpu
