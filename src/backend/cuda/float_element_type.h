#pragma once
// The kernels' element code (strata_kernels/elementwise.h) of a float32 or float64 tensor,
// for the CUDA glue of ops that take only those two; others are refused naming the op.
#include <cstdint>

#include "strata/core/error.h"
#include "strata/tensor/tensor.h"
#include "strata_kernels/elementwise.h"

namespace strata::cuda_detail {

inline int32_t float_element_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::Float32: return STRATA_ELEMENT_F32;
    case DType::Float64: return STRATA_ELEMENT_F64;
    default: break;
  }
  STRATA_FAIL(op, ": dtype ", dtype, " is not supported on CUDA (float32 or float64; convert with .to())");
}

}  // namespace strata::cuda_detail
