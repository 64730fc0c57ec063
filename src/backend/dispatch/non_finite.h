#pragma once
// Counting nan and inf elements of a tensor on either device, for autograd's anomaly mode
// (autograd sits below the ops, so it cannot call them; it reaches the kernels here, as it
// does for gradient sums in accumulate.h).
#include <cstdint>

#include "strata/tensor/tensor.h"

namespace strata::backend {

struct NonFiniteCount {
  int64_t nan = 0;
  int64_t inf = 0;     // +inf and, when counted, -inf
  int64_t first = -1;  // row-major index of the first element counted; -1: none
  bool any() const { return nan + inf > 0; }
};

// The nan and inf elements of `t` (integer and bool tensors have none); -inf only with
// `negative_inf` (a forward pass may hold it on purpose: attention masks add it). A CPU tensor
// is counted in one pass; a CUDA one is first tested on the device (x - x summed: 0 when every
// element is finite, nan otherwise) and copied to the host only when that test fails.
NonFiniteCount count_non_finite(const Tensor& t, bool negative_inf = true);

}  // namespace strata::backend
