// logsumexp over dimensions (reduce.h): the max-shifted line kernel of
// backend/cpu/line_min_logsumexp.h or cuda_ops, and a backward of existing ops (the softmax
// weights exp(x - out) times the gradient), so it runs wherever they do.
#include "backend/cpu/line_min_logsumexp.h"

#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "strata/autograd/function.h"
#include "strata/ops/elementwise.h"
#include "strata/ops/reduce.h"

namespace strata {
namespace {

// One flag per dimension of x: reduced or kept. A dimension listed twice is refused.
std::vector<bool> reduced_dims(const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<bool> mask(x.shape().size(), false);
  for (int64_t d : dims) {
    const auto n = static_cast<size_t>(normalize_dim(d, x.dim(), "logsumexp"));
    STRATA_CHECK(!mask[n], "logsumexp: dimension ", d, " listed twice (dims of a tensor of shape ", x.shape(), ")");
    mask[n] = true;
  }
  return mask;
}

Shape without_reduced(const Shape& kept_shape, const std::vector<bool>& mask) {
  Shape s;
  for (size_t d = 0; d < kept_shape.size(); ++d)
    if (!mask[d]) s.push_back(kept_shape[d]);
  return s;
}

}  // namespace

Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  STRATA_CHECK(x.defined(), "logsumexp: input is undefined");
  STRATA_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64, "logsumexp: input has dtype ", x.dtype(),
               " (shape ", x.shape(), "); float32 or float64 expected (convert with .to())");
  const std::vector<bool> mask = reduced_dims(x, dims);
  Tensor kept = detail::on_device(
      "logsumexp", x.device(), [&] { return cpu::logsumexp_keepdim(x, mask); },
      [&] { return cuda_ops::logsumexp_keepdim(x, mask); });
  Tensor out = keepdim ? kept : kept.view(without_reduced(kept.shape(), mask));
  if (autograd::needs_grad({x})) {
    Tensor xs = x.detach();
    autograd::record("LogsumexpBackward", {x}, {out}, {xs, kept}, [xs, kept](autograd::BackwardContext& ctx) {
      const Tensor g = ctx.grad().reshape(kept.shape());
      return std::vector<Tensor>{mul(exp(sub(xs, kept)), g)};
    });
  }
  return out;
}

}  // namespace strata
