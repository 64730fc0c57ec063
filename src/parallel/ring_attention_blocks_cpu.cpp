#include "backend/cpu/multiversion.h"
#include "parallel/ring_attention_blocks.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/attention_block.h"
#include "tensor/dtype_dispatch.h"

namespace strata::parallel::ring_cpu {
namespace {

using strata_kernels::CpuRow;

// Rows are independent, so threads change nothing in the results.
constexpr int64_t kParallelThreshold = 16384;  // elements; below this threads cost more than they save

Shape row_values_shape(const Tensor& scores) {
  Shape shape = scores.shape();
  shape[shape.size() - 1] = 1;
  return shape;
}

template <class T>
STRATA_MULTIVERSION void softmax_rows(const T* s, T* p, T* lse, int64_t rows, int64_t c, T scale, bool causal) {
#pragma omp parallel for if (rows * c > kParallelThreshold) schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    strata_kernels::ring_block_softmax_row<CpuRow>(s + r * c, p + r * c, lse + r, c,
                                                   strata_kernels::attention_valid_keys(r, c, c, causal), scale);
}

template <class T>
STRATA_MULTIVERSION void probs_rows(const T* s, const T* lse, T* p, int64_t rows, int64_t c, T scale, bool causal) {
#pragma omp parallel for if (rows * c > kParallelThreshold) schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    strata_kernels::ring_block_probs_row<CpuRow>(s + r * c, lse[r], p + r * c, c,
                                                 strata_kernels::attention_valid_keys(r, c, c, causal), scale);
}

template <class T>
STRATA_MULTIVERSION void score_grad_rows(T* dp, const T* p, const T* delta, int64_t rows, int64_t c, T scale) {
#pragma omp parallel for if (rows * c > kParallelThreshold) schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    strata_kernels::ring_block_score_grad_row<CpuRow>(dp + r * c, p + r * c, delta[r], c, scale);
}

}  // namespace

RingBlockSoftmax ring_block_softmax(const Tensor& scores, double scale, bool causal) {
  RingBlockSoftmax out{empty(scores.shape(), {.dtype = scores.dtype()}),
                       empty(row_values_shape(scores), {.dtype = scores.dtype()})};
  const int64_t c = scores.size(-1);
  if (scores.numel() == 0) return out;
  detail::dispatch_floating(scores.dtype(), "ring attention block", [&]<class T>() {
    softmax_rows(scores.data<T>(), out.probs.data<T>(), out.lse.data<T>(), scores.numel() / c, c, static_cast<T>(scale),
                 causal);
  });
  return out;
}

Tensor ring_block_probs(const Tensor& scores, const Tensor& lse, double scale, bool causal) {
  Tensor probs = empty(scores.shape(), {.dtype = scores.dtype()});
  const int64_t c = scores.size(-1);
  if (scores.numel() == 0) return probs;
  detail::dispatch_floating(scores.dtype(), "ring attention block", [&]<class T>() {
    probs_rows(scores.data<T>(), lse.data<T>(), probs.data<T>(), scores.numel() / c, c, static_cast<T>(scale), causal);
  });
  return probs;
}

Tensor ring_block_score_grad(Tensor dp, const Tensor& probs, const Tensor& delta, double scale) {
  const int64_t c = dp.size(-1);
  if (dp.numel() == 0) return dp;
  detail::dispatch_floating(dp.dtype(), "ring attention block", [&]<class T>() {
    score_grad_rows(dp.data<T>(), probs.data<T>(), delta.data<T>(), dp.numel() / c, c, static_cast<T>(scale));
  });
  return dp;
}

}  // namespace strata::parallel::ring_cpu
