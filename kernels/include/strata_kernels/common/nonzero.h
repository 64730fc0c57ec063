#pragma once
// nonzero's per-element math, shared by the CPU loop and the CUDA kernel: which elements
// count (NaN does: it is not equal to zero, as in PyTorch) and an element's coordinates.
#include <stdint.h>

#include "strata_kernels/common/macros.h"

namespace strata_kernels {

template <class T>
STRATA_HD bool is_nonzero(T v) {
  return v != T(0);
}

// The row-major coordinates of element `linear` of a contiguous array of `ndim` dimensions
// with these sizes (a pointer, or an array a kernel reads from its parameters in place),
// written to coords[0..ndim).
template <class Sizes>
STRATA_HD void unravel_index(int64_t linear, const Sizes& sizes, int32_t ndim, int64_t* coords) {
  for (int32_t d = ndim - 1; d >= 0; --d) {
    coords[d] = linear % sizes[d];
    linear /= sizes[d];
  }
}

}  // namespace strata_kernels
