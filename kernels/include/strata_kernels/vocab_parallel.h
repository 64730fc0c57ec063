#pragma once
// Tensor parallelism's vocabulary kernels (C API): the rows of the vocab-parallel
// cross-entropy (common/vocab_parallel_rows.h, one warp per row) and VocabParallelEmbedding's
// index step (common/vocab_shard_index.h). `type` is elementwise.h's STRATA_ELEMENT_F32 or
// _F64 (the cross-entropy's); targets and tokens are int64. Logits are contiguous [rows, cols], of which the first
// `real` columns are real words. Every pointer is device memory; work is queued on `stream`.
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// What the target check reports (read by the host after the stream finishes): rows whose
// target is in [0, vocab), and the first row whose target is neither that nor ignore_index
// (INT64_MAX if none). Reset by the call.
typedef struct StrataVocabTargetStatus {
  unsigned long long counted;
  long long first_bad_row;
} StrataVocabTargetStatus;

cudaError_t strata_vocab_parallel_check_targets(const int64_t* targets, int64_t rows, int64_t vocab,
                                                int64_t ignore_index, StrataVocabTargetStatus* status,
                                                cudaStream_t stream);

// max[r]: this rank's maximum of row r over its real columns, in double.
cudaError_t strata_vocab_parallel_row_max(int32_t type, const void* logits, int64_t rows, int64_t cols, int64_t real,
                                          double* max, cudaStream_t stream);

// With the group's max: sum_exp[r] (this rank's share of sum exp(x - max)) and
// target_logit[r] (the target's logit when this rank holds column target - start, else 0).
cudaError_t strata_vocab_parallel_row_sums(int32_t type, const void* logits, const int64_t* targets, int64_t rows,
                                           int64_t cols, int64_t real, int64_t start, int64_t ignore_index,
                                           const double* max, double* sum_exp, double* target_logit,
                                           cudaStream_t stream);

// *loss (one value of `type`) = the counted rows' sum of log(sum_exp) + max - target_logit
// (one warp, the rows' 32-lane order) over `counted`, or 0 when counted is 0.
cudaError_t strata_vocab_parallel_loss(int32_t type, const int64_t* targets, int64_t rows, int64_t vocab,
                                       int64_t ignore_index, const double* max, const double* sum_exp,
                                       const double* target_logit, int64_t counted, void* loss, cudaStream_t stream);

// dx [rows, cols] = scale * (softmax - one_hot(target)) on the real columns of counted rows,
// 0 elsewhere.
cudaError_t strata_vocab_parallel_grad(int32_t type, const void* logits, const int64_t* targets, int64_t rows,
                                       int64_t cols, int64_t real, int64_t start, int64_t vocab, int64_t ignore_index,
                                       const double* max, const double* sum_exp, double scale, void* dx,
                                       cudaStream_t stream);

// For n tokens: local[i] (the row this rank looks up) and outside[i] (a bool, one byte: 1
// where another rank holds the token); a token outside [0, vocab) sets *bad (a flag the
// caller zeroed) to 1.
cudaError_t strata_vocab_shard_indices(const int64_t* tokens, int64_t n, int64_t vocab, int64_t start, int64_t part,
                                       int64_t* local, void* outside, int32_t* bad, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
