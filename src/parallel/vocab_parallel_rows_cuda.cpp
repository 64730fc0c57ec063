// CUDA glue of tensor parallelism's vocabulary steps (kernels/cuda/vocab_parallel.cu runs
// common/vocab_parallel_rows.h and vocab_shard_index.h, as the CPU does): tensors to
// pointers, one launch per step on the current stream. The checks read one status back; on
// a bad value the host names it through the CPU's check, so the message is the CPU's.
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/float_element_type.h"
#include "parallel/vocab_parallel_rows.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/elementwise.h"
#include "strata_kernels/vocab_parallel.h"

namespace strata::parallel::vocab_cuda {
namespace {

int32_t float_type(DType dtype, const char* op) { return cuda_detail::float_element_type(dtype, op); }

using Launch = cuda_detail::OpScope;

TensorOptions float64_on(const Tensor& t) { return {.dtype = DType::Float64, .device = t.device()}; }

const int64_t* index_ptr(const Tensor& t) { return static_cast<const int64_t*>(t.data_ptr()); }
const double* f64_ptr(const Tensor& t) { return static_cast<const double*>(t.data_ptr()); }

constexpr const char* kLoss = "vocab_parallel_cross_entropy";

}  // namespace

int64_t vocab_parallel_check_targets(const Tensor& targets, int64_t vocab, int64_t ignore_index) {
  Launch l(targets, kLoss);
  static_assert(sizeof(StrataVocabTargetStatus) == 2 * sizeof(int64_t));
  Tensor status = empty({2}, {.dtype = DType::Int64, .device = targets.device()});
  STRATA_LAUNCH(strata_vocab_parallel_check_targets(index_ptr(targets), targets.numel(), vocab, ignore_index,
                                                    static_cast<StrataVocabTargetStatus*>(status.data_ptr()),
                                                    l.stream));
  // The count is the host's (the loss and its gradient divide by it): this waits.
  const std::vector<int64_t> words = status.to_vector<int64_t>();
  StrataVocabTargetStatus s;
  std::memcpy(&s, words.data(), sizeof s);
  if (s.first_bad_row != std::numeric_limits<long long>::max())
    (void)vocab_cpu::vocab_parallel_check_targets(targets.to(Device::cpu()), vocab, ignore_index);  // throws
  return static_cast<int64_t>(s.counted);
}

Tensor vocab_parallel_row_max(const Tensor& logits, int64_t real) {
  Launch l(logits, kLoss);
  const int64_t rows = logits.size(0), cols = logits.size(1);
  Tensor max = empty({rows}, float64_on(logits));
  STRATA_LAUNCH(strata_vocab_parallel_row_max(float_type(logits.dtype(), kLoss), logits.data_ptr(), rows, cols, real,
                                              static_cast<double*>(max.data_ptr()), l.stream));
  return max;
}

VocabRowSums vocab_parallel_row_sums(const Tensor& logits, const Tensor& targets, int64_t real, int64_t start,
                                     int64_t ignore_index, const Tensor& max) {
  Launch l(logits, kLoss);
  const int64_t rows = logits.size(0), cols = logits.size(1);
  VocabRowSums s{empty({rows}, float64_on(logits)), empty({rows}, float64_on(logits))};
  STRATA_LAUNCH(strata_vocab_parallel_row_sums(float_type(logits.dtype(), kLoss), logits.data_ptr(), index_ptr(targets),
                                               rows, cols, real, start, ignore_index, f64_ptr(max),
                                               static_cast<double*>(s.sum_exp.data_ptr()),
                                               static_cast<double*>(s.target_logit.data_ptr()), l.stream));
  return s;
}

Tensor vocab_parallel_loss(const Tensor& targets, int64_t vocab, int64_t ignore_index, const Tensor& max,
                           const Tensor& sum_exp, const Tensor& target_logit, int64_t counted, DType dtype) {
  Launch l(targets, kLoss);
  Tensor loss = empty({}, {.dtype = dtype, .device = targets.device()});
  STRATA_LAUNCH(strata_vocab_parallel_loss(float_type(dtype, kLoss), index_ptr(targets), targets.numel(), vocab,
                                           ignore_index, f64_ptr(max), f64_ptr(sum_exp), f64_ptr(target_logit), counted,
                                           loss.data_ptr(), l.stream));
  return loss;
}

Tensor vocab_parallel_grad(const Tensor& logits, const Tensor& targets, int64_t real, int64_t start, int64_t vocab,
                           int64_t ignore_index, const Tensor& max, const Tensor& sum_exp, double scale) {
  const char* op = "vocab_parallel_cross_entropy backward";
  Launch l(logits, op);
  const int64_t rows = logits.size(0), cols = logits.size(1);
  Tensor dx = empty_like(logits);
  STRATA_LAUNCH(strata_vocab_parallel_grad(float_type(logits.dtype(), op), logits.data_ptr(), index_ptr(targets), rows,
                                           cols, real, start, vocab, ignore_index, f64_ptr(max), f64_ptr(sum_exp),
                                           scale, dx.data_ptr(), l.stream));
  return dx;
}

VocabShardIndices vocab_shard_indices(const Tensor& tokens, int64_t vocab, int64_t start, int64_t part) {
  const char* op = "VocabParallelEmbedding";
  Launch l(tokens, op);
  VocabShardIndices r{empty(tokens.shape(), {.dtype = DType::Int64, .device = tokens.device()}),
                      empty(tokens.shape(), {.dtype = DType::Bool, .device = tokens.device()})};
  if (tokens.numel() == 0) return r;
  Tensor bad = zeros({1}, {.dtype = DType::Int32, .device = tokens.device()});
  STRATA_LAUNCH(strata_vocab_shard_indices(index_ptr(tokens), tokens.numel(), vocab, start, part,
                                           static_cast<int64_t*>(r.local.data_ptr()), r.outside.data_ptr(),
                                           static_cast<int32_t*>(bad.data_ptr()), l.stream));
  // Reading the flag waits for the kernel: the price of an error that names the token.
  if (bad.to_vector<int32_t>()[0] != 0)
    (void)vocab_cpu::vocab_shard_indices(tokens.to(Device::cpu()), vocab, start, part);  // throws
  return r;
}

}  // namespace strata::parallel::vocab_cuda
