#pragma once
// Embedding lookup and its weight gradient (C API). Indices are int32 or int64
// (index_type: STRATA_ELEMENT_I32 / STRATA_ELEMENT_I64 of strata_kernels/elementwise.h),
// contiguous, n of them; weight rows have `dim` elements. The case outer == 1 of
// strata_kernels/index_rows.h, kept as its own API for the embedding's glue.
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// out[i, :] = weight[indices[i], :] for elements of element_size bytes (2, 4 or 8). An index
// outside [0, vocab) leaves its row zero and sets *bad (a device flag the caller zeroed) to 1.
cudaError_t strata_embedding_forward(int32_t index_type, int32_t element_size, void* out, const void* weight,
                                     const void* indices, int64_t n, int64_t dim, int64_t vocab, int32_t* bad,
                                     cudaStream_t stream);

// Device workspace bytes strata_embedding_backward needs for n indices (0 when the query fails).
size_t strata_embedding_backward_workspace(int32_t index_type, int64_t n);

// dweight[v, :] += grad[i, :] over the i with indices[i] == v, in increasing i (the CPU's
// order, so the same bits), for a float32/float64 (type) dweight the caller zeroed: the
// (index, position) pairs are radix-sorted (stable), then one thread per (row, column)
// walks its row's positions. No atomics. Indices must be in range (the forward checked them).
cudaError_t strata_embedding_backward(int32_t index_type, int32_t type, void* dweight, const void* grad,
                                      const void* indices, int64_t n, int64_t dim, void* workspace,
                                      size_t workspace_bytes, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
