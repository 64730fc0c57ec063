#pragma once
// How a model's sequence is split over the ranks of a context-parallel group, seen from nn:
// each rank holds some positions of every sequence, and attention must see all of them.
// parallel::ContextParallel (strata/parallel/context_parallel.h) implements it; nn never
// includes parallel/. A model given one (CausalLM::set_context_split) takes this rank's tokens
// ([B, T / degree], in the split's order) and computes their hidden states, logits and loss.
#include <cstdint>

#include "strata/tensor/tensor.h"

namespace strata::nn {

class ContextSplit {
 public:
  virtual ~ContextSplit() = default;
  virtual int64_t degree() const = 0;  // the ranks the sequence is split over
  // This rank's positions of x along `dim`, where x holds the whole sequence there
  // (differentiable).
  virtual Tensor local(const Tensor& x, int64_t dim) const = 0;
  // Causal attention of this rank's queries [B, H, T / degree, D] over the keys and values of
  // the whole sequence, each rank holding its own [B, Hkv, T / degree, D].
  virtual Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v) = 0;
  // The mean over the whole sequence of a per-position value whose mean over this rank's
  // `local_count` positions (a scalar tensor, e.g. the targets not ignored) is `local_mean`:
  // the same value on every rank. Its backward gives each rank `degree` times the gradient of
  // its own share, so that gradients averaged over the split's ranks (as data parallelism
  // averages them) are those of the global mean.
  virtual Tensor global_mean(const Tensor& local_mean, const Tensor& local_count) = 0;
  // x summed elementwise over the split's ranks (every rank gets the sum; not differentiable),
  // e.g. the targets of a whole micro-batch from each rank's count.
  virtual Tensor sum_over_ranks(const Tensor& x) = 0;
};

}  // namespace strata::nn
