// layer_norm over the last dimension (kernels in src/tensor/cpu/layer_norm).
#include "../cpu/layer_norm.h"

#include <cmath>

#include "nn_common.h"
#include "strata/autograd/function.h"
#include "strata/tensor/ops/nn_functional.h"

namespace strata {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  detail::check_nn_input(x, "layer_norm", "input");
  STRATA_CHECK(x.dim() >= 1, "layer_norm: input is a scalar (shape []); it needs at least one dimension");
  const int64_t d = x.size(-1);
  STRATA_CHECK(eps >= 0 && std::isfinite(eps), "layer_norm: eps must be finite and >= 0, got ", eps);
  for (const auto& [t, name] : {std::pair{weight, "weight"}, std::pair{bias, "bias"}}) {
    if (!t.defined()) continue;
    detail::check_nn_input(t, "layer_norm", name);
    STRATA_CHECK(t.dtype() == x.dtype(), "layer_norm: ", name, " has dtype ", t.dtype(), " but input has ", x.dtype());
    STRATA_CHECK(t.shape() == Shape({d}), "layer_norm: ", name, " must have shape [", d,
                 "] (the input's last dimension), got ", t.shape(), " for input of shape ", x.shape());
  }
  Tensor xc = detail::contiguous_data(x);
  Tensor wc = weight.defined() ? detail::contiguous_data(weight) : Tensor();
  Tensor bc = bias.defined() ? detail::contiguous_data(bias) : Tensor();
  cpu::LayerNormResult r = cpu::layer_norm_forward(xc, wc, bc, eps);
  if (autograd::needs_grad({x, weight, bias})) {
    autograd::record("LayerNormBackward", {x, weight, bias}, {r.out},
                     [xc, wc, mean = r.mean, rstd = r.rstd](autograd::BackwardContext& ctx) {
                       cpu::LayerNormGrads g =
                           cpu::layer_norm_backward(detail::contiguous_data(ctx.grad()), xc, wc, mean, rstd,
                                                    ctx.needs(0), ctx.needs(1), ctx.needs(2));
                       return std::vector<Tensor>{g.dx, g.dweight, g.dbias};
                     });
  }
  return r.out;
}

}  // namespace strata
