#include "strata/tensor/ops/reduce.h"

#include "../cpu/reduce.h"
#include "../device_dispatch.h"
#include "strata/autograd/function.h"
#include "strata/tensor/factory.h"
#include "strata/tensor/ops/elementwise.h"

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

// Max and arg-max along dimension d, keeping it as size 1.
void max_keepdim(const Tensor& x, int64_t d, Tensor* values, Tensor* indices, const char* op) {
  detail::on_device(op, x.device(), [&] { cpu::max_keepdim(x, d, values, indices); });
}

Shape drop_reduced(const Shape& keep_shape, const std::vector<bool>& mask) {
  Shape s;
  for (size_t d = 0; d < keep_shape.size(); ++d)
    if (!mask[d]) s.push_back(keep_shape[d]);
  return s;
}

Tensor sum_mask(const Tensor& x, const std::vector<bool>& mask, bool keepdim) {
  Tensor kept = detail::on_device("sum", x.device(), [&] { return cpu::sum_keepdim(x, mask); });
  Tensor out = keepdim ? kept : kept.detach().view(drop_reduced(kept.shape(), mask));
  if (autograd::needs_grad({x})) {
    autograd::record("SumBackward", {x}, {out}, [in_shape = x.shape(), kept_shape = kept.shape()](autograd::BackwardContext& ctx) {
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

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = normalize_dim(dim, x.dim(), "max");
  Tensor values, indices;
  max_keepdim(x, d, &values, &indices, "max");
  Tensor out = keepdim ? values : values.squeeze(d);
  if (autograd::needs_grad({x})) {
    autograd::record("MaxBackward", {x}, {out},
                     [in_shape = x.shape(), kept = values.shape(), indices, d](autograd::BackwardContext& ctx) {
                       Tensor g = ctx.grad().reshape(kept).contiguous();
                       return std::vector<Tensor>{detail::on_device("max backward", indices.device(), [&] {
                         return cpu::max_backward(g, indices, in_shape, d);
                       })};
                     });
  }
  return out;
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = normalize_dim(dim, x.dim(), "argmax");
  Tensor values, indices;
  max_keepdim(x, d, &values, &indices, "argmax");
  return keepdim ? indices : indices.squeeze(d);
}

}  // namespace strata
