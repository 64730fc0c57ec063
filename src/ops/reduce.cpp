#include "strata/ops/reduce.h"

#include <algorithm>

#include "backend/cpu/reduce.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/index_grad.h"
#include "strata/autograd/function.h"
#include "strata/ops/elementwise.h"
#include "strata/tensor/factory.h"

namespace strata {
namespace {

std::vector<bool> dims_mask(const Tensor& x, const std::vector<int64_t>& dims, const char* op) {
  std::vector<bool> mask(x.shape().size(), false);
  for (int64_t d : dims) {
    size_t n = static_cast<size_t>(normalize_dim(d, x.dim(), op));
    STRATA_CHECK(!mask[n], op, ": dimension ", d, " listed twice");
    mask[n] = true;
  }
  return mask;
}

// Checks shared by max and argmax; returns dim in [0, x.dim()).
int64_t check_along(const char* op, const Tensor& x, int64_t dim) {
  STRATA_CHECK(x.defined(), op, ": input is undefined");
  const int64_t d = normalize_dim(dim, x.dim(), op);
  STRATA_CHECK(x.size(d) > 0, op, ": dimension ", dim, " of shape ", x.shape(), " is empty");
  return d;
}

// Values picked along `d` (kept as a dimension) and their positions, with a node that routes
// the gradient back to those positions.
ValuesIndices indexed_result(const char* node, const Tensor& x, int64_t d, const Tensor& values, const Tensor& indices,
                             bool keepdim) {
  ValuesIndices r{keepdim ? values : values.squeeze(d), keepdim ? indices : indices.squeeze(d)};
  if (autograd::needs_grad({x})) {
    autograd::record(
        node, {x}, {r.values}, {indices},
        [node, in_shape = x.shape(), kept = values.shape(), indices, d](autograd::BackwardContext& ctx) {
          const Tensor g = ctx.grad().reshape(kept);
          return std::vector<Tensor>{detail::on_device(
              node, g.device(), [&] { return detail::scatter_add_into_zeros(node, in_shape, d, indices, g); },
              [&] { return cuda_ops::scatter_add_lines(node, in_shape, d, indices, g); })};
        });
  }
  return r;
}

Shape drop_reduced(const Shape& keep_shape, const std::vector<bool>& mask) {
  Shape s;
  for (size_t d = 0; d < keep_shape.size(); ++d)
    if (!mask[d]) s.push_back(keep_shape[d]);
  return s;
}

Tensor sum_mask(const Tensor& x, const std::vector<bool>& mask, bool keepdim) {
  Tensor kept = detail::on_device(
      "sum", x.device(), [&] { return cpu::sum_keepdim(x, mask); }, [&] { return cuda_ops::sum_keepdim(x, mask); });
  Tensor out = keepdim ? kept : kept.detach().view(drop_reduced(kept.shape(), mask));
  if (autograd::needs_grad({x})) {
    autograd::record("SumBackward", {x}, {out}, {},
                     [in_shape = x.shape(), kept_shape = kept.shape()](autograd::BackwardContext& ctx) {
                       return std::vector<Tensor>{ctx.grad().reshape(kept_shape).expand(in_shape).contiguous()};
                     });
  }
  return out;
}

}  // namespace

Tensor sum(const Tensor& x) { return sum_mask(x, std::vector<bool>(x.shape().size(), true), false); }

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return sum_mask(x, dims_mask(x, dims, "sum"), keepdim);
}

Tensor mean(const Tensor& x) {
  STRATA_CHECK(x.numel() > 0, "mean: tensor of shape ", x.shape(), " is empty");
  return mul(sum(x), 1.0 / static_cast<double>(x.numel()));
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  std::vector<bool> mask = dims_mask(x, dims, "mean");
  int64_t count = 1;
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) count *= x.shape()[d];
  STRATA_CHECK(count > 0, "mean: reducing empty dimensions of shape ", x.shape());
  return mul(sum_mask(x, mask, keepdim), 1.0 / static_cast<double>(count));
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  STRATA_CHECK(shape.size() <= x.shape().size(), "sum_to: cannot reduce ", x.shape(), " to ", shape);
  const size_t lead = x.shape().size() - shape.size();
  std::vector<bool> mask(x.shape().size(), false);
  for (size_t d = 0; d < x.shape().size(); ++d) {
    if (d < lead) {
      mask[d] = true;
    } else {
      int64_t want = shape[d - lead];
      STRATA_CHECK(want == x.shape()[d] || want == 1, "sum_to: cannot reduce ", x.shape(), " to ", shape);
      mask[d] = want == 1 && x.shape()[d] != 1;
    }
  }
  return sum_mask(x, mask, true).reshape(shape);
}

