// sort and argsort: the sorted dimension is moved last (a contiguous [rows, n] array, the
// layout both kernels take: cpu/sort and CUDA's segmented radix sort), sorted, moved back.
#include "strata/ops/sorting.h"

#include "backend/cpu/sort.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/index_grad.h"
#include "strata/autograd/function.h"

namespace strata {
namespace {

// The gradient of the values: g[.., t, ..] goes back to x[.., indices[.., t, ..], ..].
void record_sort_backward(const Tensor& x, int64_t d, const ValuesIndices& r) {
  autograd::record("SortBackward", {x}, {r.values}, {r.indices},
                   [in_shape = x.shape(), indices = r.indices, d](autograd::BackwardContext& ctx) {
                     const Tensor g = ctx.grad().contiguous();
                     return std::vector<Tensor>{detail::on_device(
                         "sort backward", g.device(),
                         [&] { return detail::scatter_add_into_zeros("sort backward", in_shape, d, indices, g); },
                         [&] { return cuda_ops::scatter_add_lines("sort backward", in_shape, d, indices, g); })};
                   });
}

}  // namespace

ValuesIndices sort(const Tensor& x, int64_t dim, bool descending, bool /*stable: always*/) {
  STRATA_CHECK(x.defined(), "sort: input is undefined");
  if (x.dim() == 0) {  // torch sorts a scalar as a one-element line
    normalize_dim(dim, 1, "sort");
    ValuesIndices r = sort(x.reshape({1}), 0, descending);
    return {r.values.reshape({}), r.indices.reshape({})};
  }
  const int64_t d = normalize_dim(dim, x.dim(), "sort"), last = x.dim() - 1;
  const Tensor rows = (d == last ? x.detach() : x.detach().transpose(d, last)).contiguous();
  ValuesIndices r;
  detail::on_device(
      "sort", x.device(), [&] { cpu::sort_rows(rows, descending, &r.values, &r.indices); },
      [&] { cuda_ops::sort_rows(rows, descending, &r.values, &r.indices); });
  if (d != last) {
    r.values = r.values.transpose(d, last).contiguous();
    r.indices = r.indices.transpose(d, last).contiguous();
  }
  if (autograd::needs_grad({x})) record_sort_backward(x, d, r);
  return r;
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  STRATA_CHECK(x.defined(), "argsort: input is undefined");
  return sort(x.detach(), dim, descending).indices;
}

}  // namespace strata
