#pragma once
// round/floor/ceil/trunc/sign and isnan/isinf/isfinite (C API), as strata_kernels/elementwise.h:
// the output is contiguous with n elements; the input is read through `index`, a
// strata_kernels::StridedIndex<1> (common/strided_index.h) in host memory. Op codes are
// common/rounding_ops.h's RoundingCode and ClassifyCode; `type` an elementwise.h element type.
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// out (of `type`) = op(in); float32, float64, int32 or int64.
cudaError_t strata_rounding(int32_t op, int32_t type, void* out, const void* in, const void* index, int64_t n,
                            cudaStream_t stream);
// out (bool) = op(in); float32, float64, int32, int64 or bool.
cudaError_t strata_classify(int32_t op, int32_t type, void* out, const void* in, const void* index, int64_t n,
                            cudaStream_t stream);

#ifdef __cplusplus
}
#endif
