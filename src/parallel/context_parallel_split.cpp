#include <vector>

#include "strata/autograd/function.h"
#include "strata/ops/elementwise.h"
#include "strata/ops/shape_ops.h"
#include "strata/parallel/context_parallel.h"
#include "strata/parallel/tp_mappings.h"

namespace strata::parallel {

ContextParallelSplit context_parallel_split(int64_t sequence, const dist::ProcessGroup& group) {
  const int64_t chunks = 2 * static_cast<int64_t>(group.size());
  STRATA_CHECK(sequence > 0 && sequence % chunks == 0, "context parallelism: a sequence of ", sequence,
               " tokens cannot be balanced over the ", group.size(), " ranks of group ", group.name(),
               ": it must split into 2 * CP = ", chunks, " equal chunks (rank r holds chunks r and 2*CP-1-r)");
  return {.sequence = sequence, .degree = group.size(), .rank = group.rank()};
}

Tensor take_local_sequence(const Tensor& x, int64_t dim, const ContextParallelSplit& split) {
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  STRATA_CHECK(d >= 0 && d < x.dim(), "take_local_sequence: dim ", dim, " is out of range for shape ", x.shape());
  STRATA_CHECK(x.size(d) == split.sequence, "take_local_sequence: dim ", d, " of shape ", x.shape(),
               " is not the split's sequence of ", split.sequence, " tokens");
  if (split.degree == 1) return x.contiguous();
  return cat({x.narrow(d, split.chunk_begin(0), split.chunk()), x.narrow(d, split.chunk_begin(1), split.chunk())}, d);
}

std::vector<int64_t> local_positions(const ContextParallelSplit& split) {
  std::vector<int64_t> positions;
  positions.reserve(static_cast<size_t>(split.local_length()));
  for (int which = 0; which < 2; ++which)
    for (int64_t i = 0; i < split.chunk(); ++i) positions.push_back(split.chunk_begin(which) + i);
  return positions;
}

Tensor ContextParallel::local(const Tensor& x, int64_t dim) const {
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  STRATA_CHECK(d >= 0 && d < x.dim(), "ContextParallel::local: dim ", dim, " is out of range for shape ", x.shape());
  return take_local_sequence(x, d, context_parallel_split(x.size(d), group_));
}

Tensor ContextParallel::global_mean(const Tensor& local_mean, const Tensor& local_count) {
  Tensor count = local_count.to(local_mean.dtype());
  // Forward: the ranks' sums over the ranks' counts. Backward: each rank's share, count /
  // total, times the degree that averaging the gradients over the ranks divides by.
  Tensor total = clamp(all_reduce_copy(count, group_), 1.0, std::nullopt);
  Tensor out = div(all_reduce_copy(mul(local_mean.detach(), count), group_), total);
  if (autograd::needs_grad({local_mean})) {
    Tensor scale = mul(div(count, total), static_cast<double>(degree()));
    autograd::record("ContextParallelGlobalMeanBackward", {local_mean}, {out}, {scale},
                     [scale](autograd::BackwardContext& ctx) { return std::vector<Tensor>{mul(ctx.grad(), scale)}; });
  }
  return out;
}

Tensor ContextParallel::sum_over_ranks(const Tensor& x) { return all_reduce_copy(x.detach(), group_); }

}  // namespace strata::parallel
