#pragma once
// min/argmin and logsumexp along the middle axis of a contiguous [outer, n, inner] array (C
// API), one GPU thread per line running common/line_min_logsumexp.h, the CPU's functions.
// `type` is a StrataElementType (strata_kernels/elementwise.h); indices are int64.
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// values, indices [outer, 1, inner]: each line's minimum and its first position. n >= 1;
// float32, float64, int32 or int64.
cudaError_t strata_line_min(int32_t type, void* values, int64_t* indices, const void* in, int64_t outer, int64_t n,
                            int64_t inner, cudaStream_t stream);
// out [outer, 1, inner]: each line's logsumexp (n may be 0: -inf); float32 or float64.
cudaError_t strata_line_logsumexp(int32_t type, void* out, const void* in, int64_t outer, int64_t n, int64_t inner,
                                  cudaStream_t stream);

#ifdef __cplusplus
}
#endif
