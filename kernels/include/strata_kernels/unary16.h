#pragma once
// Elementwise activations on contiguous 16-bit data (C API; common/unary16.h): float32 math
// per element, one rounding on store. type: elementwise.h's STRATA_ELEMENT_BF16 or _F16;
// op: common/elementwise_ops.h's UnaryCode / UnaryGradCode, Gelu or Silu.
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t strata_unary16(int32_t op, int32_t type, const void* x, void* y, int64_t n, double p, double q,
                           cudaStream_t stream);
cudaError_t strata_unary_grad16(int32_t op, int32_t type, const void* grad, const void* saved, void* dx, int64_t n,
                                double p, double q, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
