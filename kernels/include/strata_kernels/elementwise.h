#pragma once
// Elementwise kernels (C API). The output is contiguous with n elements; each input is read
// through `index`, a strata_kernels::StridedIndex<N> (common/strided_index.h, N = number of
// inputs, host memory, passed to the kernel by value) holding the output's shape and each
// input's strides (0 where it is broadcast). Op codes are common/elementwise_ops.h's
// UnaryCode, BinaryCode, UnaryGradCode and BinaryGradCode; p and q the op's scalars.
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Element types: integer ones only for the ops common/elementwise_ops.h calls arithmetic;
// bool only for comparisons and selections (strata_kernels/compare.h); bfloat16 and float16
// only where a kernel says it stores 16-bit data (common/storage16.h).
enum StrataElementType {
  STRATA_ELEMENT_F32 = 0,
  STRATA_ELEMENT_F64 = 1,
  STRATA_ELEMENT_I32 = 2,
  STRATA_ELEMENT_I64 = 3,
  STRATA_ELEMENT_BOOL = 4,
  STRATA_ELEMENT_BF16 = 5,
  STRATA_ELEMENT_F16 = 6
};

cudaError_t strata_unary(int32_t op, int32_t type, void* out, const void* in, const void* index, int64_t n, double p,
                         double q, cudaStream_t stream);
cudaError_t strata_binary(int32_t op, int32_t type, void* out, const void* a, const void* b, const void* index,
                          int64_t n, cudaStream_t stream);
// Floating types only.
cudaError_t strata_unary_grad(int32_t op, int32_t type, void* out, const void* grad, const void* saved,
                              const void* index, int64_t n, double p, double q, cudaStream_t stream);
cudaError_t strata_binary_grad(int32_t op, int32_t type, void* out, const void* grad, const void* a, const void* b,
                               const void* index, int64_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
