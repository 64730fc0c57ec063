// layer_norm over the last dimension (kernels in src/backend/cpu/layer_norm).
#include "backend/cpu/layer_norm.h"

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
Tensor layer_norm_rows(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, DType out_dtype) {
  const DType compute = detail::is_16bit(x.dtype()) ? DType::Float32 : x.dtype();
  STRATA_CHECK(x.dim() >= 1, "layer_norm: input is a scalar (shape []); it needs at least one dimension");
  const int64_t d = x.size(-1);
  STRATA_CHECK(eps >= 0 && std::isfinite(eps), "layer_norm: eps must be finite and >= 0, got ", eps);
  for (const auto& [t, name] : {std::pair{weight, "weight"}, std::pair{bias, "bias"}}) {
    if (!t.defined()) continue;
    detail::check_param(t, compute, "layer_norm", name);
    STRATA_CHECK(t.shape() == Shape({d}), "layer_norm: ", name, " must have shape [", d,
                 "] (the input's last dimension), got ", t.shape(), " for input of shape ", x.shape());
  }
  const Device device = detail::common_device("layer_norm", {{"input", x}, {"weight", weight}, {"bias", bias}});
  Tensor xc = detail::contiguous_data(x);
  // 16-bit parameters: float32 copies for this forward only; backward converts the weight again.
  Tensor wc = detail::param_data(weight);
  Tensor bc = detail::param_data(bias);
  backend::LayerNormResult r = detail::on_device(
      "layer_norm", device, [&] { return cpu::layer_norm_forward(xc, wc, bc, eps, out_dtype); },
      [&] { return cuda_ops::layer_norm_forward(xc, wc, bc, eps, out_dtype); });
  if (autograd::needs_grad({x, weight, bias})) {
    const bool w16 = weight.defined() && detail::is_16bit(weight.dtype());
    Tensor w_saved = w16 ? weight.detach() : wc;
    const DType wdt = weight.defined() ? weight.dtype() : compute;
    const DType bdt = bias.defined() ? bias.dtype() : compute;
    autograd::record(
        "LayerNormBackward", {x, weight, bias}, {r.out}, {xc, w_saved, r.mean, r.rstd},
        [xc, w_saved, w16, wdt, bdt, mean = r.mean, rstd = r.rstd](autograd::BackwardContext& ctx) {
          Tensor w = w16 ? detail::param_data(w_saved) : w_saved;
          Tensor go = detail::contiguous_data(ctx.grad());
          backend::LayerNormGrads g = detail::on_device(
              "layer_norm backward", xc.device(),
              [&] { return cpu::layer_norm_backward(go, xc, w, mean, rstd, ctx.needs(0), ctx.needs(1), ctx.needs(2)); },
              [&] {
                return cuda_ops::layer_norm_backward(go, xc, w, mean, rstd, ctx.needs(0), ctx.needs(1), ctx.needs(2));
              });
          return std::vector<Tensor>{g.dx, detail::param_grad(g.dweight, wdt), detail::param_grad(g.dbias, bdt)};
        });
  }
  return r.out;
}

}  // namespace

// 16-bit input or output (autocast's 16-bit activations): float32 statistics and math in the
// kernel, the output rounded once on store; float32 parameters keep float32 gradients.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  STRATA_CHECK(x.defined(), "layer_norm: input is undefined");
  if (const std::optional<DType> out = detail::norm_output_16bit(x)) return layer_norm_rows(x, weight, bias, eps, *out);
  detail::check_nn_input(x, "layer_norm", "input");
  return layer_norm_rows(x, weight, bias, eps, x.dtype());
}

}  // namespace strata
