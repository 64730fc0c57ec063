// Cross-entropy over logits split along the vocabulary (Megatron's vocab-parallel loss).
#include <cmath>
#include <limits>

#include "strata/autograd/function.h"
#include "strata/parallel/tp_layers.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {
namespace {

// Per-row statistics of the full (gathered) logits, reduced over the group.
struct RowStats {
  Tensor max;      // float64 [M]
  Tensor sum_exp;  // float64 [M]: sum of exp(logit - max) over the real vocabulary
  Tensor target;   // float64 [M]: the target's logit (0 for ignored rows)
};

template <class T>
RowStats row_stats(const Tensor& logits, const int64_t* targets, int64_t start, int64_t real_cols,
                   int64_t ignore_index, dist::ProcessGroup& group) {
  const int64_t M = logits.size(0), V = logits.size(1);
  const T* l = logits.data<T>();
  RowStats s{empty({M}, {.dtype = DType::Float64}), empty({M}, {.dtype = DType::Float64}),
             zeros({M}, {.dtype = DType::Float64})};
  double* mx = s.max.data<double>();
  for (int64_t i = 0; i < M; ++i) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < real_cols; ++c) m = std::max(m, static_cast<double>(l[i * V + c]));
    mx[i] = m;
  }
  group.all_reduce(s.max, dist::ReduceOp::Max)->wait();
  double* se = s.sum_exp.data<double>();
  double* tg = s.target.data<double>();
  for (int64_t i = 0; i < M; ++i) {
    double sum = 0.0;
    for (int64_t c = 0; c < real_cols; ++c) sum += std::exp(static_cast<double>(l[i * V + c]) - mx[i]);
    se[i] = sum;
    const int64_t j = targets[i] - start;
    if (targets[i] != ignore_index && j >= 0 && j < real_cols) tg[i] = static_cast<double>(l[i * V + j]);
  }
  group.all_reduce(s.sum_exp)->wait();
  group.all_reduce(s.target)->wait();
  return s;
}

// d loss / d logits = scale * (softmax - one_hot(target)) on real columns of counted rows.
template <class T>
Tensor logits_grad(const Tensor& logits, const int64_t* targets, const RowStats& s, int64_t start,
                   int64_t real_cols, int64_t ignore_index, double scale) {
  const int64_t M = logits.size(0), V = logits.size(1);
  Tensor g = zeros(logits.shape(), {.dtype = logits.dtype()});
  const T* l = logits.data<T>();
  T* out = g.data<T>();
  const double *mx = s.max.data<double>(), *se = s.sum_exp.data<double>();
  for (int64_t i = 0; i < M; ++i) {
    if (targets[i] == ignore_index) continue;
    for (int64_t c = 0; c < real_cols; ++c) {
      const double p = std::exp(static_cast<double>(l[i * V + c]) - mx[i]) / se[i];
      out[i * V + c] = static_cast<T>(scale * (p - (c == targets[i] - start ? 1.0 : 0.0)));
    }
  }
  return g;
}

}  // namespace

Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                                    int64_t vocab_size, dist::ProcessGroup& group, int64_t ignore_index) {
  STRATA_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0),
               "vocab_parallel_cross_entropy: logits must be [M, V_part] and targets [M], got ", logits.shape(),
               " and ", targets.shape());
  STRATA_CHECK(logits.dtype() == DType::Float32 || logits.dtype() == DType::Float64,
               "vocab_parallel_cross_entropy: logits must be float32 or float64, got ", logits.dtype());
  STRATA_CHECK(targets.dtype() == DType::Int64, "vocab_parallel_cross_entropy: targets must be int64, got ",
               targets.dtype());
  STRATA_CHECK(vocab_start >= 0 && vocab_start <= vocab_size, "vocab_parallel_cross_entropy: vocab_start ",
               vocab_start, " is outside the vocabulary of ", vocab_size);
  Tensor l = logits.contiguous().detach();
  Tensor t = targets.contiguous();
  const int64_t M = l.size(0);
  // Columns past the real vocabulary are padding: they take no part (probability zero).
  const int64_t real_cols = std::min(l.size(1), vocab_size - vocab_start);
  const int64_t* tp = t.data<int64_t>();
  int64_t counted = 0;
  for (int64_t i = 0; i < M; ++i) {
    if (tp[i] == ignore_index) continue;
    STRATA_CHECK(tp[i] >= 0 && tp[i] < vocab_size, "vocab_parallel_cross_entropy: target ", tp[i], " at position ",
                 i, " is out of range for a vocabulary of ", vocab_size);
    ++counted;
  }
  RowStats s = l.dtype() == DType::Float32 ? row_stats<float>(l, tp, vocab_start, real_cols, ignore_index, group)
                                           : row_stats<double>(l, tp, vocab_start, real_cols, ignore_index, group);
  double total = 0.0;
  for (int64_t i = 0; i < M; ++i)
    if (tp[i] != ignore_index)
      total += std::log(s.sum_exp.data<double>()[i]) + s.max.data<double>()[i] - s.target.data<double>()[i];
  // No counted target: loss 0 and gradient 0, as strata's cross_entropy.
  Tensor loss = full({}, counted > 0 ? total / static_cast<double>(counted) : 0.0, {.dtype = l.dtype()});
  if (autograd::needs_grad({logits}))
    autograd::record("VocabParallelCrossEntropyBackward", {logits}, {loss},
                     [l, t, s, vocab_start, real_cols, ignore_index, counted](autograd::BackwardContext& ctx) {
                       const double scale = counted > 0 ? ctx.grad().item() / static_cast<double>(counted) : 0.0;
                       const int64_t* tg = t.data<int64_t>();
                       Tensor g = l.dtype() == DType::Float32
                                      ? logits_grad<float>(l, tg, s, vocab_start, real_cols, ignore_index, scale)
                                      : logits_grad<double>(l, tg, s, vocab_start, real_cols, ignore_index, scale);
                       return std::vector<Tensor>{g};
                     });
  return loss;
}

}  // namespace strata::parallel
