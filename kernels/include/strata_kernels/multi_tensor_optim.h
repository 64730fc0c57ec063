#pragma once
// Multi-tensor optimizer steps (C API): one launch updates every tensor of a table.
// `tensors` points to device memory holding strata_kernels::AdamTensor<T> (Adam),
// SgdTensor<T> (SGD) or LionTensor<T> (Lion) entries, T float (f32) or double (f64); `chunks` to n_chunks
// strata_kernels::TensorChunk entries (common/multi_tensor.h). The math is
// common/fused_adam.h's FusedAdamOp, common/fused_sgd.h's FusedSgdOp and
// common/fused_lion.h's FusedLionOp.
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t strata_fused_adam_f32(const void* tensors, const void* chunks, int64_t n_chunks, cudaStream_t stream);
cudaError_t strata_fused_adam_f64(const void* tensors, const void* chunks, int64_t n_chunks, cudaStream_t stream);
cudaError_t strata_fused_sgd_f32(const void* tensors, const void* chunks, int64_t n_chunks, cudaStream_t stream);
cudaError_t strata_fused_sgd_f64(const void* tensors, const void* chunks, int64_t n_chunks, cudaStream_t stream);
cudaError_t strata_fused_lion_f32(const void* tensors, const void* chunks, int64_t n_chunks, cudaStream_t stream);
cudaError_t strata_fused_lion_f64(const void* tensors, const void* chunks, int64_t n_chunks, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
