#pragma once
// Matrix products through BLAS sgemm/dgemm with transpose flags (no materialised
// transposes). Differentiable.
#include "strata/tensor/tensor.h"

namespace strata {

// [.., n, k] x [k, m] -> [.., n, m]; [b.., n, k] x [b.., k, m] -> [b.., n, m] (batch dims
// equal); [n, k] x [k, m]. Inputs may be transposed views.
Tensor matmul(const Tensor& a, const Tensor& b);
// x [.., in] , weight [out, in], bias [out] (may be undefined) -> [.., out]  (like torch).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

}  // namespace strata
