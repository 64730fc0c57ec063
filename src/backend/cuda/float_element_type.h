#pragma once
// The kernels' element codes (strata_kernels/elementwise.h) of the dtypes an op's CUDA glue
// takes; others are refused naming the op.
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

// The arithmetic dtypes (the CPU ops' dispatch_arith set): float32, float64, int32, int64.
inline int32_t arith_element_type(const Tensor& x, const char* op) {
  switch (x.dtype()) {
    case DType::Float32: return STRATA_ELEMENT_F32;
    case DType::Float64: return STRATA_ELEMENT_F64;
    case DType::Int32: return STRATA_ELEMENT_I32;
    case DType::Int64: return STRATA_ELEMENT_I64;
    default: break;
  }
  STRATA_FAIL(op, ": dtype ", x.dtype(), " (shape ", x.shape(), ", ", x.device(),
              ") is not supported on CUDA (float32, float64, int32 or int64; convert with .to())");
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
