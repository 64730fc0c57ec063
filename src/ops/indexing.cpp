// index_select / index_add and gather / scatter_add: device-neutral checks, the device
// switch, autograd. Kernels in src/backend/cpu/indexing; index_select and index_add (and their
// gradients) also in src/backend/cuda/indexing.
#include "strata/ops/indexing.h"

#include <string>

#include "backend/cpu/indexing.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/index_grad.h"
#include "strata/autograd/function.h"
#include "strata/tensor/factory.h"

namespace strata {
namespace {

// The index as the kernels read it: int64, contiguous, outside autograd.
Tensor index_data(const Tensor& index) { return index.detach().to(DType::Int64).contiguous(); }

// Checks shared by every op here (src may be null); returns dim in [0, x.dim()).
int64_t check_operands(const char* op, const Tensor& x, int64_t dim, const Tensor& index, const Tensor* src) {
  STRATA_CHECK(x.defined(), op, ": input is undefined");
  STRATA_CHECK(index.defined(), op, ": index is undefined");
  STRATA_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32, op, ": index has dtype ", index.dtype(),
               " (shape ", index.shape(), "); int64 or int32 expected");
  if (src) {
    STRATA_CHECK(src->defined(), op, ": src is undefined");
    STRATA_CHECK(src->dtype() == x.dtype(), op, ": src has dtype ", src->dtype(), " but input has ", x.dtype());
  }
  detail::common_device(op, {{"input", x}, {"index", index}, {"src", src ? *src : Tensor()}});
  STRATA_CHECK(x.dim() >= 1, op, ": input is zero-dimensional (shape []); it needs at least one dimension");
  return normalize_dim(dim, x.dim(), op);
}

// index.size(d) <= bound.size(d) for every d but `skip` (-1: none), with equal ranks.
void check_fits(const char* op, const Tensor& index, const Tensor& bound, const char* bound_name, int64_t skip) {
  STRATA_CHECK(index.dim() == bound.dim(), op, ": index has shape ", index.shape(), " but ", bound_name, " has shape ",
               bound.shape(), "; they need the same number of dimensions");
  for (int64_t d = 0; d < index.dim(); ++d) {
    STRATA_CHECK(d == skip || index.size(d) <= bound.size(d), op, ": index of shape ", index.shape(),
                 " is larger than ", bound_name, " of shape ", bound.shape(), " in dimension ", d,
                 skip >= 0 ? " (only dimension " : "", skip >= 0 ? std::to_string(skip) : "",
                 skip >= 0 ? " may be larger)" : "");
  }
}

// g of index's shape placed at the corner of zeros of `shape` (the gradient of a src larger
// than the index).
Tensor pad_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  Tensor out = zeros(shape, {.dtype = g.dtype(), .device = g.device()});
  Tensor corner = out;
  for (int64_t d = 0; d < g.dim(); ++d) corner = corner.narrow(d, 0, g.size(d));
  corner.copy_(g);
  return out;
}

}  // namespace

