#pragma once
// Ring attention's per-block row steps (strata_kernels/common/attention_block.h), on the CPU
// (ring_cpu, ring_attention_blocks_cpu.cpp) and on CUDA (ring_cuda,
// ring_attention_blocks_cuda.cpp), so the CPU tests check the GPU's arithmetic. They live with
// the parallel layer, their only user (context_parallel_attention.cpp). Scores are
// contiguous [.., c] float32/float64 rows of c x c blocks (row r's query at offset r % c of
// its chunk); `causal`: a diagonal block (row r sees keys 0..r % c). lse and delta hold one
// value per row, of the scores' dtype.
#include "core/cuda_entry.h"
#include "strata/tensor/tensor.h"

namespace strata::parallel {

struct RingBlockSoftmax {
  Tensor probs;  // the scores' shape
  Tensor lse;    // the scores' shape with the last dimension 1
};

namespace ring_cpu {
// softmax(scale * scores) over each row's valid keys (0 beyond) and the rows' log-sum-exp.
RingBlockSoftmax ring_block_softmax(const Tensor& scores, double scale, bool causal);
// exp(scale * scores - lse) over the valid keys, 0 beyond.
Tensor ring_block_probs(const Tensor& scores, const Tensor& lse, double scale, bool causal);
// scale * probs * (dp - delta), written over dp (which is returned).
Tensor ring_block_score_grad(Tensor dp, const Tensor& probs, const Tensor& delta, double scale);
}  // namespace ring_cpu

namespace ring_cuda {
STRATA_CUDA_ENTRIES_BEGIN
STRATA_CUDA_ENTRY(RingBlockSoftmax ring_block_softmax(const Tensor& scores, double scale, bool causal))
STRATA_CUDA_ENTRY(Tensor ring_block_probs(const Tensor& scores, const Tensor& lse, double scale, bool causal))
STRATA_CUDA_ENTRY(Tensor ring_block_score_grad(Tensor dp, const Tensor& probs, const Tensor& delta, double scale))
STRATA_CUDA_ENTRIES_END
}  // namespace ring_cuda

}  // namespace strata::parallel
