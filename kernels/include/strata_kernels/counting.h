#pragma once
// nonzero and bincount on the GPU (C API). `type` is a StrataElementType
// (strata_kernels/elementwise.h).
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The most dimensions nonzero takes on the GPU (the shape travels by value to the kernel).
#define STRATA_NONZERO_MAX_DIMS 16
typedef struct {
  int64_t sizes[STRATA_NONZERO_MAX_DIMS];
} StrataNonzeroShape;

// Device workspace bytes nonzero needs for n elements (0 when the query fails).
size_t strata_nonzero_workspace(int64_t n);
// Phase 1: *count (device memory) = the number of nonzero elements of the contiguous `in`
// (n elements; float32/64, int32/64 or bool), keeping each element's output row in the
// workspace for phase 2.
cudaError_t strata_nonzero_count(int32_t type, const void* in, int64_t n, int64_t* count, void* workspace,
                                 size_t workspace_bytes, cudaStream_t stream);
// Phase 2, same arguments and workspace: coords [count, ndim] (int64), the row-major
// coordinates of each nonzero element in order (common/nonzero.h's unravel_index).
cudaError_t strata_nonzero_coords(int32_t type, int64_t* coords, const void* in, int64_t n, StrataNonzeroShape shape,
                                  int32_t ndim, void* workspace, size_t workspace_bytes, cudaStream_t stream);

// out[x[i]] += 1 (out int64, weights null) or out[x[i]] += weights[i] (weight_type float32 or
// float64, out of that type) for i < n, with atomic adds (floating sums in no fixed order).
// out is zeroed by the caller and long enough for every x[i] (checked by the caller).
cudaError_t strata_bincount(int32_t weight_type, void* out, const int64_t* x, const void* weights, int64_t n,
                            cudaStream_t stream);

#ifdef __cplusplus
}
#endif
