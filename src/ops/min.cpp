// min / min_with_indices / argmin along one dimension (reduce.h), max's mirror: the line
// kernel of backend/cpu/line_min_logsumexp.h or cuda_ops, and a backward that routes the
// gradient to the picked positions, as max's does.
#include "backend/cpu/line_min_logsumexp.h"

#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/index_grad.h"
#include "strata/autograd/function.h"
#include "strata/ops/reduce.h"

namespace strata {
namespace {

// The values and positions of the minimum along x's dimension `dim` (normalised, checked
// non-empty), kept as size 1.
ValuesIndices min_keepdim(const char* op, const Tensor& x, int64_t dim, int64_t* d) {
  STRATA_CHECK(x.defined(), op, ": input is undefined");
  *d = normalize_dim(dim, x.dim(), op);
  STRATA_CHECK(x.size(*d) > 0, op, ": dimension ", dim, " of shape ", x.shape(), " is empty");
  ValuesIndices r;
  detail::on_device(
      op, x.device(), [&] { cpu::min_keepdim(x, *d, &r.values, &r.indices); },
      [&] { cuda_ops::min_keepdim(x, *d, &r.values, &r.indices); });
  return r;
}

}  // namespace

ValuesIndices min_with_indices(const Tensor& x, int64_t dim, bool keepdim) {
  int64_t d = 0;
  const ValuesIndices kept = min_keepdim("min", x, dim, &d);
  ValuesIndices r{keepdim ? kept.values : kept.values.squeeze(d), keepdim ? kept.indices : kept.indices.squeeze(d)};
  if (autograd::needs_grad({x})) {
    autograd::record("MinBackward", {x}, {r.values}, {kept.indices},
                     [in_shape = x.shape(), kept_shape = kept.values.shape(), indices = kept.indices,
                      d](autograd::BackwardContext& ctx) {
                       const Tensor g = ctx.grad().reshape(kept_shape);
                       return std::vector<Tensor>{detail::on_device(
                           "MinBackward", g.device(),
                           [&] { return detail::scatter_add_into_zeros("MinBackward", in_shape, d, indices, g); },
                           [&] { return cuda_ops::scatter_add_lines("MinBackward", in_shape, d, indices, g); })};
                     });
  }
  return r;
}

Tensor min(const Tensor& x, int64_t dim, bool keepdim) { return min_with_indices(x, dim, keepdim).values; }

Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  int64_t d = 0;
  const ValuesIndices kept = min_keepdim("argmin", x, dim, &d);
  return keepdim ? kept.indices : kept.indices.squeeze(d);
}

}  // namespace strata
