#pragma once
// Argument checks and input preparation shared by the nn_functional ops.
#include "strata/core/error.h"
#include "strata/tensor/tensor.h"

namespace strata::detail {

// `t` (named `what` in messages) must be a defined float32/float64 CPU tensor.
inline void check_nn_input(const Tensor& t, const char* op, const char* what) {
  STRATA_CHECK(t.defined(), op, ": ", what, " is undefined");
  STRATA_CHECK(t.device().is_cpu(), op, ": ", what, " is on ", t.device(), "; only CPU tensors are supported so far");
  STRATA_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64, op, ": ", what, " has dtype ", t.dtype(),
               " (shape ", t.shape(), "); float32 or float64 expected (convert 16-bit tensors with .to())");
}

// The kernels read raw contiguous memory. Detaching first keeps the copy (if any) out of
// the autograd graph: the op records its own node against the original input.
inline Tensor contiguous_data(const Tensor& t) { return t.detach().contiguous(); }

}  // namespace strata::detail