namespace detail {
Tensor scatter_add_into_zeros(const char* op, const Shape& shape, int64_t dim, const Tensor& index,
                              const Tensor& grad) {
  Tensor out = zeros(shape, {.dtype = grad.dtype(), .device = grad.device()});
  on_device(op, grad.device(), [&] { cpu::scatter_add_(out, dim, index, grad); });
  return out;
}
}  // namespace detail

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  const int64_t d = check_operands("index_select", x, dim, index, nullptr);
  STRATA_CHECK(index.dim() <= 1, "index_select: index must be 1-D, got shape ", index.shape());
  Tensor idx = index_data(index);
  Tensor out = detail::on_device(
      "index_select", x.device(),
      [&] {
        cpu::check_index_range("index_select", idx, d, x.shape());
        return cpu::index_select(x.detach().contiguous(), d, idx);
      },
      [&] { return cuda_ops::index_select(x, d, idx, "index_select", true); });
  if (autograd::needs_grad({x})) {
    autograd::record("IndexSelectBackward", {x}, {out}, {idx},
                     [idx, d, shape = x.shape()](autograd::BackwardContext& ctx) {
                       Tensor g = ctx.grad().contiguous();
                       Tensor gx = zeros(shape, {.dtype = g.dtype(), .device = g.device()});
                       // The forward checked the index.
                       detail::on_device(
                           "index_select backward", g.device(), [&] { cpu::index_add_(gx, d, idx, g); },
                           [&] { cuda_ops::index_add_(gx, d, idx, g, "index_select backward", false); });
                       return std::vector<Tensor>{gx};
                     });
  }
  return out;
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t d = check_operands("index_add", x, dim, index, &src);
  STRATA_CHECK(index.dim() <= 1, "index_add: index must be 1-D, got shape ", index.shape());
  Shape want = x.shape();
  want[static_cast<size_t>(d)] = index.numel();
  STRATA_CHECK(src.shape() == want, "index_add: src has shape ", src.shape(), " but input of shape ", x.shape(),
               " and an index of ", index.numel(), " entries along dimension ", dim, " need ", want);
  Tensor idx = index_data(index);
  Tensor out = x.detach().clone();
  detail::on_device(
      "index_add", x.device(),
      [&] {
        cpu::check_index_range("index_add", idx, d, x.shape());
        cpu::index_add_(out, d, idx, src.detach().contiguous());
      },
      [&] { cuda_ops::index_add_(out, d, idx, src, "index_add", true); });
  if (autograd::needs_grad({x, src})) {
    autograd::record("IndexAddBackward", {x, src}, {out}, {idx}, [idx, d](autograd::BackwardContext& ctx) {
      std::vector<Tensor> grads(2);
      if (ctx.needs(0)) grads[0] = ctx.grad();
      if (ctx.needs(1)) {
        Tensor g = ctx.grad().contiguous();
        grads[1] = detail::on_device(
            "index_add backward", g.device(), [&] { return cpu::index_select(g, d, idx); },
            [&] { return cuda_ops::index_select(g, d, idx, "index_add backward", false); });
      }
      return grads;
    });
  }
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const int64_t d = check_operands("gather", x, dim, index, nullptr);
  check_fits("gather", index, x, "input", d);
  Tensor idx = index_data(index);
  Tensor out = detail::on_device("gather", x.device(), [&] {
    cpu::check_index_range("gather", idx, d, x.shape());
    return cpu::gather(x.detach(), d, idx);
  });
  if (autograd::needs_grad({x})) {
    autograd::record("GatherBackward", {x}, {out}, {idx}, [idx, d, shape = x.shape()](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{detail::scatter_add_into_zeros("gather backward", shape, d, idx, ctx.grad())};
    });
  }
  return out;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t d = check_operands("scatter_add", x, dim, index, &src);
  check_fits("scatter_add", index, src, "src", -1);
  check_fits("scatter_add", index, x, "input", d);
  Tensor idx = index_data(index);
  Tensor out = x.detach().clone();
  detail::on_device("scatter_add", x.device(), [&] {
    cpu::check_index_range("scatter_add", idx, d, x.shape());
    cpu::scatter_add_(out, d, idx, src.detach());
  });
  if (autograd::needs_grad({x, src})) {
    autograd::record("ScatterAddBackward", {x, src}, {out}, {idx},
                     [idx, d, src_shape = src.shape()](autograd::BackwardContext& ctx) {
                       std::vector<Tensor> grads(2);
                       if (ctx.needs(0)) grads[0] = ctx.grad();
                       if (ctx.needs(1)) {
                         Tensor g = detail::on_device("scatter_add backward", ctx.grad().device(),
                                                      [&] { return cpu::gather(ctx.grad(), d, idx); });
                         grads[1] = pad_to(g, src_shape);
                       }
                       return grads;
                     });
  }
  return out;
}

}  // namespace strata
