#pragma once
// CPU kernels of round/floor/ceil/trunc/sign and isnan/isinf/isfinite (ops/rounding.cpp):
// strata_kernels/common/rounding_ops.h's functors over a strided input, into a fresh
// contiguous output. `name` is the public op, which errors name.
#include "backend/kernel_types.h"

namespace strata::cpu {

// Of a's dtype: float32, float64, int32 or int64 (integers are their own rounding).
Tensor rounding(backend::RoundingOp op, const Tensor& a, const char* name);
// Bool: float32, float64, int32, int64 or bool (never NaN or infinite but for floats).
Tensor classify(backend::ClassifyOp op, const Tensor& a, const char* name);

}  // namespace strata::cpu
