// rms_norm over the last dimension (kernels in src/backend/cpu/rms_norm).
#include "backend/cpu/rms_norm.h"

#include <cmath>

#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/autocast_cast.h"
#include "ops/nn_common.h"
#include "strata/autograd/function.h"
#include "strata/ops/nn_functional.h"

namespace strata {
namespace {

// out_dtype is x's, or a 16-bit dtype; 16-bit data (x, the output, their gradients) is read
// and written by the kernel itself, with float32 statistics and math (row_norms.h).
Tensor rms_norm_rows(const Tensor& x, const Tensor& weight, double eps, DType out_dtype) {
  const DType compute = detail::is_16bit(x.dtype()) ? DType::Float32 : x.dtype();
  STRATA_CHECK(x.dim() >= 1, "rms_norm: input is a scalar (shape []); it needs at least one dimension");
  const int64_t d = x.size(-1);
  STRATA_CHECK(eps >= 0 && std::isfinite(eps), "rms_norm: eps must be finite and >= 0, got ", eps);
  if (weight.defined()) {
    detail::check_param(weight, compute, "rms_norm", "weight");
    STRATA_CHECK(weight.shape() == Shape({d}), "rms_norm: weight must have shape [", d,
                 "] (the input's last dimension), got ", weight.shape(), " for input of shape ", x.shape());
  }
  const Device device = detail::common_device("rms_norm", {{"input", x}, {"weight", weight}});
  Tensor xc = detail::contiguous_data(x);
  // A 16-bit weight: a float32 copy for this forward only; backward converts it again.
  Tensor wc = detail::param_data(weight);
  backend::RmsNormResult r = detail::on_device(
      "rms_norm", device, [&] { return cpu::rms_norm_forward(xc, wc, eps, out_dtype); },
      [&] { return cuda_ops::rms_norm_forward(xc, wc, eps, out_dtype); });
  if (autograd::needs_grad({x, weight})) {
    const bool w16 = weight.defined() && detail::is_16bit(weight.dtype());
    Tensor w_saved = w16 ? weight.detach() : wc;
    const DType wdt = weight.defined() ? weight.dtype() : compute;
    autograd::record("RmsNormBackward", {x, weight}, {r.out}, {xc, w_saved, r.rstd},
                     [xc, w_saved, w16, wdt, rstd = r.rstd](autograd::BackwardContext& ctx) {
                       Tensor w = w16 ? detail::param_data(w_saved) : w_saved;
                       Tensor go = detail::contiguous_data(ctx.grad());
                       backend::RmsNormGrads g = detail::on_device(
                           "rms_norm backward", xc.device(),
                           [&] { return cpu::rms_norm_backward(go, xc, w, rstd, ctx.needs(0), ctx.needs(1)); },
                           [&] { return cuda_ops::rms_norm_backward(go, xc, w, rstd, ctx.needs(0), ctx.needs(1)); });
                       return std::vector<Tensor>{g.dx, detail::param_grad(g.dweight, wdt)};
                     });
  }
  return r.out;
}

}  // namespace

// As layer_norm: 16-bit in or out, float32 statistics and math inside the kernel.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  STRATA_CHECK(x.defined(), "rms_norm: input is undefined");
  if (const std::optional<DType> out = detail::norm_output_16bit(x)) return rms_norm_rows(x, weight, eps, *out);
  detail::check_nn_input(x, "rms_norm", "input");
  return rms_norm_rows(x, weight, eps, x.dtype());
}

}  // namespace strata
