#pragma once
// Shared by the row kernels' launchers (row_ops.cu, vocab_parallel.cu): the grid of a
// grid-stride loop over n elements, and the dispatch on a float element code.
#include <cuda_runtime.h>
#include <stdint.h>

#include "strata_kernels/common/storage16.h"
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

// Runs f(A{}, T{}, B{}) for a row op computing in T on data stored as A and B: all three
// float64, or T float with each of A and B float, bfloat16 or float16 (storage16.h).
template <class F>
cudaError_t for_row_storage(int32_t type, int32_t a_type, int32_t b_type, F&& f) {
  auto with_b = [&](auto a) -> cudaError_t {
    switch (b_type) {
      case STRATA_ELEMENT_F32: return f(a, float{}, float{});
      case STRATA_ELEMENT_BF16: return f(a, float{}, Bf16Storage{});
      case STRATA_ELEMENT_F16: return f(a, float{}, HalfStorage{});
      default: return cudaErrorInvalidValue;
    }
  };
  if (type == STRATA_ELEMENT_F64)
    return a_type == type && b_type == type ? f(double{}, double{}, double{}) : cudaErrorInvalidValue;
  if (type != STRATA_ELEMENT_F32) return cudaErrorInvalidValue;
  switch (a_type) {
    case STRATA_ELEMENT_F32: return with_b(float{});
    case STRATA_ELEMENT_BF16: return with_b(Bf16Storage{});
    case STRATA_ELEMENT_F16: return with_b(HalfStorage{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace strata_kernels
