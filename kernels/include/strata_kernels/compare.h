#pragma once
// Comparison and selection kernels (C API), as strata_kernels/elementwise.h's: the output is
// contiguous with n elements; each input is read through `index`, a
// strata_kernels::StridedIndex<N> in host memory (N = number of tensor inputs) holding the
// output's shape and each input's strides (0 where it is broadcast). `type` is an
// elementwise.h element type (float32, float64, int32, int64 or bool); bool tensors hold one
// byte per element, 0 or 1.
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// out (bool) = a (op) b; op is common/compare_ops.h's CompareCode, a and b of `type`.
cudaError_t strata_compare(int32_t op, int32_t type, void* out, const void* a, const void* b, const void* index,
                           int64_t n, cudaStream_t stream);
// out = cond ? a : b; cond is bool, a, b and out of `type`.
cudaError_t strata_where(int32_t type, void* out, const void* cond, const void* a, const void* b, const void* index,
                         int64_t n, cudaStream_t stream);
// out = mask ? *value : x; mask is bool; value points to one element of `type` in host
// memory (converted there, so that both devices fill the same bits).
cudaError_t strata_masked_fill(int32_t type, void* out, const void* x, const void* mask, const void* value,
                               const void* index, int64_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
