#pragma once
// Dtype conversion kernels (C API). Round to nearest even, as the CPU path.
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t strata_float_to_bf16(const float* src, uint16_t* dst, size_t n, cudaStream_t stream);
cudaError_t strata_bf16_to_float(const uint16_t* src, float* dst, size_t n, cudaStream_t stream);
cudaError_t strata_float_to_half(const float* src, uint16_t* dst, size_t n, cudaStream_t stream);
cudaError_t strata_half_to_float(const uint16_t* src, float* dst, size_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
