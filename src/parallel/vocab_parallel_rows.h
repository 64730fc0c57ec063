#pragma once
// Tensor parallelism's vocabulary steps, on the CPU (vocab_cpu, vocab_parallel_rows_cpu.cpp)
// and on CUDA (vocab_cuda, vocab_parallel_rows_cuda.cpp): the rows of the vocab-parallel
// cross-entropy and VocabParallelEmbedding's index step. Both run the functions of
// strata_kernels/common/vocab_parallel_rows.h and vocab_shard_index.h, so the CPU tests
// check the GPU's arithmetic. They live with the parallel layer, their only user. The
// collectives between the steps are the caller's (src/parallel/vocab_parallel_loss.cpp).
// Logits are contiguous [rows, cols] float32/float64 of which the first `real` columns are
// real words; targets and tokens contiguous int64.
#include <cstdint>

#include "core/cuda_entry.h"
#include "strata/tensor/tensor.h"

namespace strata::parallel {

// With the group's maxima: this rank's share of sum exp(x - max) and the target's logit
// where this rank holds it (else 0), both float64 [rows].
struct VocabRowSums {
  Tensor sum_exp, target_logit;
};

// For every token the local row to look up (int64, row 0 for a token another rank holds)
// and outside (Bool, true for such a token), the same shape as tokens.
struct VocabShardIndices {
  Tensor local, outside;
};

namespace vocab_cpu {

// The counted rows (target in [0, vocab)); throws naming the first target that is neither
// that nor ignore_index, its position and the vocabulary size.
int64_t vocab_parallel_check_targets(const Tensor& targets, int64_t vocab, int64_t ignore_index);

// float64 [rows]: this rank's row maxima over its real columns (-inf where it has none).
Tensor vocab_parallel_row_max(const Tensor& logits, int64_t real);

// With the group's maxima (float64 [rows]): this rank's share of sum exp(x - max) and the
// target's logit where this rank holds it (else 0), both float64 [rows].
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
VocabShardIndices vocab_shard_indices(const Tensor& tokens, int64_t vocab, int64_t start, int64_t part);

}  // namespace vocab_cpu

// The same steps on CUDA tensors; the checks read one status back and name a bad value with
// the CPU's message.
namespace vocab_cuda {
STRATA_CUDA_ENTRIES_BEGIN
STRATA_CUDA_ENTRY(int64_t vocab_parallel_check_targets(const Tensor& targets, int64_t vocab, int64_t ignore_index))
STRATA_CUDA_ENTRY(Tensor vocab_parallel_row_max(const Tensor& logits, int64_t real))
STRATA_CUDA_ENTRY(VocabRowSums vocab_parallel_row_sums(const Tensor& logits, const Tensor& targets, int64_t real,
                                                       int64_t start, int64_t ignore_index, const Tensor& max))
STRATA_CUDA_ENTRY(Tensor vocab_parallel_loss(const Tensor& targets, int64_t vocab, int64_t ignore_index,
                                             const Tensor& max, const Tensor& sum_exp, const Tensor& target_logit,
                                             int64_t counted, DType dtype))
STRATA_CUDA_ENTRY(Tensor vocab_parallel_grad(const Tensor& logits, const Tensor& targets, int64_t real, int64_t start,
                                             int64_t vocab, int64_t ignore_index, const Tensor& max,
                                             const Tensor& sum_exp, double scale))
STRATA_CUDA_ENTRY(VocabShardIndices vocab_shard_indices(const Tensor& tokens, int64_t vocab, int64_t start,
                                                        int64_t part))
STRATA_CUDA_ENTRIES_END
}  // namespace vocab_cuda

}  // namespace strata::parallel
