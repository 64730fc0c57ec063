#pragma once
// The rows of one block of ring attention (parallel/context_parallel_attention.cpp): the
// scores of a chunk of queries against a chunk of keys, x = q.k (unscaled, from a GEMM), of
// which a row's first `valid` keys count (all of them, or on a diagonal block those up to
// the query's own position: attention_valid_keys). Written once against a row executor R
// (row_reduce.h: CpuRow on the CPU, WarpRow on the GPU), in the compute type T (float or
// double), so that both devices run the same arithmetic; each replaces several passes of
// composed ops over the block.
#include <math.h>
#include <stdint.h>

#include "strata_kernels/common/fast_math.h"
#include "strata_kernels/common/macros.h"
#include "strata_kernels/common/row_reduce.h"
#include "strata_kernels/common/row_softmax.h"

namespace strata_kernels {

// Forward: y = softmax(scale * x) over the valid keys (0 beyond) and *lse = their
// log-sum-exp, m + log(sum exp(scale * x - m)), which merges blocks (online softmax) and lets
// backward recompute y.
template <class R, class T>
STRATA_HD void ring_block_softmax_row(const T* x, T* y, T* lse, int64_t n, int64_t valid, T scale) {
  const T m = R::max(
      valid, [&](int64_t j) { return x[j] * scale; }, lowest_value<T>());
  const double s = R::sum(valid, [&](int64_t j) {
    const T e = fast_exp(x[j] * scale - m);
    y[j] = e;
    return static_cast<double>(e);
  });
  const T inv = static_cast<T>(1.0 / s);
  R::for_each(valid, [&](int64_t j) { y[j] = y[j] * inv; });
  R::for_each(n - valid, [&](int64_t j) { y[valid + j] = T(0); });
  if (R::leader()) *lse = m + static_cast<T>(log(s));
}

// Backward's probabilities from the forward's log-sum-exp of the whole row (all blocks):
// y = exp(scale * x - lse) over the valid keys, 0 beyond.
template <class R, class T>
STRATA_HD void ring_block_probs_row(const T* x, T lse, T* y, int64_t n, int64_t valid, T scale) {
  R::for_each(valid, [&](int64_t j) { y[j] = fast_exp(x[j] * scale - lse); });
  R::for_each(n - valid, [&](int64_t j) { y[valid + j] = T(0); });
}

// The scores' gradient, d(q.k) = scale * p * (dp - delta), where dp = grad_out . v and delta
// = rowsum(grad_out * out) over the whole row; written over dp (in place).
template <class R, class T>
STRATA_HD void ring_block_score_grad_row(T* dp, const T* p, T delta, int64_t n, T scale) {
  R::for_each(n, [&](int64_t j) { dp[j] = scale * (p[j] * (dp[j] - delta)); });
}

}  // namespace strata_kernels
