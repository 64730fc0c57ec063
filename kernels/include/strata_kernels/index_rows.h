#pragma once
// index_select and index_add along the middle axis of a contiguous [outer, n, inner] array
// (C API), running common/index_rows.h's functors. The index is int32 or int64 (index_type:
// STRATA_ELEMENT_I32 / STRATA_ELEMENT_I64 of strata_kernels/elementwise.h), contiguous, m of
// them, on the device. strata_kernels/embedding.h is the case outer == 1.
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// out [outer, m, inner] = in[:, index[j], :] for elements of element_size bytes (1, 2, 4 or
// 8: every dtype, the bytes moved as they are). An index outside [0, n) leaves its row zero
// and sets *bad (a device flag the caller zeroed; null: none kept).
cudaError_t strata_index_select(int32_t index_type, int32_t element_size, void* out, const void* in, const void* index,
                                int64_t outer, int64_t n, int64_t inner, int64_t m, int32_t* bad, cudaStream_t stream);

// Device workspace bytes strata_index_add needs for m indices (0 when the query fails).
size_t strata_index_add_workspace(int32_t index_type, int64_t m);

// out [outer, n, inner] += src [outer, m, inner] at out[:, index[j], :], for type float32,
// float64, int32 or int64 (a StrataElementType). Each destination starts from its current
// value and adds its sources in increasing j (the CPU's order, so the same bits): the (index,
// j) pairs are radix-sorted (CUB, stable), then one thread per (outer, run of equal indices,
// column) walks its run. No atomics. An index outside [0, n) adds nothing and sets *bad (null:
// none kept). workspace: strata_index_add_workspace(index_type, m) bytes of device memory.
cudaError_t strata_index_add(int32_t index_type, int32_t type, void* out, const void* src, const void* index,
                             int64_t outer, int64_t n, int64_t inner, int64_t m, int32_t* bad, void* workspace,
                             size_t workspace_bytes, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
