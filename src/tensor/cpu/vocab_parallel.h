#pragma once
// Tensor parallelism's vocabulary steps on the CPU: the rows of the vocab-parallel
// cross-entropy and VocabParallelEmbedding's index step. They run the functions of
// kernels/common/vocab_parallel_rows.h and vocab_shard_index.h, as the CUDA kernels do
// (src/tensor/cuda/vocab_parallel.cpp), so the CPU tests check the GPU's arithmetic. The
// collectives between the steps are the caller's (src/parallel/vocab_parallel_loss.cpp).
// Logits are contiguous [rows, cols] float32/float64 of which the first `real` columns are
// real words; targets and tokens contiguous int64.
#include <cstdint>

#include "strata/tensor/tensor.h"

namespace strata::cpu {

// The counted rows (target in [0, vocab)); throws naming the first target that is neither
// that nor ignore_index, its position and the vocabulary size.
int64_t vocab_parallel_check_targets(const Tensor& targets, int64_t vocab, int64_t ignore_index);

// float64 [rows]: this rank's row maxima over its real columns (-inf where it has none).
Tensor vocab_parallel_row_max(const Tensor& logits, int64_t real);

// With the group's maxima (float64 [rows]): this rank's share of sum exp(x - max) and the
// target's logit where this rank holds it (else 0), both float64 [rows].
struct VocabRowSums {
  Tensor sum_exp, target_logit;
};
VocabRowSums vocab_parallel_row_sums(const Tensor& logits, const Tensor& targets, int64_t real, int64_t start,
                                     int64_t ignore_index, const Tensor& max);

// The loss, a scalar of `dtype`: the counted rows' log(sum_exp) + max - target_logit, summed
// in the rows' 32-lane order, over `counted` (0 when nothing counts).
Tensor vocab_parallel_loss(const Tensor& targets, int64_t vocab, int64_t ignore_index, const Tensor& max,
                           const Tensor& sum_exp, const Tensor& target_logit, int64_t counted, DType dtype);

// d loss / d logits: scale * (softmax - one_hot(target)) on the real columns of counted rows,
// 0 on padding columns and ignored rows.
Tensor vocab_parallel_grad(const Tensor& logits, const Tensor& targets, int64_t real, int64_t start, int64_t vocab,
                           int64_t ignore_index, const Tensor& max, const Tensor& sum_exp, double scale);

// VocabParallelEmbedding's lookup: for every token the local row to look up (int64, row 0 for
// a token another rank holds) and outside (Bool, true for such a token), the same shape as
// tokens. Throws naming the first token outside [0, vocab) and its position.
struct VocabShardIndices {
  Tensor local, outside;
};
VocabShardIndices vocab_shard_indices(const Tensor& tokens, int64_t vocab, int64_t start, int64_t part);

}  // namespace strata::cpu
