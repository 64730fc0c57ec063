#pragma once
// Ring attention's block kernels (C API; common/attention_block.h, one warp per row). `type`
// is elementwise.h's STRATA_ELEMENT_F32 or _F64. Blocks are contiguous [rows, c] of c x c
// score blocks (row r's query is at offset r % c of its chunk); `causal`: a diagonal block,
// row r seeing keys 0..r % c. lse and delta are [rows]. Every pointer is device memory; work
// is queued on `stream`.
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// probs = softmax(scale * scores) over the valid keys (0 beyond), lse = their log-sum-exp.
cudaError_t strata_ring_block_softmax(int32_t type, const void* scores, void* probs, void* lse, int64_t rows, int64_t c,
                                      double scale, int32_t causal, cudaStream_t stream);
// probs = exp(scale * scores - lse) over the valid keys, 0 beyond.
cudaError_t strata_ring_block_probs(int32_t type, const void* scores, const void* lse, void* probs, int64_t rows,
                                    int64_t c, double scale, int32_t causal, cudaStream_t stream);
// dp = scale * probs * (dp - delta), in place.
cudaError_t strata_ring_block_score_grad(int32_t type, void* dp, const void* probs, const void* delta, int64_t rows,
                                         int64_t c, double scale, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
