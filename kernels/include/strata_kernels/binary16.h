#pragma once
// add / mul of same-shape contiguous operands with 16-bit storage (C API; common/binary16.h):
// float32 math per element, one rounding on store. a_type, b_type, out_type: elementwise.h's
// STRATA_ELEMENT_F32 or one 16-bit code (BF16 or F16, the same for all three); op:
// common/elementwise_ops.h's BinaryCode Add or Mul.
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t strata_binary16(int32_t op, int32_t a_type, int32_t b_type, int32_t out_type, const void* a, const void* b,
                            void* out, int64_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
