// tril / triu (shape_ops.h): the kernels of backend/cpu/triangle.h or cuda_ops; the
// gradient is the same triangle of the output's gradient.
#include "backend/cpu/triangle.h"

#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "strata/autograd/function.h"
#include "strata/ops/shape_ops.h"

namespace strata {
namespace {

Tensor triangle(const Tensor& x, int64_t diagonal, bool lower) {
  const char* op = lower ? "tril" : "triu";
  STRATA_CHECK(x.defined(), op, ": input is undefined");
  STRATA_CHECK(x.dim() >= 2, op, ": input of shape ", x.shape(), " has ", x.dim(),
               " dimension(s); it needs at least 2 (a matrix, or a batch of matrices in the last two)");
  Tensor out = detail::on_device(
      op, x.device(), [&] { return cpu::triangle(x, diagonal, lower); },
      [&] { return cuda_ops::triangle(x, diagonal, lower); });
  if (autograd::needs_grad({x})) {
    autograd::record(lower ? "TrilBackward" : "TriuBackward", {x}, {out}, {},
                     [diagonal, lower](autograd::BackwardContext& ctx) {
                       return std::vector<Tensor>{triangle(ctx.grad(), diagonal, lower)};
                     });
  }
  return out;
}

}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, true); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, false); }

}  // namespace strata
