#pragma once
// tril/triu and one_hot (C API), running common/triangle.h as the CPU does.
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// out = tril (lower != 0) or triu of a contiguous [batch, rows, cols] array `in` whose
// elements are element_bytes (1, 2, 4 or 8) wide: every dtype, copied bit for bit.
cudaError_t strata_triangle(int32_t element_bytes, void* out, const void* in, int64_t batch, int64_t rows, int64_t cols,
                            int64_t diagonal, int32_t lower, cudaStream_t stream);
// out [n, classes] int64 = one_hot of the n int64 class indices (each in [0, classes)).
cudaError_t strata_one_hot(int64_t* out, const int64_t* index, int64_t n, int64_t classes, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
