#pragma once
// Dropout (C API): y[i] = x[i] * scale where element i is kept under (seed, offset), else 0,
// for n contiguous elements; common/dropout.h's mask, the CPU's, so a (seed, offset) drops
// the same elements on both. `type` is STRATA_ELEMENT_F32 or _F64, or _BF16 / _F16 (float32
// math, each element widened on load and rounded once on store).
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t strata_dropout_apply(int32_t type, void* y, const void* x, int64_t n, float p, double scale, uint64_t seed,
                                 uint64_t offset, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
