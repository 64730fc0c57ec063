#pragma once
// Strided copy on one device (C API): dst[i] = src[i] for the n elements of a shape, each
// side addressed through its own strides: `index` is a strata_kernels::StridedIndex<2>
// (common/strided_index.h, host memory) with the shape, dst's strides as operand 0 and
// src's as operand 1 (0 where src is broadcast). Elements are moved as raw bits of
// elem_size bytes (1, 2, 4 or 8), so any dtype copies exactly. Only dst's own elements are
// written.
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t strata_strided_copy(void* dst, const void* src, size_t elem_size, const void* index, int64_t n,
                                cudaStream_t stream);

#ifdef __cplusplus
}
#endif
