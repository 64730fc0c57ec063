#pragma once
// Shared by the row kernels' launchers (row_ops.cu, vocab_parallel.cu): the grid of a
// grid-stride loop over n elements, and the dispatch on a float element code.
#include <cuda_runtime.h>
#include <stdint.h>

#include "strata_kernels/elementwise.h"

namespace strata_kernels {

constexpr int kFloatKernelThreads = 256;

// At least one block (a launch of none is an error), at most 65535 (the loops stride).
inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kFloatKernelThreads - 1) / kFloatKernelThreads;
  return static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

// Runs f(T{}) for the element type (float or double); cudaErrorInvalidValue for others.
template <class F>
cudaError_t for_float_type(int32_t type, F&& f) {
  switch (type) {
    case STRATA_ELEMENT_F32: return f(float{});
    case STRATA_ELEMENT_F64: return f(double{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace strata_kernels