Tensor var(const Tensor& x) {
  std::vector<int64_t> all(x.shape().size());
  for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
  return var(x, all);
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, VarOptions options) {
  std::vector<bool> mask = dims_mask(x, dims, "var");
  STRATA_CHECK(is_floating(x.dtype()), "var: input has dtype ", x.dtype(), " (shape ", x.shape(),
               "); a floating-point dtype expected");
  int64_t count = 1;
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) count *= x.shape()[d];
  STRATA_CHECK(count > 0, "var: reducing empty dimensions of shape ", x.shape());
  // Two passes (the mean first) rather than sum(x^2) - sum(x)^2: no cancellation.
  Tensor centered = sub(x, mul(sum_mask(x, mask, true), 1.0 / static_cast<double>(count)));
  Tensor squares = sum_mask(mul(centered, centered), mask, options.keepdim);
  // 1/0 = inf as in torch: inf for a positive sum of squares, NaN for zero.
  const int64_t divisor = std::max<int64_t>(0, count - options.correction);
  return mul(squares, 1.0 / static_cast<double>(divisor));
}

ValuesIndices max_with_indices(const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = check_along("max", x, dim);
  Tensor values, indices;
  detail::on_device(
      "max", x.device(), [&] { cpu::max_keepdim(x, d, &values, &indices); },
      [&] { cuda_ops::max_keepdim(x, d, &values, &indices); });
  return indexed_result("MaxBackward", x, d, values, indices, keepdim);
}

Tensor max(const Tensor& x, int64_t dim, bool keepdim) { return max_with_indices(x, dim, keepdim).values; }

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = check_along("argmax", x, dim);
  Tensor values, indices;
  detail::on_device(
      "argmax", x.device(), [&] { cpu::max_keepdim(x, d, &values, &indices); },
      [&] { cuda_ops::max_keepdim(x, d, &values, &indices); });
  return keepdim ? indices : indices.squeeze(d);
}

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool /*sorted: always*/) {
  STRATA_CHECK(x.defined(), "topk: input is undefined");
  const int64_t d = normalize_dim(dim, x.dim(), "topk");
  STRATA_CHECK(k >= 0 && k <= x.size(d), "topk: k = ", k, " is out of range for dimension ", dim, " of size ",
               x.size(d), " (input shape ", x.shape(), ")");
  Tensor values, indices;
  detail::on_device(
      "topk", x.device(), [&] { cpu::topk(x, k, d, largest, &values, &indices); },
      [&] { cuda_ops::topk(x, k, d, largest, &values, &indices); });
  return indexed_result("TopkBackward", x, d, values, indices, true);
}

Tensor cumsum(const Tensor& x, int64_t dim) {
  STRATA_CHECK(x.defined(), "cumsum: input is undefined");
  STRATA_CHECK(x.dim() >= 1, "cumsum: input is zero-dimensional (shape []); it needs at least one dimension");
  const int64_t d = normalize_dim(dim, x.dim(), "cumsum");
  Tensor out = detail::on_device(
      "cumsum", x.device(), [&] { return cpu::cumsum(x, d, false); }, [&] { return cuda_ops::cumsum(x, d, false); });
  if (autograd::needs_grad({x})) {
    // Each input feeds every later output: the gradient is the suffix sum of grad.
    autograd::record("CumsumBackward", {x}, {out}, {}, [d](autograd::BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      return std::vector<Tensor>{detail::on_device(
          "cumsum backward", g.device(), [&] { return cpu::cumsum(g, d, true); },
          [&] { return cuda_ops::cumsum(g, d, true); })};
    });
  }
  return out;
}

}  // namespace strata
