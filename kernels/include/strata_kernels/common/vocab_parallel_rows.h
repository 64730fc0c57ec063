#pragma once
// The rows of the vocabulary-parallel cross-entropy (Megatron's loss over logits split along
// the vocabulary), written once against a row executor R (row_reduce.h: CpuRow on the CPU,
// WarpRow on the GPU), so both devices run the same arithmetic in the same order.
//
// Each rank holds columns [start, start + cols) of the vocabulary; the first `real` of them
// are real words, the rest padding (they take no part: probability zero, gradient zero).
// The statistics are double whatever the logits' dtype, and the caller reduces them over the
// group between the steps:
//   1. vp_row_max          -> all_reduce(max)
//   2. vp_row_sum_exp      (with the group's max), vp_target_logit -> all_reduce(sum)
//   3. vp_loss_total       / counted rows = the loss; vp_grad_row its gradient.
// exp is double's: glibc's on the CPU, CUDA's on the GPU (they may differ by an ulp).
#include <math.h>
#include <stdint.h>

#include "strata_kernels/common/macros.h"
#include "strata_kernels/common/row_reduce.h"

namespace strata_kernels {

// What a target means for the loss: ignored (ignore_index), counted (in [0, vocab)), or an
// error (anything else).
enum VocabTargetState : int32_t { kVocabTargetIgnored = 0, kVocabTargetCounted = 1, kVocabTargetBad = 2 };

STRATA_HD int32_t vp_target_state(int64_t target, int64_t vocab, int64_t ignore_index) {
  if (target == ignore_index) return kVocabTargetIgnored;
  return target >= 0 && target < vocab ? kVocabTargetCounted : kVocabTargetBad;
}

// This rank's maximum of a row over its real columns (-inf when it holds none).
template <class R, class T>
STRATA_HD double vp_row_max(const T* x, int64_t real) {
  return R::max(
      real, [&](int64_t j) { return static_cast<double>(x[j]); }, static_cast<double>(-INFINITY));
}

// This rank's share of sum exp(x - m) over its real columns, m the group's row maximum.
template <class R, class T>
STRATA_HD double vp_row_sum_exp(const T* x, int64_t real, double m) {
  return R::sum(real, [&](int64_t j) { return exp(static_cast<double>(x[j]) - m); });
}

// The target's column on this rank, or -1 when another rank (or nobody: ignored) holds it.
STRATA_HD int64_t vp_local_target(int64_t target, int64_t start, int64_t real, int64_t ignore_index) {
  const int64_t j = target - start;
  return target != ignore_index && j >= 0 && j < real ? j : -1;
}

// The target's logit when this rank holds it, else 0 (the sum over the group is the logit).
template <class T>
STRATA_HD double vp_target_logit(const T* x, int64_t local_target) {
  return local_target >= 0 ? static_cast<double>(x[local_target]) : 0.0;
}

// Sum over rows of log(sum_exp) + max - target_logit, the counted rows only, in the rows'
// 32-lane order (one warp on the GPU).
template <class R>
STRATA_HD double vp_loss_total(const int64_t* targets, int64_t rows, int64_t vocab, int64_t ignore_index,
                               const double* max, const double* sum_exp, const double* target_logit) {
  return R::sum(rows, [&](int64_t i) {
    if (vp_target_state(targets[i], vocab, ignore_index) != kVocabTargetCounted) return 0.0;
    return log(sum_exp[i]) + max[i] - target_logit[i];
  });
}

// d loss / d x of one row of cols values: scale * (softmax - one_hot(target)) on the real
// columns of a counted row (local_target < 0: the target is elsewhere), 0 on padding and on
// every column of an ignored row (counted = false).
template <class R, class T>
STRATA_HD void vp_grad_row(const T* x, int64_t cols, int64_t real, int64_t local_target, bool counted, double m,
                           double sum_exp, double scale, T* dx) {
  R::for_each(cols, [&](int64_t j) {
    if (!counted || j >= real) {
      dx[j] = T(0);
      return;
    }
    const double p = exp(static_cast<double>(x[j]) - m) / sum_exp;
    dx[j] = static_cast<T>(scale * (p - (j == local_target ? 1.0 : 0.0)));
  });
}

}  // namespace strata_kernels
