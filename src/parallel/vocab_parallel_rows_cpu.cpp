#include "parallel/vocab_parallel_rows.h"

#include "strata/tensor/factory.h"
#include "strata_kernels/common/vocab_parallel_rows.h"
#include "strata_kernels/common/vocab_shard_index.h"
#include "tensor/dtype_dispatch.h"

namespace strata::parallel::vocab_cpu {
namespace {

using strata_kernels::CpuRow;

// Rows are independent, so threads change nothing in the results.
constexpr int64_t kParallelThreshold = 16384;  // elements; below this threads cost more than they save

TensorOptions float64() { return {.dtype = DType::Float64}; }

}  // namespace

int64_t vocab_parallel_check_targets(const Tensor& targets, int64_t vocab, int64_t ignore_index) {
  const int64_t* t = targets.data<int64_t>();
  int64_t counted = 0;
  for (int64_t i = 0; i < targets.numel(); ++i) {
    const int32_t state = strata_kernels::vp_target_state(t[i], vocab, ignore_index);
    STRATA_CHECK(state != strata_kernels::kVocabTargetBad, "vocab_parallel_cross_entropy: target ", t[i],
                 " at position ", i, " is out of range for a vocabulary of ", vocab);
    counted += state == strata_kernels::kVocabTargetCounted ? 1 : 0;
  }
  return counted;
}

Tensor vocab_parallel_row_max(const Tensor& logits, int64_t real) {
  const int64_t rows = logits.size(0), cols = logits.size(1);
  Tensor max = empty({rows}, float64());
  double* mx = max.data<double>();
  detail::dispatch_floating(logits.dtype(), "vocab_parallel_cross_entropy", [&]<class T>() {
    const T* x = logits.data<T>();
#pragma omp parallel for if (rows * cols > kParallelThreshold) schedule(static)
    for (int64_t i = 0; i < rows; ++i) mx[i] = strata_kernels::vp_row_max<CpuRow>(x + i * cols, real);
  });
  return max;
}

VocabRowSums vocab_parallel_row_sums(const Tensor& logits, const Tensor& targets, int64_t real, int64_t start,
                                     int64_t ignore_index, const Tensor& max) {
  const int64_t rows = logits.size(0), cols = logits.size(1);
  VocabRowSums s{empty({rows}, float64()), empty({rows}, float64())};
  const int64_t* t = targets.data<int64_t>();
  const double* mx = max.data<double>();
  double* se = s.sum_exp.data<double>();
  double* tl = s.target_logit.data<double>();
  detail::dispatch_floating(logits.dtype(), "vocab_parallel_cross_entropy", [&]<class T>() {
    const T* x = logits.data<T>();
#pragma omp parallel for if (rows * cols > kParallelThreshold) schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      const T* row = x + i * cols;
      se[i] = strata_kernels::vp_row_sum_exp<CpuRow>(row, real, mx[i]);
      tl[i] = strata_kernels::vp_target_logit(row, strata_kernels::vp_local_target(t[i], start, real, ignore_index));
    }
  });
  return s;
}

Tensor vocab_parallel_loss(const Tensor& targets, int64_t vocab, int64_t ignore_index, const Tensor& max,
                           const Tensor& sum_exp, const Tensor& target_logit, int64_t counted, DType dtype) {
  const double total =
      strata_kernels::vp_loss_total<CpuRow>(targets.data<int64_t>(), targets.numel(), vocab, ignore_index,
                                            max.data<double>(), sum_exp.data<double>(), target_logit.data<double>());
  // One rounding of the double quotient to dtype, as the GPU's kernel.
  return scalar_tensor(counted > 0 ? total / static_cast<double>(counted) : 0.0, {.dtype = dtype});
}

Tensor vocab_parallel_grad(const Tensor& logits, const Tensor& targets, int64_t real, int64_t start, int64_t vocab,
                           int64_t ignore_index, const Tensor& max, const Tensor& sum_exp, double scale) {
  const int64_t rows = logits.size(0), cols = logits.size(1);
  Tensor dx = empty_like(logits);
  const int64_t* t = targets.data<int64_t>();
  const double* mx = max.data<double>();
  const double* se = sum_exp.data<double>();
  detail::dispatch_floating(logits.dtype(), "vocab_parallel_cross_entropy backward", [&]<class T>() {
    const T* x = logits.data<T>();
    T* d = dx.data<T>();
#pragma omp parallel for if (rows * cols > kParallelThreshold) schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      const bool counted =
          strata_kernels::vp_target_state(t[i], vocab, ignore_index) == strata_kernels::kVocabTargetCounted;
      strata_kernels::vp_grad_row<CpuRow>(x + i * cols, cols, real,
                                          strata_kernels::vp_local_target(t[i], start, real, ignore_index), counted,
                                          mx[i], se[i], scale, d + i * cols);
    }
  });
  return dx;
}

VocabShardIndices vocab_shard_indices(const Tensor& tokens, int64_t vocab, int64_t start, int64_t part) {
  VocabShardIndices r{empty(tokens.shape(), {.dtype = DType::Int64}), empty(tokens.shape(), {.dtype = DType::Bool})};
  const int64_t* in = tokens.data<int64_t>();
  int64_t* local = r.local.data<int64_t>();
  bool* outside = r.outside.data<bool>();
  for (int64_t i = 0; i < tokens.numel(); ++i) {
    STRATA_CHECK(strata_kernels::vp_shard_index(in[i], vocab, start, part, local + i, outside + i),
                 "VocabParallelEmbedding: index ", in[i], " at position ", i, " is out of range for a vocabulary of ",
                 vocab);
  }
  return r;
}

}  // namespace strata::parallel::vocab_cpu
