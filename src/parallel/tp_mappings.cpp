#include "strata/parallel/tp_mappings.h"

#include <string>

#include "strata/autograd/function.h"
#include "strata/autograd/grad_mode.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {
namespace {

int64_t checked_dim(const Tensor& x, int64_t dim, const char* op) {
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  STRATA_CHECK(d >= 0 && d < x.dim(), op, ": dim ", dim, " is out of range for a tensor of shape ", x.shape());
  return d;
}

// x with `dim` moved to the front, contiguous: the layout whose equal chunks of elements
// are the slices along dim, as all_gather and reduce_scatter split their buffers.
Tensor dim_first(const Tensor& x, int64_t dim) { return x.transpose(0, dim).contiguous(); }

Shape with_size(Shape s, int64_t dim, int64_t size) {
  s[static_cast<size_t>(dim)] = size;
  return s;
}

}  // namespace

Tensor all_reduce_copy(const Tensor& x, dist::ProcessGroup& group) {
  NoGradGuard no_grad;  // the collective itself; the mappings below record its transpose
  Tensor out = x.contiguous().clone();
  group.all_reduce(out)->wait();
  return out;
}

Tensor slice_along(const Tensor& x, int64_t dim, dist::ProcessGroup& group) {
  NoGradGuard no_grad;  // the collective itself; the mappings below record its transpose
  const int64_t d = checked_dim(x, dim, "slice_along");
  const int64_t n = group.size();
  STRATA_CHECK(x.size(d) % n == 0, "tensor parallel split: dim ", d, " of shape ", x.shape(),
               " does not divide by the ", n, " ranks of group ", group.name());
  const int64_t part = x.size(d) / n;
  return x.narrow(d, part * group.rank(), part).contiguous();
}

Tensor all_gather_along(const Tensor& x, int64_t dim, dist::ProcessGroup& group) {
  NoGradGuard no_grad;  // the collective itself; the mappings below record its transpose
  const int64_t d = checked_dim(x, dim, "all_gather_along");
  const int64_t n = group.size();
  Tensor in = dim_first(x, d);
  Shape out_shape = in.shape();
  out_shape[0] *= n;
  Tensor out = empty(out_shape, {.dtype = x.dtype(), .device = x.device()});
  Tensor out_flat = out.view({out.numel()});
  group.all_gather(out_flat, in.view({in.numel()}))->wait();
  return out.transpose(0, d).contiguous();
}

Tensor reduce_scatter_along(const Tensor& x, int64_t dim, dist::ProcessGroup& group) {
  NoGradGuard no_grad;  // the collective itself; the mappings below record its transpose
  const int64_t d = checked_dim(x, dim, "reduce_scatter_along");
  const int64_t n = group.size();
  STRATA_CHECK(x.size(d) % n == 0, "tensor parallel reduce-scatter: dim ", d, " of shape ", x.shape(),
               " does not divide by the ", n, " ranks of group ", group.name());
  Tensor in = dim_first(x, d);
  Tensor out = empty(with_size(in.shape(), 0, in.size(0) / n), {.dtype = x.dtype(), .device = x.device()});
  Tensor out_flat = out.view({out.numel()});
  group.reduce_scatter(out_flat, in.view({in.numel()}))->wait();
  return out.transpose(0, d).contiguous();
}

Tensor copy_to_tp_region(const Tensor& x, dist::ProcessGroup& group) {
  if (group.size() == 1) return x;
  Tensor out = x.detach();
  if (autograd::needs_grad({x}))
    autograd::record("CopyToTensorParallelRegion", {x}, {out}, {}, [&group](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{all_reduce_copy(ctx.grad(), group)};
    });
  return out;
}

Tensor reduce_from_tp_region(const Tensor& x, dist::ProcessGroup& group) {
  if (group.size() == 1) return x;
  Tensor out = all_reduce_copy(x, group);
  if (autograd::needs_grad({x}))
    autograd::record("ReduceFromTensorParallelRegion", {x}, {out}, {},
                     [](autograd::BackwardContext& ctx) { return std::vector<Tensor>{ctx.grad()}; });
  return out;
}

Tensor scatter_to_tp_region(const Tensor& x, int64_t dim, dist::ProcessGroup& group) {
  if (group.size() == 1) return x;
  const int64_t d = checked_dim(x, dim, "scatter_to_tp_region");
  Tensor out = slice_along(x, d, group);
  if (autograd::needs_grad({x}))
    autograd::record("ScatterToTensorParallelRegion", {x}, {out}, {}, [d, &group](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{all_gather_along(ctx.grad(), d, group)};
    });
  return out;
}

Tensor gather_from_tp_region(const Tensor& x, int64_t dim, dist::ProcessGroup& group) {
  if (group.size() == 1) return x;
  const int64_t d = checked_dim(x, dim, "gather_from_tp_region");
  Tensor out = all_gather_along(x, d, group);
  if (autograd::needs_grad({x}))
    autograd::record("GatherFromTensorParallelRegion", {x}, {out}, {}, [d, &group](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{slice_along(ctx.grad(), d, group)};
    });
  return out;
}

Tensor gather_from_sequence_region(const Tensor& x, int64_t dim, dist::ProcessGroup& group) {
  if (group.size() == 1) return x;
  const int64_t d = checked_dim(x, dim, "gather_from_sequence_region");
  Tensor out = all_gather_along(x, d, group);
  if (autograd::needs_grad({x}))
    autograd::record("GatherFromSequenceParallelRegion", {x}, {out}, {}, [d, &group](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{reduce_scatter_along(ctx.grad(), d, group)};
    });
  return out;
}

Tensor reduce_scatter_to_sequence_region(const Tensor& x, int64_t dim, dist::ProcessGroup& group) {
  if (group.size() == 1) return x;
  const int64_t d = checked_dim(x, dim, "reduce_scatter_to_sequence_region");
  Tensor out = reduce_scatter_along(x, d, group);
  if (autograd::needs_grad({x}))
    autograd::record("ReduceScatterToSequenceParallelRegion", {x}, {out}, {},
                     [d, &group](autograd::BackwardContext& ctx) {
                       return std::vector<Tensor>{all_gather_along(ctx.grad(), d, group)};
                     });
  return out;
}

}  // namespace strata::parallel
