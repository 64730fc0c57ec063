#pragma once
// Rotary position embedding (C API): y = the rotation of each head vector of the contiguous
// x ([rows, d] with rows = ... x T, position r % t) by the contiguous [t, d] cos/sin tables,
// or its transpose (the gradient) when `transpose` is nonzero; common/rotary.h's functors,
// the CPU's. `type` (x's and y's, strata_kernels/elementwise.h) is F32 or F64 (the tables'
// too), or BF16/F16 with float32 tables: float32 math, widened on load, rounded once on store.
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t strata_rotary_apply(int32_t type, int32_t transpose, void* y, const void* x, const void* cos,
                                const void* sin, int64_t rows, int64_t t, int64_t d, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
