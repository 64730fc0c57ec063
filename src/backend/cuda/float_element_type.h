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

// The element code of data a row op may store in 16 bits (strata_kernels/common/storage16.h).
inline int32_t storage_element_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::BFloat16: return STRATA_ELEMENT_BF16;
    case DType::Float16: return STRATA_ELEMENT_F16;
    default: return float_element_type(dtype, op);
  }
}

// A row op's compute dtype: float32 for 16-bit data, else the data's own.
inline DType compute_dtype_of(DType data) {
  return data == DType::BFloat16 || data == DType::Float16 ? DType::Float32 : data;
}

}  // namespace strata::cuda_detail
