#pragma once
// Sum over the middle axis of a contiguous [outer, n, inner] array (C API), in
// common/dim_reduce.h's order, the CPU sum's: out[o * inner + i] = the sum over k of
// in[(o * n + k) * inner + i]. `type` is a StrataElementType (strata_kernels/elementwise.h).
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t strata_dim_sum(int32_t type, void* out, const void* in, int64_t outer, int64_t n, int64_t inner,
                           cudaStream_t stream);

#ifdef __cplusplus
}
#endif
