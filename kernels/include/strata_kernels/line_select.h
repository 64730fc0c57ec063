#pragma once
// Max/argmax, topk, cumsum and the picked entries' gradient along the middle axis of a
// contiguous [outer, n, inner] array (C API), one GPU thread per line running
// common/line_select.h, the CPU's functions: the same values and indices, bit for bit.
// `type` is a StrataElementType (strata_kernels/elementwise.h); indices are int64.
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// values, indices [outer, 1, inner]: each line's maximum and its first position. n >= 1.
cudaError_t strata_line_max(int32_t type, void* values, int64_t* indices, const void* in, int64_t outer, int64_t n,
                            int64_t inner, cudaStream_t stream);
// values, indices [outer, k, inner]: each line's k largest (smallest) entries, best first.
cudaError_t strata_line_topk(int32_t type, void* values, int64_t* indices, const void* in, int64_t outer, int64_t n,
                             int64_t inner, int64_t k, int32_t largest, cudaStream_t stream);
// out [outer, n, inner]: inclusive prefix sums along each line (suffix sums when reverse).
cudaError_t strata_line_cumsum(int32_t type, void* out, const void* in, int64_t outer, int64_t n, int64_t inner,
                               int32_t reverse, cudaStream_t stream);
// out [outer, n, inner] (zeros) += grad [outer, k, inner] at the positions index [outer, k,
// inner] of each line, in t order (the adjoint of max and topk).
cudaError_t strata_line_scatter_add(int32_t type, void* out, const int64_t* index, const void* grad, int64_t outer,
                                    int64_t n, int64_t inner, int64_t k, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
