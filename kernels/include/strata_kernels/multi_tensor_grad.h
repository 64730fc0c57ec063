#pragma once
// Multi-tensor gradient operations (C API), over a table of strata_kernels::GradTensor<T>
// entries (common/grad_ops.h; T float for f32, double for f64) and n_chunks TensorChunk
// entries, both in device memory. The reductions write one partial per chunk into
// `partials` (device memory: double for the sum of squares, int32_t for the unscale's
// non-finite flag), in common/chunk_reduce.h's order; the caller combines them in order.
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t strata_sum_of_squares_f32(const void* tensors, const void* chunks, int64_t n_chunks, void* partials,
                                      cudaStream_t stream);
cudaError_t strata_sum_of_squares_f64(const void* tensors, const void* chunks, int64_t n_chunks, void* partials,
                                      cudaStream_t stream);
cudaError_t strata_unscale_check_f32(const void* tensors, const void* chunks, int64_t n_chunks, void* partials,
                                     cudaStream_t stream);
cudaError_t strata_unscale_check_f64(const void* tensors, const void* chunks, int64_t n_chunks, void* partials,
                                     cudaStream_t stream);
cudaError_t strata_scale_f32(const void* tensors, const void* chunks, int64_t n_chunks, cudaStream_t stream);
cudaError_t strata_scale_f64(const void* tensors, const void* chunks, int64_t n_chunks, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
