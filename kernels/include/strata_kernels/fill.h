#pragma once
// Fill kernels (C API): every element of a contiguous buffer gets the same bit pattern.
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// `element_size` is 1, 2, 4 or 8 bytes; the low `element_size` bytes of `bits` are stored.
cudaError_t strata_fill_bits(void* dst, size_t element_size, uint64_t bits, size_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
